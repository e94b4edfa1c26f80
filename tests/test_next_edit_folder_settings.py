"""A next-edit request follows its file's own next-edit settings (issue 34: a workspace
folder's tighten-only `next_edit.*` keys, merged by the session into
`EditRequest.next_edit`), not the pipeline's window-wide ones. Against the fake tiers
over real sockets. Before this change the sequence read `next_edit.threshold`,
`region_lines` and `context_lines` from the pipeline's settings only (EditRequest had no
`next_edit`)."""

from __future__ import annotations

from pathlib import Path

import attrs

from synconfroute.server.routing.next_edit.sequence import suggest
from synconfroute.server.settings.config import Settings
from tests.fakes import FakeOllama, FakeOpenAI
from tests.fakes.next_edit import RewritingModel
from tests.test_next_edit_sequence import TEXT, pipeline, rename, request


async def test_the_files_own_lower_threshold_keeps_an_unsure_edit_local(
    tmp_path: Path, local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.answer_for = RewritingModel(rename, changed_lp=-2.0)  # type: ignore[attr-defined]
    remote_fake.answer_for = RewritingModel(rename)  # type: ignore[attr-defined]
    p = pipeline(local_fake, remote_fake)  # next_edit.threshold -0.5: -2.0 escalates
    window = await suggest(p, request(tmp_path), p.rules())
    assert window.decision.route == "remote", window.decision
    sent = len(remote_fake.received("/v1/completions"))
    folder = attrs.evolve(Settings().next_edit, threshold=-3.0)
    own = await suggest(p, attrs.evolve(request(tmp_path), next_edit=folder), p.rules())
    assert own.decision.route == "local", own.decision
    assert len(remote_fake.received("/v1/completions")) == sent


def test_the_files_own_region_and_context_lines_shape_the_prompt(
    tmp_path: Path, local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    p = pipeline(local_fake, remote_fake)
    req = request(tmp_path)
    wide = req.region(p.planning())
    folder = attrs.evolve(Settings().next_edit, region_lines=0, context_lines=0)
    narrow = attrs.evolve(req, next_edit=folder).region(p.planning())
    # Region 0: the cursor's line alone (line 2 of TEXT), no read-only context around it.
    line = TEXT.split("\n")[1]
    assert TEXT[narrow.start : narrow.end].rstrip("\n") == line
    assert (narrow.excerpt_start, narrow.excerpt_end) == (narrow.start, narrow.end)
    assert wide.start < narrow.start or wide.end > narrow.end  # the window's is wider
