// The newest checkpoints are drawn on the right, so a tree opens scrolled to its head (or,
// in an older window, to that window's newest end), the head's lane kept at the top.
document.addEventListener("DOMContentLoaded", () => {
  for (const box of document.querySelectorAll(".cs-tree-box")) {
    const head = box.querySelector("svg.cs-tree a.cs-head circle[r='6']");
    if (!head) {
      box.scrollLeft = box.scrollWidth;
      continue;
    }
    const frame = box.getBoundingClientRect();
    const node = head.getBoundingClientRect();
    // Some room to the head's right for the forks' labels; the rest shows its past.
    const right = Math.min(120, box.clientWidth / 3);
    box.scrollLeft += node.right - frame.left - (box.clientWidth - right);
    box.scrollTop = 0;
  }
});
