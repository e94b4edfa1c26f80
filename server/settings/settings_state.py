"""The session's settings: the file + environment, the editor's initializationOptions
(user scope) and workspace configuration (workspace scope: may only tighten what
leaves the machine), and the local-only toggle on top.

Every change publishes a new `Settings` object (config.merge, attrs.evolve): one that
was published is never mutated, so a pipeline or request holding it sees a snapshot.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import attrs

from . import config

log = logging.getLogger(__name__)


class SettingsState:
    def __init__(self, loaded: config.Loaded) -> None:
        self.base = loaded.settings
        self.load_issues = list(loaded.issues)  # reported to the editor at initialize
        self.current = loaded.settings
        self.init_options: dict[str, Any] = {}
        self.workspace_options: dict[str, Any] = {}
        self.local_only_override: bool | None = None
        self._refusals_shown: set[str] = set()
        self.closed_by = [i for i in self.load_issues if i.fail_closed]
        self.policy = loaded.policy
        # The organisation's policy turned local-only on: no toggle or setting lifts it.
        self.pinned_local = bool(self.policy and self.policy.values.get("privacy.local_only"))
        self.awaiting_workspace = False  # until the first workspace configuration

    def apply(
        self,
        *,
        init: Mapping[str, Any] | None = None,
        workspace: Mapping[str, Any] | None = None,
    ) -> list[config.SettingsIssue]:
        """Merge editor settings over file + env: initializationOptions, then the
        workspace configuration. A source passed as None keeps its last value; a new
        workspace configuration replaces the old one (a removed key goes back to the
        user's value). A refused workspace value is logged once."""
        if init is not None:
            self.init_options = dict(init)
        if workspace is not None:
            self.workspace_options = dict(workspace)
            self.awaiting_workspace = False
        user, issues = config.merge(self.base, self.init_options, policy=self.policy)
        settings, ws_issues = config.merge_workspace(user, self.workspace_options)
        for issue in ws_issues:
            if issue.message.startswith("refused:"):
                if str(issue) in self._refusals_shown:
                    continue
                self._refusals_shown.add(str(issue))
                log.warning("%s", issue)
            issues.append(issue)
        if self.local_only_override is not None:
            settings = _with_local_only(settings, self.local_only_override)
        # Fail closed: a privacy value that could not be read (here or in the file)
        # keeps everything local until it is fixed; the toggle cannot lift it.
        self.closed_by = [i for i in (*self.load_issues, *issues) if i.fail_closed]
        if self.closed_by or self.awaiting_workspace or self.pinned_local:
            settings = _with_local_only(settings, True)
        self.current = settings
        return issues

    def expect_workspace(self) -> None:
        """The editor will send workspace configuration: nothing escalates until then."""
        self.awaiting_workspace = True
        self.current = _with_local_only(self.current, True)

    def toggle_local_only(self) -> bool:
        """Flip local-only (kept over later settings changes); the new value."""
        self.local_only_override = not self.current.privacy.local_only
        on = (
            self.local_only_override
            or bool(self.closed_by)
            or self.awaiting_workspace
            or self.pinned_local
        )
        self.current = _with_local_only(self.current, on)
        return on


def _with_local_only(settings: config.Settings, on: bool) -> config.Settings:
    return attrs.evolve(settings, privacy=attrs.evolve(settings.privacy, local_only=on))
