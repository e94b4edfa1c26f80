"""Where completions fire: `completion.languages` and `completion.disabled_in`, checked
before any model is asked (the local one included), so a disabled cursor costs no
model request at all."""

from __future__ import annotations

from ..settings.config import Settings
from ..syntax.cursor_scope import scope_at
from ..syntax.languages import detect_language
from ..workspace.documents import DocState


def completion_off(st: DocState, offset: int, settings: Settings) -> str | None:
    """Why no completion is wanted at code-point `offset` of `st`, or None."""
    want = settings.completion
    if want.languages:
        allowed = {detect_language(v) or v.strip().lower() for v in want.languages}
        if st.language not in allowed:
            return f"completion.languages does not list {st.language or 'this language'}"
    if not want.disabled_in or not st.syntax.supported:
        return None
    limit = settings.routing.syntax_max_bytes
    if limit and len(st.text.text) > limit:
        return None  # no tree is kept for a file this large: the scope is unknown
    tree = st.syntax.tree
    if tree is None:
        return None
    pos = len(st.text.text[:offset].encode("utf-8", "surrogatepass"))
    scope = scope_at(tree, pos)
    if scope is not None and scope in want.disabled_in:
        return f"completion.disabled_in: the cursor is in a {scope}"
    return None


__all__ = ["completion_off"]
