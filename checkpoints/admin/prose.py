"""Render the Markdown in a message as safe HTML: formatting yes, the author's HTML never.

Messages come from models, tools and users: any of them may hold ``<script>``, an
``onerror=`` attribute or a ``javascript:`` link. The parser runs with raw HTML off, so
every ``<`` in the text comes out escaped; links keep only http(s) and mailto targets;
images are not rendered (a remote image would load from elsewhere, which the console's CSP
refuses, and a tracking pixel is not a message).
"""

from __future__ import annotations

from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

__all__ = ["markdown_html"]

SAFE_SCHEMES = ("http://", "https://", "mailto:")


def _parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True})
    # Without the image rule, ![alt](src) stays text; html off already escapes tags.
    parser.disable(["image", "html_inline", "html_block"])
    parser.validateLink = _safe_link

    def link_open(renderer, tokens, idx, options, env):
        tokens[idx].attrSet("rel", "nofollow noopener noreferrer")
        return renderer.renderToken(tokens, idx, options, env)

    parser.add_render_rule("link_open", link_open)
    return parser


def _safe_link(url: str) -> bool:
    # markdown-it already refuses javascript:, vbscript:, file: and data:; a link in a
    # message has no business pointing into the console itself either.
    return url.strip().lower().startswith(SAFE_SCHEMES)


_PARSER = _parser()


def markdown_html(text: str) -> SafeString:
    """``text`` as HTML; one plain paragraph comes back without its ``<p>`` so a one-line
    message reads as the text it is."""
    html = _PARSER.render(text or "").strip()
    if html.startswith("<p>") and html.endswith("</p>") and html.count("<p>") == 1:
        html = html[3:-4]
    # Safe by construction: the parser escaped every character of the text it did not
    # turn into one of its own tags (see the module docstring).
    return mark_safe(html)
