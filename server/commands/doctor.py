"""`synconfroute doctor`: is each configured tier usable, and if not, how to fix it.

A backend discovers what it alone can (`Backend.discover`: reachable, version, model
present, prompt mode); `probe` adds what is the same for every backend: a tiny real
generation and its checks (text came back, log-probs there, finite and <= 0, timings).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable
from typing import Any

import attrs

from synconfroute.clients.connection import proxy_for
from synconfroute.clients.errors import BackendError
from synconfroute.clients.plan import dataset_plan
from synconfroute.clients.types import Backend, CompletionRequest, ProbeReport, Problem
from synconfroute.clients.urls import mask_urls_in

from ..routing.backends import LocalChoice, choose_local, make_local, make_remote
from ..settings.config import Loaded, RemoteSettings

PROBE_TIMEOUT_S = 180.0  # the embedded model's first load can take a while on a cold disk
GENERATION_S = 60.0  # the tiny generation's deadline (the backends' own timeouts apply too)
PROBE_REQUEST = CompletionRequest(
    prefix="def add(a, b):\n    return",
    suffix="\n",
    max_tokens=8,
    plan=dataset_plan("doctor's probe", 28),
)
NO_TEXT_FIX = "check that the model is a code model and that its prompt mode (template) fits it"
NO_LOGPROBS_FIX = (
    "use a server that returns per-token log-probs (vLLM, llama.cpp, Ollama 0.12.11 or "
    "newer); until then routing.missing_logprobs decides"
)


async def probe(backend: Backend, *, generation_s: float = GENERATION_S) -> ProbeReport:
    """The backend's discovery, then, if nothing there is an error, a tiny generation."""
    report = await backend.discover()
    if not report.usable:
        return report
    request = attrs.evolve(PROBE_REQUEST, deadline=time.monotonic() + generation_s)
    try:
        done = await backend.complete(request)
    except BackendError as exc:
        failed = Problem(
            "error", f"a test completion failed: {exc.message}", exc.hint or "see the server's log"
        )
        return attrs.evolve(report, problems=(*report.problems, failed))
    problems = list(report.problems)
    logprobs = report.logprobs  # the backend may know already (an Ollama too old for them)
    if not done.text:
        problems.append(Problem("warning", "the test completion returned no text", NO_TEXT_FIX))
    elif logprobs is None:
        logprobs = (
            done.logprobs
            and bool(done.tokens)
            and all(math.isfinite(t.logprob) and t.logprob <= 0.0 for t in done.tokens)
        )
        if not logprobs:
            problems.append(
                Problem(
                    "warning",
                    "the test completion returned no log-probs, or unusable ones (not finite, "
                    "or above 0): confidence cannot be measured",
                    NO_LOGPROBS_FIX,
                )
            )
    calibrate = getattr(backend, "calibrate", None)
    rates = await calibrate() if calibrate is not None else None
    return attrs.evolve(
        report,
        prompt_tps=getattr(rates, "prompt_tps", None),
        decode_tps=getattr(rates, "decode_tps", None),
        logprobs=logprobs,
        first_token_s=done.first_token_s,
        total_s=done.total_s,
        sample=done.text,
        problems=tuple(problems),
    )


@attrs.frozen
class TierResult:
    tier: str  # "local" | "remote"
    configured: bool
    choice: LocalChoice | None = None
    report: ProbeReport | None = None

    @property
    def usable(self) -> bool:
        return not self.configured or (self.report is not None and self.report.usable)


async def _probe(make: Callable[[], Backend | None], what: str) -> ProbeReport | None:
    """Build and probe a backend; construction failures become a report too."""
    try:
        backend = make()
    except BackendError as exc:
        return ProbeReport(
            backend=exc.backend or what,
            target="",
            model="",
            reachable=False,
            problems=(Problem("error", exc.message, exc.hint),),
        )
    if backend is None:
        return None
    try:
        return await asyncio.wait_for(probe(backend), PROBE_TIMEOUT_S)
    except TimeoutError:
        return ProbeReport(
            backend=backend.name,
            target="",
            model=backend.model,
            reachable=False,
            problems=(Problem("error", f"no answer within {PROBE_TIMEOUT_S:.0f} s"),),
        )
    finally:
        await backend.aclose()


async def run(loaded: Loaded) -> list[TierResult]:
    s = loaded.settings
    choice = await choose_local(s.local)
    local = await _probe(lambda: make_local(s.local, choice.kind), choice.kind)
    results = [TierResult("local", True, choice, local)]
    remote: ProbeReport | None = None
    if s.remote.configured and not s.privacy.local_only:
        remote = await _probe(lambda: make_remote(s.remote), "openai")
    results.append(TierResult("remote", remote is not None, None, remote))
    return results


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"


