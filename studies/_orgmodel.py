"""A model of an organisation's developers sharing one vLLM cluster (discrete events, heapq).

Each developer's editor asks for completions (Poisson arrivals); the local tier answers
after a sampled latency with a sampled task outcome (confidence, syntax verdict, whether
its text passes the tests) taken from an eval run's records; the router applies the
SynConfRoute rule with the same `Backpressure` and `EscalationBudget` code the server uses;
escalations queue at R vLLM replicas with continuous batching; a request whose deadline
passes is cancelled (our client closes the connection, and vLLM aborts it, queued or
running). What the developer sees: the remote answer if it came in time, else a
syntax-valid local answer, else nothing.

The replica's step time is `step_s + seq_s * running + prefill tokens * prefill_s`: one
forward pass reads the weights once (memory-bound, `step_s`), attends over every running
sequence's KV cache (`seq_s` each), and chunked prefill adds the compute of the prompt
tokens it takes this step (at most `chunk` tokens a step). The defaults and their sources
are in docs/load.md; `calibrate()` fits step_s and seq_s to a measured sweep.

Each replica keeps its own prefix cache (vLLM's automatic prefix caching is per replica):
an LRU of developers' prompt prefixes, `cache_tokens` in all. A request whose developer's
prefix is still cached on the replica that admits it prefills only the part that changed
(`1 - reuse` of the prompt). Placement is the balancer's (`random`: any replica) or the
client's own affinity (`affinity`: rendezvous hashing of the developer's workspace, the
server's own `clients.replicas.rendezvous`). With `metrics`, each client reads its
replica's queue (a gateway's sum, under random placement) at most every `poll_s` while it
escalates, the reading arriving `poll_delay_s` later, and feeds it to its Backpressure
(`Backpressure.cluster`), as the server does.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import OrderedDict
from collections.abc import Sequence
from typing import Literal

import attrs

from synconfroute.clients.replicas import rendezvous
from synconfroute.server.routing.backpressure import Backpressure, EscalationBudget, Limits

Policy = Literal["none", "budget", "backpressure"]
Placement = Literal["random", "affinity"]


@attrs.frozen(kw_only=True)
class Outcome:
    """One eval task as the router and the scorer see it."""

    confidence: float | None
    valid: bool  # the syntax gate kept it (or could not judge it)
    local_pass: bool
    remote_pass: bool
    local_s: float  # local time to a full answer (first token to last)
    # Verified escalation (remote.verify_draft): the local draft's tokens, and the leading
    # ones the large model would have written itself (kept: not decoded by the cluster).
    draft_tokens: int = 0
    draft_kept: int = 0


@attrs.frozen(kw_only=True)
class Cluster:
    replicas: int = 4
    step_s: float = 0.031  # one decode step with one sequence running
    seq_s: float = 0.0005  # added per running sequence
    prefill_s: float = 0.00013  # per prompt token (compute-bound)
    chunk: int = 2048  # prompt tokens a step may take (chunked prefill)
    max_seqs: int = 256  # vLLM's --max-num-seqs
    cache_tokens: int = 0  # prefix-cache room per replica (0: no prefix caching modelled)
    reuse: float = 0.8  # share of a developer's prompt unchanged since their last one


@attrs.frozen(kw_only=True)
class Workload:
    developers: int = 1000
    requests_per_min: float = 2.0  # per developer, over the working hour
    prompt_tokens: int = 1500
    output_tokens: int = 16  # a single line
    deadline_s: float = 4.0
    threshold: float = -0.5
    seconds: float = 600.0  # simulated time (after `warmup`)
    warmup: float = 60.0
    seed: int = 0
    # A busy spell that ends: after `drop_at` seconds only the first `drop_to` developers
    # keep asking (the rest go to a meeting). Measure after it with a later `warmup`.
    drop_to: int | None = None
    drop_at: float = math.inf


@attrs.frozen(kw_only=True)
class Control:
    policy: Policy = "none"
    budget: float = 0.3  # routing.escalation_budget for policy "budget"
    # remote.verify_draft: an escalation's prompt also holds the local draft (scored in
    # the prefill) and the cluster decodes only what it did not keep, plus the scoring
    # request's one token.
    verify: bool = False
    window_s: float = 300.0
    limits: Limits = Limits()
    placement: Placement = "random"
    metrics: bool = False  # backpressure also reads the cluster's queue (vLLM /metrics)
    poll_s: float = 2.0  # at most one metrics read this often per client
    poll_delay_s: float = 0.05  # the read's round trip


@attrs.define
class _Req:
    dev: int
    born: float
    local_done: float
    outcome: Outcome
    escalated: bool = False
    prompt_left: int = 0
    tokens_left: int = 0
    first_token: float | None = None
    done: float | None = None
    cancelled: bool = False
    cache_hit: bool = False
    admitted: bool = False


@attrs.frozen(kw_only=True)
class Result:
    requests: int
    ghost_p50_s: float  # over the completions shown
    ghost_p95_s: float
    in_time: float  # share answered (a completion or an explicit nothing) before the deadline
    shown: float  # share with a completion shown (at any time)
    escalated: float  # share sent to the cluster
    remote_in_time: float  # share of escalations answered before the deadline
    utilisation: float  # busy share of the replicas' time
    queue_max: int  # most requests waiting for a replica at once
    pass_at_1: float  # expected, from the records' correctness per route
    prefix_hits: float = math.nan  # share of admitted escalations with a warm prefix


def _pct(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)] if s else math.nan


class _Replica:
    def __init__(self, c: Cluster) -> None:
        self.c = c
        self.waiting: list[_Req] = []
        self.running: list[_Req] = []
        self.busy = 0.0
        self.stepping = False
        self.cache: OrderedDict[int, int] = OrderedDict()  # developer -> cached tokens
        self.cached = 0
        self.admitted = 0
        self.hits = 0

    def _admit(self, r: _Req) -> None:
        """Into the running batch: the prefix cache decides how much to prefill."""
        c = self.c
        self.admitted += 1
        r.admitted = True
        if c.cache_tokens <= 0:
            return
        full = r.prompt_left
        if r.dev in self.cache:
            r.cache_hit = True
            self.hits += 1
            r.prompt_left = math.ceil(full * (1.0 - c.reuse))
            self.cached -= self.cache.pop(r.dev)
        self.cache[r.dev] = full  # the newest prompt is the developer's prefix now
        self.cached += full
        while self.cached > c.cache_tokens and self.cache:
            _, n = self.cache.popitem(last=False)  # least recently used first
            self.cached -= n

    def step(self, now: float) -> tuple[float, list[_Req]]:
        """Run one step from `now`; (its end, the requests that got a token in it)."""
        c = self.c
        self.waiting = [r for r in self.waiting if not r.cancelled]
        self.running = [r for r in self.running if not r.cancelled]
        while self.waiting and len(self.running) < c.max_seqs:
            r = self.waiting.pop(0)
            self._admit(r)
            self.running.append(r)
        budget = c.chunk
        prefill = 0
        decoding = []
        for r in self.running:
            if r.prompt_left > 0:
                take = min(r.prompt_left, budget)
                r.prompt_left -= take
                budget -= take
                prefill += take
                if r.prompt_left == 0:
                    decoding.append(r)  # the step that finishes a prompt yields its 1st token
            else:
                decoding.append(r)
        dur = c.step_s + c.seq_s * len(self.running) + c.prefill_s * prefill
        self.busy += dur
        return now + dur, decoding


def simulate(outcomes: Sequence[Outcome], w: Workload, cluster: Cluster, ctl: Control) -> Result:
    rng = random.Random(w.seed)
    end = w.warmup + w.seconds
    reps = [_Replica(cluster) for _ in range(cluster.replicas)]
    bps = [Backpressure(ctl.limits) for _ in range(w.developers)]
    budgets = [EscalationBudget(ctl.budget, ctl.window_s) for _ in range(w.developers)]
    events: list[tuple[float, int, str, object]] = []
    seq = 0

    def push(t: float, kind: str, obj: object) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, kind, obj))

    rate = w.requests_per_min / 60.0
    for d in range(w.developers):
        push(rng.expovariate(rate), "arrive", d)
    done: list[_Req] = []
    queue_max = 0
    # Each developer's workspace keeps to one replica (the client's rendezvous order).
    ids = [str(i) for i in range(len(reps))]
    home = [int(rendezvous(f"dev{d}", ids)[0]) for d in range(w.developers)]
    polled = [-math.inf] * w.developers  # when each client last read the metrics
    place = random.Random(w.seed + 1)  # the balancer's own choices
    while events:
        now, _, kind, obj = heapq.heappop(events)
        if now > end + w.deadline_s:
            break
        if kind == "arrive":
            d = obj
            assert isinstance(d, int)
            if w.drop_to is not None and d >= w.drop_to and now >= w.drop_at:
                continue
            if now < end:
                push(now + rng.expovariate(rate), "arrive", d)
            o = outcomes[rng.randrange(len(outcomes))]
            r = _Req(dev=d, born=now, local_done=now + o.local_s, outcome=o)
            push(r.local_done, "local", r)
            if now >= w.warmup and now < end:
                done.append(r)
        elif kind == "local":
            r = obj
            assert isinstance(r, _Req)
            o = r.outcome
            t = ctl.policy == "backpressure"
            p = bps[r.dev].pressure(now) if t else None
            lift = p.lift if p is not None else 0.0
            unsure = o.confidence is None or o.confidence < w.threshold - lift
            want = (not o.valid) or unsure
            candidate = not o.valid or o.confidence is None or o.confidence < w.threshold
            if t and ctl.metrics and candidate and now - polled[r.dev] >= ctl.poll_s:
                # An escalation candidate: read the cluster's queue, in the background.
                polled[r.dev] = now
                push(now + ctl.poll_delay_s, "poll", r.dev)
            go = want
            if go and p is not None and not p.can_escalate(now, r.born + w.deadline_s):
                go = False  # cannot be answered in time: keep the valid answer, or none
            if go and ctl.policy == "budget":
                go = budgets[r.dev].allow(now, o.confidence, not o.valid)
            if ctl.policy == "budget":
                budgets[r.dev].record(now, o.confidence, go)
            if go and now < r.born + w.deadline_s:
                r.escalated = True
                r.prompt_left = w.prompt_tokens
                r.tokens_left = w.output_tokens
                if ctl.verify and o.draft_tokens:
                    r.prompt_left += o.draft_tokens
                    r.tokens_left = 1 + max(0, w.output_tokens - o.draft_kept)
                if ctl.placement == "affinity":
                    rep = reps[home[r.dev]]
                else:  # a balancer's choice, unrelated to the developer
                    rep = reps[place.randrange(len(reps))]
                rep.waiting.append(r)
                queue_max = max(queue_max, sum(len(x.waiting) for x in reps))
                push(r.born + w.deadline_s, "deadline", r)
                if not rep.stepping:
                    rep.stepping = True
                    push(now, "step", rep)
        elif kind == "step":
            rep = obj
            assert isinstance(rep, _Replica)
            if not rep.waiting and not rep.running:
                rep.stepping = False
                continue
            t_end, got = rep.step(now)
            for r in got:
                if r.first_token is None:
                    r.first_token = t_end
                    if ctl.policy == "backpressure":
                        bps[r.dev].answered(t_end, t_end - r.local_done)
                r.tokens_left -= 1
                if r.tokens_left <= 0:
                    r.done = t_end
                    rep.running.remove(r)
            push(t_end, "step", rep)
        elif kind == "poll":
            reader = obj
            assert isinstance(reader, int)
            seen = [reps[home[reader]]] if ctl.placement == "affinity" else reps  # a gateway sums
            waiting = sum(len([x for x in q.waiting if not x.cancelled]) for q in seen)
            running = sum(len([x for x in q.running if not x.cancelled]) for q in seen)
            bps[reader].cluster(now, waiting, running, None, "metrics")
        elif kind == "deadline":
            r = obj
            assert isinstance(r, _Req)
            if r.done is None:
                r.cancelled = True  # the client gives up and closes the connection
                if ctl.policy == "backpressure" and r.first_token is None:
                    bps[r.dev].unreachable(now, now - r.local_done)  # no token in time
    # Time to ghost text counts the completions shown; "answered in time" counts every
    # response before the deadline, an explicit "nothing" included (a broken local answer
    # that may not escalate answers empty at once, and the editor moves on).
    ghost: list[float] = []
    in_time = shown_n = remote_ok = esc = 0
    passed = 0.0
    for r in done:
        o = r.outcome
        deadline = r.born + w.deadline_s
        if r.escalated and r.done is not None and r.done <= deadline:
            ghost.append(r.done - r.born)
            in_time += 1
            shown_n += 1
            remote_ok += 1
            passed += o.remote_pass
        elif o.valid and r.local_done <= deadline:
            # kept local: at once when it did not escalate, else when the remote gave up
            shown = r.local_done if not r.escalated else deadline
            ghost.append(shown - r.born)
            shown_n += 1
            in_time += shown < deadline
            passed += o.local_pass
        else:
            # nothing to show: at once when it did not escalate, else at the deadline
            in_time += not r.escalated and r.local_done < deadline
        esc += r.escalated
    n = len(done)
    busy = sum(rep.busy for rep in reps)
    admitted = [r for r in done if r.admitted]
    return Result(
        requests=n,
        ghost_p50_s=_pct(ghost, 50),
        ghost_p95_s=_pct(ghost, 95),
        in_time=in_time / n if n else math.nan,
        shown=shown_n / n if n else math.nan,
        escalated=esc / n if n else math.nan,
        remote_in_time=remote_ok / esc if esc else math.nan,
        utilisation=min(1.0, busy / (len(reps) * (end + w.deadline_s))),
        queue_max=queue_max,
        pass_at_1=passed / n if n else math.nan,
        prefix_hits=(
            sum(r.cache_hit for r in admitted) / len(admitted)
            if admitted and cluster.cache_tokens > 0
            else math.nan
        ),
    )


def calibrate(concurrency: Sequence[int], step_times_s: Sequence[float]) -> tuple[float, float]:
    """Least-squares fit of step = step_s + seq_s * c to a measured sweep."""
    n = len(concurrency)
    mx = sum(concurrency) / n
    my = sum(step_times_s) / n
    sxx = sum((x - mx) ** 2 for x in concurrency)
    sxy = sum((x - mx) * (y - my) for x, y in zip(concurrency, step_times_s, strict=True))
    slope = sxy / sxx if sxx else 0.0
    return my - slope * mx, slope
