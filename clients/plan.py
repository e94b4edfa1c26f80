"""The prompt plan: what one tier's prompt is made of, named by resolved real paths.

Computed once per request and tier (server/egress.py builds it), carried by the
`CompletionRequest` to the remote client, whose one send path hands it, with the
final body, to the egress check. Plain data: no file system access here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import attrs

# "window": the current file around the cursor; "context": another file's code;
# "dataset": text from no workspace file (a benchmark task, doctor's probe).
Role = Literal["window", "context", "dataset"]


@attrs.frozen
class PlanSource:
    """One file a prompt takes code from."""

    role: Role
    path: str  # as the editor or the index named it, `.`/`..` removed
    real: str | None  # resolved real path (symlinks followed); None: unresolvable
    chars: int = 0  # characters of it in the prompt


@attrs.frozen
class FolderRules:
    """A workspace folder's own privacy settings (its workspace configuration, asked with
    the folder as `scopeUri`; tighten-only keys): they apply to the files inside it."""

    root: str  # the folder, resolved (real path)
    never_send: tuple[str, ...] = ()  # patterns beyond the user's, relative to the folder
    secret_files: bool = False
    # Nothing of it leaves: local_only, no remote tier, or its settings not known (yet).
    closed: bool = False
    no_context: bool = False  # remote.send_context off: it feeds no other file's prompt


@attrs.frozen
class PromptPlan:
    """The sources of one tier's prompt, and the workspace folders they are judged in."""

    tier: str
    sources: tuple[PlanSource, ...]
    roots: tuple[str, ...] = ()  # workspace folders as named, normalised
    real_roots: tuple[str, ...] = ()  # the same, resolved
    folds_case: bool = False  # paths (and patterns) compared case-folded
    folders: tuple[FolderRules, ...] = ()  # per-folder settings of the folders open now

    @property
    def window(self) -> PlanSource | None:
        return next((s for s in self.sources if s.role == "window"), None)

    @property
    def context(self) -> tuple[PlanSource, ...]:
        return tuple(s for s in self.sources if s.role == "context")


def dataset_plan(what: str, chars: int) -> PromptPlan:
    """The plan of a prompt made of text from no workspace file (benchmark tasks,
    doctor's probe): nothing of the user's code, so no path to judge."""
    return PromptPlan(tier="remote", sources=(PlanSource("dataset", what, None, chars),))


# The egress check a remote client runs on (final body, plan) before each send; it
# raises `errors.EgressRefused` to stop the send.
EgressCheck = Callable[[bytes, "PromptPlan | None"], None]