def format_text(loaded: Loaded, results: list[TierResult]) -> str:
    s = loaded.settings
    out: list[str] = []
    where = "" if loaded.config_found else " (not found: defaults)"
    out.append(f"settings  {loaded.config_path}{where}")
    if loaded.policy is not None:
        out.append(
            f"policy    {loaded.policy.path}: sets {', '.join(loaded.policy.values) or 'nothing'}"
        )
    for issue in loaded.issues:
        out.append(f"  ! {issue}")
    for res in results:
        out.append("")
        if not res.configured:
            if s.privacy.local_only:
                out.append("remote    off: privacy.local_only is set; nothing leaves this machine")
            else:
                out.append(
                    "remote    not configured: every completion stays on this machine "
                    "(set [remote] url and model to escalate)"
                )
            continue
        r = res.report
        assert r is not None
        out.append(f"{res.tier:<9} {r.backend}  {r.model}  {r.target}".rstrip())
        if res.choice is not None:
            out.append(f"  - {res.choice.reason}")
        if res.tier == "remote":
            out.extend(connection_lines(s.remote))
        mark = "ok" if r.reachable else "FAIL"
        version = f" (version {r.version})" if r.version else ""
        out.append(f"  {mark:<4} reachable{version}" if r.reachable else "  FAIL not reachable")
        if r.model_present is not None:
            out.append(f"  {'ok' if r.model_present else 'FAIL':<4} model present")
        if r.prompt_mode is not None:
            tmpl = f", template {r.template}" if r.template else ""
            ok = "ok" if r.prompt_mode != "prefix-only" else "warn"
            out.append(f"  {ok:<4} prompt: {_PROMPT_MODES.get(r.prompt_mode, r.prompt_mode)}{tmpl}")
        if r.logprobs is not None:
            out.append(f"  {'ok' if r.logprobs else 'FAIL':<4} log-probs returned")
        if r.total_s is not None:
            sample = f": {r.sample!r}" if r.sample is not None else ""
            out.append(
                f"  ok   tiny generation: first token {_ms(r.first_token_s)}, "
                f"total {_ms(r.total_s)}{sample}"
            )
        if r.prompt_tps or r.decode_tps:
            out.append(
                f"  ok   speed: prompt {r.prompt_tps or 0:.0f} tok/s, decode "
                f"{r.decode_tps or 0:.0f} tok/s (sizes the local window and prediction: "
                "local.first_token_target_ms, local.max_predict_ms)"
            )
        for p in r.problems:
            tag = "ERR " if p.severity == "error" else "warn"
            out.append(f"  {tag} {p.message}")
            if p.fix:
                out.append(f"       fix: {p.fix}")
        out.append(f"  => {'usable' if r.usable else 'NOT usable'}")
    return mask_urls_in("\n".join(out))


def connection_lines(remote: RemoteSettings) -> list[str]:
    """How requests to the cluster travel: the proxy per URL, whom TLS trusts, the
    client certificate, the extra headers (names only)."""
    out = []
    for url in remote.all_urls:
        proxy = proxy_for(url, remote.proxy)
        if proxy is None:
            why = (
                "remote.proxy is none"
                if remote.proxy.strip().lower() == "none"
                else ("NO_PROXY or no proxy in the environment" if not remote.proxy else "")
            )
            out.append(f"  - {url}: direct, no proxy ({why})")
        else:
            src = "remote.proxy" if remote.proxy.strip() else "the environment (HTTPS_PROXY)"
            out.append(f"  - {url}: through the proxy {proxy} (from {src})")
    trust = "the operating system's trust store"
    if remote.ca_file:
        trust += f" and remote.ca_file {remote.ca_file}"
    out.append(f"  - TLS trusts {trust}")
    if remote.client_cert:
        out.append(f"  - TLS client certificate (mutual TLS): {remote.client_cert}")
    if remote.headers:
        out.append(f"  - extra headers: {', '.join(remote.headers)} (values not shown)")
    return out


_PROMPT_MODES = {
    "fim-native": "fill-in-the-middle (the server's own)",
    "fim-template": "fill-in-the-middle (our template)",
    "prefix-only": "the code before the cursor only (no fill-in-the-middle)",
}


def as_json(loaded: Loaded, results: list[TierResult]) -> str:
    def report(r: ProbeReport | None) -> dict[str, Any] | None:
        if r is None:
            return None
        d = attrs.asdict(r)
        d["usable"] = r.usable
        return d

    text = json.dumps(
        {
            "settings_file": str(loaded.config_path),
            "settings_found": loaded.config_found,
            "settings_issues": [str(i) for i in loaded.issues],
            "policy": (
                {"path": str(loaded.policy.path), "sets": dict(loaded.policy.values)}
                if loaded.policy is not None
                else None
            ),
            "tiers": [
                {
                    "tier": t.tier,
                    "configured": t.configured,
                    "usable": t.usable,
                    "choice": attrs.asdict(t.choice) if t.choice else None,
                    "report": report(t.report),
                }
                for t in results
            ],
        },
        indent=2,
    )
    return mask_urls_in(text)
