"""An organisation's developers on one vLLM cluster, under four policies.

For 100 to 5,000 developers on a cluster sized for a nominal 1,000, under no control, a
fixed escalation budget, backpressure (the server's own `routing.backpressure` code) and
backpressure with verified escalation (remote.verify_draft: the cluster decodes only the
part of an escalation the local draft did not already hold, the oracle's agreement with
the draft standing for the large model's),
it prints p50/p95 time to ghost text, the share answered within the deadline, the share
escalated, the cluster's utilisation, the longest queue and the expected pass@1 (from an
eval run's records: each task's local confidence, syntax verdict and test result).
Assumptions and their sources: docs/load.md. With --plot it draws docs/load.png.

    .venv/bin/python -m studies.org_load --records .eval/run
    .venv/bin/python -m studies.org_load --records .eval/run --plot docs/load.png

--calibrate "c:step_ms,..." refits the replica's step time to a sweep measured on a real
vLLM (bench.vllm_curve prints one).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import attrs

from studies._orgmodel import (
    Cluster,
    Control,
    Outcome,
    Placement,
    Result,
    Workload,
    calibrate,
    simulate,
)

DEVELOPERS = (100, 500, 1000, 2000, 3000, 5000)
POLICIES = ("none", "budget", "backpressure", "verified")  # verified: backpressure + verify
# The cluster, second step (issue 40): placement and the cluster's own signal, at 1x-3x.
SECOND: tuple[tuple[str, str, Placement, bool], ...] = (
    ("none, random", "none", "random", False),
    ("none, affinity", "none", "affinity", False),
    ("bp, random", "backpressure", "random", False),
    ("bp+metrics, random", "backpressure", "random", True),
    ("bp, affinity", "backpressure", "affinity", False),
    ("bp+metrics, affinity", "backpressure", "affinity", True),
)


# HumanEval single-line pass@1 of the 480B model alone in the study behind SynConfRoute
# (78.9 % routed, 7.4 points above the large model alone: DESIGN.md).
PAPER_REMOTE_PASS = 0.715


def load_outcomes(folder: Path, k: int = 3, remote_pass: float | None = None) -> list[Outcome]:
    """Each scored task of an eval run folder, as the simulator needs it. When the run's
    remote was the oracle (the ground truth), each escalated task passes with probability
    `remote_pass` instead (drawn once per task, seeded)."""
    import random

    from synconfroute.server.evaluation.records import RunFolder
    from synconfroute.server.evaluation.scoring import outcomes
    from synconfroute.server.routing.rules import resolve_rules
    from synconfroute.server.settings.config import Settings

    run = RunFolder.locate(folder)
    rules = attrs.evolve(resolve_rules(Settings(), ""), k=k, missing_logprobs="escalate")
    tasks, _ = outcomes(run, rules=rules, gate_mode="tree-sitter")
    local_s = {rec.key: rec.local.total_s for rec in run.records.values()}
    oracle = any(rec.remote is not None and rec.remote.oracle for rec in run.records.values())
    p = PAPER_REMOTE_PASS if remote_pass is None else remote_pass
    records = {rec.key: rec for rec in run.records.values()}
    rng = random.Random(1)
    out = []
    for t in tasks:
        valid = t.evidence.syntax in ("valid", None, "unsupported-language", "timeout")
        out.append(
            Outcome(
                confidence=t.confidence,
                valid=valid and t.evidence.available,
                local_pass=t.local_pass,
                remote_pass=(rng.random() < p) if oracle else t.remote_pass,
                local_s=float(local_s.get(t.key) or 0.0),
                **drafted(records.get(t.key)),
            )
        )
    return out


def drafted(rec: Any) -> dict[str, int]:
    """The local draft a verified escalation would send, in the local model's tokens, and
    how many leading ones the remote would have written: with the oracle as the large
    model, those whose text runs along the ground truth (the decode steps saved).

    The draft is what the server sends (`sequence.draft_of`, cut by `_verify.draft_for`):
    the local answer as post-processed (`text`: cut at a fence, at two blank lines, where
    it re-types the suffix, after one line in single-line mode), not every token the
    local model generated (`raw`): the tokens past the cut are neither sent nor kept."""
    from synconfroute.clients._verify import draft_for
    from synconfroute.server.evaluation.generate import multiline_for
    from synconfroute.server.settings.config import Settings

    local = getattr(rec, "local", None)
    remote = getattr(rec, "remote", None)
    if local is None or remote is None or not remote.oracle or not local.tokens:
        return {"draft_tokens": 0, "draft_kept": 0}
    draft = draft_for(local.text, single_line=not multiline_for(rec.task, Settings()))
    tokens, kept, text, agrees = 0, 0, "", True
    for tok, _lp in local.tokens:
        if len(text) >= len(draft):
            break
        text += tok
        tokens += 1
        # A token across the draft's end counts up to the end (the line break after a
        # single line is not sent; the verifier scores the draft's own text).
        agrees = agrees and remote.text.startswith(text[: len(draft)])
        kept += agrees
    return {"draft_tokens": tokens, "draft_kept": kept}


def verify_savings(outcomes: list[Outcome], threshold: float, output_tokens: int) -> str:
    """The kept share of the drafts and the decode steps a verified escalation saves, as
    the simulator counts them (`_orgmodel`: 1 + what the draft did not hold, against
    `output_tokens`), over all drafts and over the tasks escalated at `threshold`."""
    esc = [o for o in outcomes if not o.valid or o.confidence is None or o.confidence < threshold]

    def saved(o: Outcome) -> int:
        if not o.draft_tokens:
            return 0
        return output_tokens - (1 + max(0, output_tokens - o.draft_kept))

    def share(xs: list[Outcome]) -> str:
        d = sum(o.draft_tokens for o in xs)
        k = sum(o.draft_kept for o in xs)
        return f"{k} of {d} draft tokens kept ({100 * k / d:.1f}%)" if d else "no drafts"

    with_draft = sum(1 for o in esc if o.draft_tokens)
    per = sum(saved(o) for o in esc) / len(esc) if esc else 0.0
    return (
        f"verified escalation (oracle as the large model): all tasks {share(outcomes)}; "
        f"{len(esc)} escalated at nominal, {with_draft} with a draft, {share(esc)}; "
        f"decode steps saved per escalation {per:.2f} of {output_tokens}"
    )


def scale_local(outcomes: list[Outcome], median_s: float) -> list[Outcome]:
    """Scale the records' local latencies so their median is `median_s` (the records may
    come from a slower machine than a developer's laptop)."""
    times = [o.local_s for o in outcomes if o.local_s > 0]
    f = median_s / statistics.median(times) if times else 1.0
    return [attrs.evolve(o, local_s=(o.local_s or median_s) * f) for o in outcomes]


