"""Each folder's tighten-only keys for the files inside it (issue 34), the pure core:
nested folders compose (the outer folder's answer holds in the inner one, and the inner
one adds to it), and a folder never loosens what the window's settings say. Before this
change `FolderSettings` kept only the privacy rules (no `settings_for`)."""

from __future__ import annotations

from pathlib import Path

from synconfroute.clients.plan import FolderRules
from synconfroute.server.session.folders import FolderSettings
from synconfroute.server.settings import config


def folders(*answers: tuple[Path, dict[str, object]]) -> FolderSettings:
    f = FolderSettings()
    for root, answer in answers:
        f.applied(FolderRules(root=str(root)), answer)
    return f


def test_nested_folders_compose_and_a_file_outside_keeps_the_window(tmp_path: Path) -> None:
    outer, inner = tmp_path / "ws", tmp_path / "ws" / "pkg"
    f = folders(
        (inner, {"routing": {"policy": "confidence"}}),
        (outer, {"completion": {"disabled_in": ["comment"]}, "routing": {"threshold": -1.0}}),
    )
    window = config.Settings()
    deep = f.settings_for(str(inner / "m.py"), window)
    assert deep.routing.policy == "confidence"
    assert deep.completion.disabled_in == ["comment"] and deep.routing.threshold == -1.0
    top = f.settings_for(str(outer / "a.py"), window)
    assert top.routing.policy == "synconf" and top.completion.disabled_in == ["comment"]
    assert f.settings_for(str(tmp_path / "ws2" / "b.py"), window) is window  # not in ws
    assert f.settings_for(str(inner / "m.py"), window) is deep  # cached per window object


def test_a_folder_never_loosens_the_windows_settings(tmp_path: Path) -> None:
    window, _ = config.merge_workspace(
        config.Settings(), {"routing": {"threshold": -1.0, "policy": "syntax"}}
    )
    f = folders((tmp_path, {"routing": {"threshold": -0.7, "policy": "synconf"}}))
    got = f.settings_for(str(tmp_path / "a.py"), window)
    assert got.routing.threshold == -1.0 and got.routing.policy == "syntax"
    f.keep_only([])  # the folder was removed: its answer no longer applies
    assert f.settings_for(str(tmp_path / "a.py"), window) is window
