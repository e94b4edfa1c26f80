"""Each workspace folder's own privacy settings, for the files inside it.

The editor is asked `workspace/configuration` once per folder with the folder as
`scopeUri` (VS Code answers an item without one from the window's scope only, so a
folder's `.vscode/settings.json` is seen only that way). Each answer is merged over the
user's settings like any workspace configuration (tighten-only keys), and what it says
about privacy becomes that folder's `FolderRules`, which the egress gate applies to every
file inside the folder. A folder whose answer has not come yet, or whose privacy values
cannot be read, keeps its files local (unknown means private).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from synconfroute.clients.plan import FolderRules

from ..settings import config


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


class FolderSettings:
    """The rules of each folder open now, by its path (as `ContextBuilder.roots` names it)."""

    def __init__(self) -> None:
        self._rules: dict[str, FolderRules] = {}

    def expect(self, roots: Iterable[str]) -> None:
        """These folders' settings are asked for: until they come, their files stay local."""
        for r in roots:
            self._rules.setdefault(r, FolderRules(root=r, closed=True))

    def applied(self, rules: FolderRules) -> None:
        self._rules[rules.root] = rules

    def keep_only(self, roots: Iterable[str]) -> None:
        """Folders no longer open have no rules (their files are outside)."""
        open_now = set(roots)
        self._rules = {r: f for r, f in self._rules.items() if r in open_now}

    def current(self, roots: Sequence[str]) -> tuple[FolderRules, ...]:
        return tuple(self._rules[r] for r in roots if r in self._rules)