def threshold_for_share(outcomes: list[Outcome], share: float) -> float:
    """The threshold at which the SynConfRoute rule escalates `share` of the tasks. A
    task without a confidence (no tokens or log-probs: an empty answer) escalates at any
    threshold, like a syntax-invalid one (`_orgmodel`: `unsure`)."""
    forced = sum(1 for o in outcomes if not o.valid or o.confidence is None) / len(outcomes)
    confs = sorted(o.confidence for o in outcomes if o.valid and o.confidence is not None)
    if not confs or share <= forced:
        return -1e9
    want = (share - forced) * len(outcomes)
    i = min(len(confs) - 1, max(0, round(want)))
    return confs[i]


def workload(a: argparse.Namespace, threshold: float) -> Workload:
    return Workload(
        requests_per_min=a.rate,
        threshold=threshold,
        seconds=a.seconds,
        seed=a.seed,
        deadline_s=a.deadline_ms / 1000,
        prompt_tokens=a.prompt_tokens,
        output_tokens=a.output_tokens,
    )


def size_for(
    outcomes: list[Outcome], a: argparse.Namespace, threshold: float, cluster: Cluster
) -> Cluster:
    """The fewest replicas that serve the nominal load, uncontrolled, within the deadline:
    every escalation answered in time (the cheapest cluster that serves it). Busy time is
    no sizing figure under continuous batching: a replica that steps all the time may
    still have room in every step."""
    for n in range(1, 200):
        c = attrs.evolve(cluster, replicas=n)
        w = attrs.evolve(workload(a, threshold), developers=a.nominal, seconds=120)
        if simulate(outcomes, w, c, Control()).remote_in_time >= 0.999:
            return c
    return cluster


