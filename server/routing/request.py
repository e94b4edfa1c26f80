"""What one completion request is, below everything that handles it.

The pipeline, the gate, the context cutter and the evaluation all speak these types;
none of them is defined by the module that uses it, so no lower layer imports upward.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Protocol

import attrs

from synconfroute.clients.plan import FolderRules

from ..syntax import Position, SyntaxDocument
from ..vocab.verdict import Verdict

if TYPE_CHECKING:
    from ..settings.config import Settings
    from ..workspace.crossfile import Candidate
    from ..workspace.recent_edits import EditChunk


@attrs.frozen
class Anchor:
    """Where the cursor is in a whole open document (for incremental checks)."""

    document: SyntaxDocument
    at: Position


@attrs.frozen(kw_only=True)
class CompletionContext:
    """The text around the cursor, already cut to the context window."""

    prefix: str
    suffix: str
    language: str = ""
    path: str = ""
    document: Anchor | None = None  # the open document, for an incremental gate check
    roots: tuple[str, ...] = ()  # workspace folders (paths): never_send is relative to them
    folders: tuple[FolderRules, ...] = ()  # each open folder's own privacy settings
    # Cross-file context candidates, ranked, not yet filtered by privacy nor cut to a
    # budget (completion.context = "workspace"); `repo` names the workspace folder.
    crossfile: tuple[Candidate, ...] = ()
    repo: str = ""
    # Chunks the user changed lately in other open files (completion.recent_edits),
    # newest first, not yet filtered by privacy nor cut to a budget.
    recent_edits: tuple[EditChunk, ...] = ()
    # The user asked (LSP trigger kind Invoked), not typing: its escalation ranks first.
    invoked: bool = False
    # Typing has stopped (the debounce): the local tier may start before it, the remote
    # tier waits for it (True) and is never asked when a newer request came (False).
    settled: Awaitable[bool] | None = attrs.field(default=None, eq=False, repr=False)
    # The file's own settings: the window's with the tighten-only keys of the workspace
    # folders that hold it (`Session.settings_for`). Plans are sized by them (prompt and
    # context budgets); None: the pipeline's.
    settings: Settings | None = attrs.field(default=None, eq=False, repr=False)


class Gate(Protocol):
    """The syntax gate as the pipeline sees it."""

    def check(self, ctx: CompletionContext, completion: str) -> Verdict: ...

    def prepare(self, ctx: CompletionContext) -> None:
        """Do ahead what a check at `ctx`'s cursor needs of the text without the
        completion (while the model generates); never required, never a verdict."""
        ...

    @property
    def blocking(self) -> bool:
        """True when a check may take long (compilers): run it off the event loop."""
        ...


__all__ = ["Anchor", "CompletionContext", "Gate"]
