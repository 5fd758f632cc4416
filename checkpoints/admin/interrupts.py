"""Which node asked an interrupt, down through the subgraphs that ran it.

An interrupt raised inside a subgraph is written twice: in the subgraph's namespace by the
node that asked (``ask``), and at the parent's checkpoint by the parent's task that ran the
subgraph (``review``). The parent's write alone names ``review``; the operator needs
``review › ask``. The subgraph's namespace is ``"<node>:<task id>"`` of that parent task, so
its writes are found from the parent's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from checkpoints.admin import queries
from checkpoints.admin.store_choice import store_alias
from checkpoints.channels import INTERRUPT
from checkpoints.status import node_of

SEP = " › "


def _nodes(ns: str) -> list[str]:
    return [part.partition(":")[0] for part in ns.split("|")] if ns else []


def subgraph_prefix(ns: str, node: str, task_id: str) -> str:
    """The namespace a subgraph run by ``task_id`` (node ``node``) at ``ns`` writes in."""
    own = f"{node}:{task_id}"
    return f"{ns}|{own}" if ns else own


def asker(ns: str, node: str, inner: Sequence[tuple[int, str, str, str]]) -> str:
    """The node path that asked: the deepest subgraph interrupt write in ``inner`` (rows of
    `queries.subgraph_interrupts` for this write), else ``node`` under ``ns``."""
    if inner:
        _thread, deepest_ns, _cid, task_path = max(inner, key=lambda r: (r[1].count("|"), r[2]))
        asked = node_of(task_path)
        return SEP.join([*_nodes(deepest_ns), *([asked] if asked else [])])
    return SEP.join([*_nodes(ns), *([node] if node else [])])


def interrupt_node(thread_pk: int, ns: str, task_id: str, node: str) -> str:
    """The node path that asked the interrupt written by ``task_id`` (node ``node``) at a
    checkpoint of namespace ``ns``."""
    if not node:
        return SEP.join(_nodes(ns))
    rows = queries.subgraph_interrupts(
        alias=store_alias(),
        places=[(thread_pk, subgraph_prefix(ns, node, task_id))],
        channel=INTERRUPT,
    )
    return asker(ns, node, rows)


def interrupt_nodes(asked: Iterable[tuple[int, str, str]]) -> dict[int, str]:
    """Per thread pk, the node path that asked its root-namespace interrupt, for a page of
    threads at once; ``asked`` holds (thread pk, task id, node) of each thread's write."""
    asked = [(pk, task_id, node) for pk, task_id, node in asked if node]
    places = [(pk, subgraph_prefix("", node, task_id)) for pk, task_id, node in asked]
    rows = queries.subgraph_interrupts(alias=store_alias(), places=places, channel=INTERRUPT)
    found: dict[int, str] = {}
    for pk, task_id, node in asked:
        prefix = subgraph_prefix("", node, task_id)
        mine = [r for r in rows if r[0] == pk and r[1].startswith(prefix)]
        found[pk] = asker("", node, mine)
    return found
