"""Each workspace folder's own settings, for the files inside it.

The editor is asked `workspace/configuration` once per folder with the folder as
`scopeUri` (VS Code answers an item without one from the window's scope only, so a
folder's `.vscode/settings.json` is seen only that way). Each answer is merged over the
user's settings like any workspace configuration (tighten-only keys), and what it says
about privacy becomes that folder's `FolderRules`, which the egress gate applies to every
file inside the folder. A folder whose answer has not come yet, or whose privacy values
cannot be read, keeps its files local (unknown means private).

The folder's other tighten-only keys (routing policy and thresholds, context sizes,
`completion.disabled_in`/`languages`, `next_edit.*`) shape each request for a file inside
it: `settings_in` merges every answer of the folders holding the file over the window's
settings, outermost first, by the same tighten-only rule (`config.merge_workspace`), so a
folder can only send less than the window, and an inner folder less than an outer one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from synconfroute.clients.plan import FolderRules

from ..settings import config
from ..workspace import privacy


def rules_of(
    root: str,
    folder: config.Settings,
    user: config.Settings,
    issues: Iterable[config.SettingsIssue],
) -> FolderRules:
    """The privacy part of one folder's settings (`user`: the settings without it)."""
    no_remote = folder.remote.backend == "none" or (
        bool(user.remote.model) and not folder.remote.model
    )
    return FolderRules(
        root=root,
        never_send=tuple(folder.privacy.never_send),
        secret_files=folder.privacy.secret_files,
        closed=folder.privacy.local_only or no_remote or any(i.fail_closed for i in issues),
        no_context=not folder.remote.send_context,
    )


def settings_in(window: config.Settings, answers: Sequence[Mapping[str, Any]]) -> config.Settings:
    """`window` (the settings every request starts from) tightened by each folder's
    answer in turn, outermost first. Each merge keeps only what sends less than the
    settings before it (a refused value keeps the tighter one, already reported when the
    folder's answer came), so the merges compose."""
    settings = window
    for options in answers:
        settings, _ = config.merge_workspace(settings, options)
    return settings


def holders(path: str, roots: Iterable[str]) -> tuple[str, ...]:
    """The folders among `roots` that hold `path`, outermost first: by the names the
    editor uses, or by real path (a folder or file reached through a symlink; resolved
    only for a folder that does not hold it by name)."""
    return _holders(path, roots)[0]


def _holders(path: str, roots: Iterable[str]) -> tuple[tuple[str, ...], bool]:
    """`holders`, and whether the answer came from the names alone (every folder holds
    `path` by name): then it is a function of the strings, which may be remembered; a
    real path is the file system's answer of this moment."""
    named = privacy.normal_path(path)
    real: str | None = None
    resolved = False
    seen: dict[str, bool] = {}  # what the file system said during this call
    held = []
    for r in roots:
        if privacy.within(named, (privacy.normal_path(r),)):
            held.append(r)
            continue
        if not resolved:
            real, resolved = privacy.real_path(path, seen=seen), True
        if real is None:
            continue
        real_root = privacy.real_path(r, seen=seen)
        if real_root is not None and privacy.within(real, (real_root,)):
            held.append(r)
    return tuple(sorted(held, key=len)), not resolved


_CHAINS_KEPT = 1024


class FolderSettings:
    """The rules and the workspace configuration of each folder open now, by its path
    (as `ContextBuilder.roots` names it)."""

    def __init__(self) -> None:
        self._rules: dict[str, FolderRules] = {}
        self._answers: dict[str, Mapping[str, Any]] = {}
        # The last merge per chain of folders, with the window settings it started from.
        self._merged: dict[tuple[str, ...], tuple[config.Settings, config.Settings]] = {}
        # The folders holding each file asked about, where the names alone said it
        # (`_holders`): every request asks it; cleared with every change of the folders.
        self._chains: dict[str, tuple[str, ...]] = {}
        # `current`'s last answer and the roots it was for; None: ask again.
        self._current: tuple[tuple[str, ...], tuple[FolderRules, ...] | None] = ((), None)
        self.generation = 0  # moves with every change of the folders or their answers

    def expect(self, roots: Iterable[str]) -> None:
        """These folders' settings are asked for: until they come, their files stay local."""
        for r in roots:
            self._rules.setdefault(r, FolderRules(root=r, closed=True))
        self._current = ((), None)

    def applied(self, rules: FolderRules, answer: Mapping[str, Any] | None = None) -> None:
        """A folder's configuration came: its privacy `rules`, and the `answer` itself."""
        self._rules[rules.root] = rules
        self._answers[rules.root] = dict(answer or {})
        self._merged.clear()
        self._chains.clear()
        self._current = ((), None)
        self.generation += 1

    def keep_only(self, roots: Iterable[str]) -> None:
        """Folders no longer open have no rules (their files are outside)."""
        open_now = set(roots)
        self._rules = {r: f for r, f in self._rules.items() if r in open_now}
        self._answers = {r: a for r, a in self._answers.items() if r in open_now}
        self._merged.clear()
        self._chains.clear()
        self._current = ((), None)
        self.generation += 1

    def settings_for(self, path: str, window: config.Settings) -> config.Settings:
        """The settings a request for the file at `path` follows: `window` tightened by
        the folders holding it (`settings_in`); `window` itself outside every folder."""
        if not self._answers:  # no folder has answered: nothing to tighten by
            return window
        chain = self._chains.get(path)
        if chain is None:
            chain, by_name = _holders(path, self._answers)
            if by_name:
                if len(self._chains) >= _CHAINS_KEPT:
                    self._chains.clear()
                self._chains[path] = chain
        if not chain:
            return window
        known = self._merged.get(chain)
        if known is not None and known[0] is window:  # settings objects are never mutated
            return known[1]
        merged = settings_in(window, [self._answers[r] for r in chain])
        self._merged[chain] = (window, merged)
        return merged

    def current(self, roots: Sequence[str]) -> tuple[FolderRules, ...]:
        """The rules of the folders among `roots` (every request asks: remembered until
        the folders, their rules or `roots` change)."""
        asked, known = self._current
        if known is not None and asked == roots:
            return known
        found = tuple(self._rules[r] for r in roots if r in self._rules)
        self._current = (tuple(roots), found)
        return found
