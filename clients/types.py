"""Plain records that cross the backend boundary, and the `Backend` protocol."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from typing import Literal, Protocol, runtime_checkable

import attrs

from .errors import scrub
from .plan import PromptPlan


@attrs.frozen(kw_only=True)
class CompletionRequest:
    """One fill-in-the-middle request, independent of any wire format.

    `deadline` is a `time.monotonic()` instant after which the backend gives up
    with `BackendTimeout`; None means only the backend's own timeouts apply.
    `single_line`: the answer ends where its first line does (`line_end`), so
    `complete()` stops reading there and closes the stream, which ends the generation.
    """

    prefix: str
    suffix: str = ""
    language: str = ""
    path: str = ""  # the file's path, for repo-level FIM templates
    max_tokens: int = 64
    stop: tuple[str, ...] = ()
    temperature: float = 0.0
    deadline: float | None = None
    # Cross-file context: other files' code as (workspace-relative path, text), least
    # relevant first; `repo` names the workspace and `repo_path` is the current file's
    # workspace-relative path (repo-level templates and comment headers show both).
    context_files: tuple[tuple[str, str], ...] = ()
    repo: str = ""
    repo_path: str = ""
    single_line: bool = False
    # Cap on the prediction's time from its first token (seconds): the backend ends the
    # generation there with finish reason "length" (a first line shown fast beats five
    # lines shown late). None: only max_tokens and the deadline bound it.
    max_predict_s: float | None = None
    # What the prompt is made of, by resolved real path (server/egress.py): the remote
    # client's send path hands it to the egress check; no plan, no remote send.
    plan: PromptPlan | None = None
    # vLLM's request priority (lower is served first; the server must run with
    # `--scheduling-policy priority`, which rejects none); None: the field is not sent.
    priority: int | None = None
    # A stable, non-identifying key of the workspace (a hash of user and repository
    # root): picks the replica (`replicas.rendezvous`) and fills the session header.
    affinity: str = ""
    # The local tier's answer, for a remote that scores prompts to verify
    # (`remote.verify_draft`, clients/_verify.py): the run of it the remote model agrees
    # with is kept and only the rest generated. Empty: a plain escalation.
    draft: str = ""
    # `prefix` is the whole prompt, sent as it is: no FIM template, no suffix, no
    # context headers (next-edit suggestions lay out their own prompt).
    raw: bool = False
    # The model to ask instead of the backend's own (next edits' per-tier models); empty:
    # the backend's. A server with one model (the embedded worker) answers with it.
    model: str = ""

    def remaining(self) -> float | None:
        """Seconds left before the deadline (never negative), or None."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())


def line_end(text: str) -> int:
    """Where a single-line completion ends: its first newline after the leading ones
    (a completion may legitimately start on the next line), or -1 while none came.

    The one rule for every tier: the pipeline stops reading the local stream here,
    `complete()` the others, and `post_process` cuts there.
    """
    lead = len(text) - len(text.lstrip("\n"))
    return text.find("\n", lead)


@attrs.frozen
class TokenLogprob:
    """One generated token and its log-probability (natural log, <= 0)."""

    text: str
    logprob: float


@attrs.frozen(kw_only=True)
class Chunk:
    """A piece of a streamed generation.

    `tokens` carries the log-probs of the tokens in `text`; it is empty when the
    server does not report log-probs (then `logprobs` is False).
    """

    text: str
    tokens: tuple[TokenLogprob, ...] = ()
    logprobs: bool = True
    finish_reason: str | None = None  # set on the last chunk: "stop" | "length" | ...


PromptMode = Literal["fim-native", "fim-template", "prefix-only"]


@attrs.frozen(kw_only=True)
class Completion:
    """A whole generation, as `Backend.complete` returns it."""

    text: str
    tokens: tuple[TokenLogprob, ...]
    logprobs: bool  # False when the server gave no log-probs for some text
    finish_reason: str | None
    backend: str
    model: str
    first_token_s: float | None  # seconds from the call to the first text
    total_s: float
    bytes_sent: int = 0  # request body bytes that left this process
    # A verified escalation (CompletionRequest.draft): the draft's tokens as the remote
    # scored them (0: not scored) and the leading ones it kept as its own answer.
    draft_tokens: int = 0
    draft_kept: int = 0


@attrs.frozen
class Problem:
    """Something `doctor` found, with the fix we suggest (scrubbed of credentials)."""

    severity: Literal["error", "warning"]
    message: str = attrs.field(converter=scrub)
    fix: str = attrs.field(default="", converter=scrub)


@attrs.frozen(kw_only=True)
class ProbeReport:
    """What `synconfroute doctor` found out about a backend: the backend's own discovery
    (`Backend.discover`), then a tiny generation (`server.commands.doctor.probe`) for the timings,
    the sample and `logprobs`."""

    backend: str
    target: str  # URL or model path
    model: str
    reachable: bool
    version: str | None = None
    model_present: bool | None = None
    prompt_mode: PromptMode | None = None
    template: str | None = None
    logprobs: bool | None = None
    first_token_s: float | None = None
    total_s: float | None = None
    sample: str | None = None
    # Measured speed (tokens/s), which sizes the local prompt and prediction in time
    # (`server.routing.time_budget`); None where the backend cannot tell.
    prompt_tps: float | None = None
    decode_tps: float | None = None
    problems: tuple[Problem, ...] = ()

    @property
    def usable(self) -> bool:
        return self.reachable and not any(p.severity == "error" for p in self.problems)


@runtime_checkable
class Backend(Protocol):
    """A model that fills in the middle and reports per-token log-probs.

    `stream` is an async generator: closing it early (`aclose()`, or cancelling
    the task that iterates it) aborts the generation on the server.
    """

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str: ...

    def stream(self, request: CompletionRequest) -> AsyncGenerator[Chunk, None]: ...

    async def complete(self, request: CompletionRequest) -> Completion: ...

    async def discover(self) -> ProbeReport:
        """Reachability, version, model present, prompt mode (FIM support); no generation.
        Never raises for an expected failure: it becomes a Problem."""
        ...

    async def aclose(self) -> None: ...