def most_developers(
    outcomes: list[Outcome],
    a: argparse.Namespace,
    threshold: float,
    cluster: Cluster,
    ctl: Control,
    p95_s: float,
) -> tuple[int, Result]:
    """The most developers (to 10) the cluster serves under `ctl` with ghost text p95
    at most `p95_s` and every escalation answered in time (bisection: the figures rise
    with load, up to the simulation's noise)."""

    def ok(devs: int) -> tuple[bool, Result]:
        r = simulate(outcomes, attrs.evolve(workload(a, threshold), developers=devs), cluster, ctl)
        return r.ghost_p95_s <= p95_s and r.remote_in_time >= 0.999, r

    lo, hi = 10, 20 * a.nominal
    best = ok(lo)[1]
    while hi - lo > 10:
        mid = (lo + hi) // 2
        good, r = ok(mid)
        lo, hi, best = (mid, hi, r) if good else (lo, mid, best)
    return lo, best


def capacity(
    outcomes: list[Outcome], a: argparse.Namespace, threshold: float, cluster: Cluster
) -> None:
    """Developers per replica at the same p95 (the nominal load's, no control, no
    verification), with and without verified escalation, under no control (every
    unsure answer escalates: the cluster's work alone changes)."""
    w = attrs.evolve(workload(a, threshold), developers=a.nominal)
    base = simulate(outcomes, w, cluster, Control())
    target = base.ghost_p95_s
    print(
        f"capacity at ghost p95 <= {1000 * target:.0f} ms (the nominal {a.nominal} "
        f"developers' without verification), {cluster.replicas} replicas, no control:"
    )
    print(
        "| verify | developers | per replica | ghost p50 ms | ghost p95 ms | escalated "
        "| utilisation |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for verify in (False, True):
        devs, r = most_developers(outcomes, a, threshold, cluster, Control(verify=verify), target)
        print(
            f"| {'yes' if verify else 'no'} | {devs} | {devs / cluster.replicas:.1f} "
            f"| {1000 * r.ghost_p50_s:.0f} | {1000 * r.ghost_p95_s:.0f} "
            f"| {100 * r.escalated:.1f}% | {100 * r.utilisation:.1f}% |",
            flush=True,
        )


def row(devs: int, policy: str, r: Result, *, hits: bool = False) -> str:
    pct = [r.in_time, r.shown, r.escalated, r.remote_in_time, r.utilisation]
    return (
        f"| {devs:>5} | {policy:<12} "
        f"| {1000 * r.ghost_p50_s:>6.0f} | {1000 * r.ghost_p95_s:>6.0f} | "
        + " | ".join(f"{100 * x:>5.1f}%" for x in pct)
        + f" | {r.queue_max:>6} | {100 * r.pass_at_1:>5.1f}% |"
        + (f" {100 * r.prefix_hits:>5.1f}% |" if hits else "")
    )


def second_step(
    outcomes: list[Outcome], a: argparse.Namespace, threshold: float, cluster: Cluster
) -> None:
    """Placement and the cluster's own signal at 1x, 2x and 3x the nominal load."""
    print(
        f"\nthe cluster, second step: {cluster.replicas} replicas, prefix cache "
        f"{cluster.cache_tokens:,} tokens each, {100 * cluster.reuse:.0f}% of a prompt "
        f"reused; metrics read every {a.poll_s:g} s, {a.poll_delay_ms:g} ms late"
    )
    print(
        "| developers | policy | ghost p50 ms | ghost p95 ms | in time | shown | escalated "
        "| remote in time | utilisation | queue max | pass@1 | prefix hits |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k in (1, 2, 3):
        devs = k * a.nominal
        for name, policy, placement, metrics in SECOND:
            ctl = Control(
                policy=policy,  # type: ignore[arg-type]
                placement=placement,
                metrics=metrics,
                poll_s=a.poll_s,
                poll_delay_s=a.poll_delay_ms / 1000,
            )
            w = attrs.evolve(workload(a, threshold), developers=devs)
            print(row(devs, name, simulate(outcomes, w, cluster, ctl), hits=True), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=Path, required=True, help="a `synconfroute eval` run folder")
    ap.add_argument("--developers", default=",".join(map(str, DEVELOPERS)))
    ap.add_argument("--replicas", type=int, default=0, help="default: sized for the nominal load")
    ap.add_argument("--nominal", type=int, default=1000, help="developers the cluster is for")
    ap.add_argument(
        "--remote-pass",
        type=float,
        help="pass rate of escalated tasks when the records' "
        "remote is the oracle (default: the paper's 480B model alone, 71.5%%)",
    )
    ap.add_argument("--share", type=float, default=0.42, help="nominal escalation share")
    ap.add_argument("--local-median-ms", type=float, default=300.0)
    ap.add_argument("--rate", type=float, default=2.0, help="requests a developer-minute")
    ap.add_argument("--seconds", type=float, default=300.0, help="simulated steady state")
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--deadline-ms", type=float, default=4000.0)
    ap.add_argument("--prompt-tokens", type=int, default=1500)
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--max-seqs", type=int, default=256, help="vLLM's --max-num-seqs")
    ap.add_argument(
        "--prefill-ms", type=float, default=0.13, help="prefill cost a prompt token (ms)"
    )
    ap.add_argument("--calibrate", default="", help='measured sweep "c:step_ms,c:step_ms,..."')
    ap.add_argument(
        "--cache-tokens",
        type=int,
        default=150_000,
        help="prefix-cache room per replica in tokens (0: none)",
    )
    ap.add_argument("--reuse", type=float, default=0.8, help="share of a prompt reused")
    ap.add_argument("--poll-s", type=float, default=2.0, help="metrics read interval")
    ap.add_argument("--poll-delay-ms", type=float, default=50.0)
    ap.add_argument("--second-only", action="store_true", help="only the second-step table")
    ap.add_argument(
        "--capacity",
        action="store_true",
        help="only developers per replica at the nominal load's p95, with and without "
        "verified escalation",
    )
    ap.add_argument("--plot", type=Path, help="write the figure here")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    outcomes = scale_local(
        load_outcomes(a.records, remote_pass=a.remote_pass), a.local_median_ms / 1000
    )
    threshold = threshold_for_share(outcomes, a.share)
    cluster = Cluster(
        max_seqs=a.max_seqs,
        prefill_s=a.prefill_ms / 1000,
        cache_tokens=a.cache_tokens,
        reuse=a.reuse,
    )
    if a.calibrate:
        pairs = [p.split(":") for p in a.calibrate.split(",")]
        step, per = calibrate([int(c) for c, _ in pairs], [float(s) / 1000 for _, s in pairs])
        print(f"calibrated step: {1000 * step:.2f} ms + {1000 * per:.3f} ms per sequence")
        cluster = attrs.evolve(cluster, step_s=step, seq_s=per)
    if a.replicas:
        cluster = attrs.evolve(cluster, replicas=a.replicas)
    else:
        cluster = size_for(outcomes, a, threshold, cluster)
    if any(o.draft_tokens for o in outcomes):
        print(verify_savings(outcomes, threshold, a.output_tokens))
    print(
        f"{len(outcomes)} tasks from {a.records}; threshold {threshold:.3f} escalates "
        f"{100 * a.share:.0f}% at nominal; local median {a.local_median_ms:.0f} ms; "
        f"{a.rate:g} requests a developer-minute; {cluster.replicas} replicas"
    )
    if a.capacity:
        capacity(outcomes, a, threshold, cluster)
        return 0
    if a.second_only:
        second_step(outcomes, a, threshold, cluster)
        return 0
    print(
        "| developers | policy | ghost p50 ms | ghost p95 ms | in time | shown | escalated "
        "| remote in time | utilisation | queue max | pass@1 |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    results: dict[str, list[tuple[int, Result]]] = {p: [] for p in POLICIES}
    for devs in (int(x) for x in a.developers.split(",")):
        for policy in POLICIES:
            w = attrs.evolve(workload(a, threshold), developers=devs)
            ctl = Control(
                policy="backpressure" if policy == "verified" else policy,  # type: ignore[arg-type]
                budget=a.budget,
                verify=policy == "verified",
            )
            r = simulate(outcomes, w, cluster, ctl)
            results[policy].append((devs, r))
            print(row(devs, policy, r), flush=True)
    # After a busy spell at 3x the nominal load ends (back to half of it), how fast the
    # raised bar comes down: the share escalated in three later windows.
    spell = attrs.evolve(
        workload(a, threshold), developers=3 * a.nominal, drop_to=a.nominal // 2, drop_at=400
    )
    after = [
        simulate(
            outcomes,
            attrs.evolve(spell, warmup=400 + x, seconds=120),
            cluster,
            Control(policy="backpressure"),
        ).escalated
        for x in (0, 300, 900)
    ]
    calm = simulate(
        outcomes,
        attrs.evolve(workload(a, threshold), developers=a.nominal // 2),
        cluster,
        Control(),
    ).escalated
    print(
        f"recovery: after a spell at {3 * a.nominal} developers drops to {a.nominal // 2}, "
        "backpressure escalates "
        + ", ".join(f"{100 * e:.1f}%" for e in after)
        + f" in minutes 0-2, 5-7 and 15-17 (no control at that load: {100 * calm:.1f}%)"
    )
    second_step(outcomes, a, threshold, cluster)
    if a.plot:
        plot(results, a.plot, cluster.replicas, a.nominal)
        print(f"plot: {a.plot}")
    return 0


def plot(
    results: dict[str, list[tuple[int, Result]]], out: Path, replicas: int, nominal: int
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from synconfroute.server.learning import figures

    panels = (
        ("ghost_p95_s", "time to ghost text p95 (s)", 1.0),
        ("in_time", "answered within the deadline", 100.0),
        ("escalated", "escalated (%)", 100.0),
        ("pass_at_1", "expected pass@1 (%)", 100.0),
    )
    fig, axes = figures.panels(len(panels), panel_w=3.6, panel_h=3.0)
    for ax, (field, label, scale) in zip(axes, panels, strict=True):
        for policy, pts in results.items():
            xs = [d for d, _ in pts]
            ys = [scale * getattr(r, field) for _, r in pts]
            ax.plot(xs, ys, marker="o", ms=3, label=policy)
        ax.axvline(nominal, color="gray", ls=":", lw=1, label="nominal load")
        ax.set_xscale("log")
        ax.set_xlabel("developers", fontsize=8)
        ax.set_ylabel(label + (" (%)" if field == "in_time" else ""), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    figures.finish(
        fig,
        axes,
        f"An organisation on one vLLM cluster ({replicas} replicas sized for {nominal:,} "
        "developers), under three policies",
    )
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
