"""How fast a local model reads a prompt and writes tokens, measured as it runs.

The server sizes each local prompt and prediction from these rates (a time budget,
not a character count): the same settings then fit a fast workstation and a busy
2-core laptop. The embedded backend measures both rates when its worker loads the
model and after every generation; Ollama reports them in its final line
(`prompt_eval_count` / `prompt_eval_duration`, `eval_count` / `eval_duration`).
"""

from __future__ import annotations

import threading

import attrs

# A prompt evaluation of a handful of tokens is dominated by fixed costs (the first
# batch, the pipe): it says little about the rate of a 300-token prompt.
MIN_PROMPT_SAMPLE = 24
MIN_DECODE_SAMPLE = 3
# Weight of the newest sample: the machine's load changes within seconds, one slow
# sample should not halve the window.
ALPHA = 0.3
# What a calibration measures the rates on: real code, ~130 tokens (more than
# MIN_PROMPT_SAMPLE in any tokenizer we know).
CALIBRATION_TEXT = (
    "def parse_args(argv):\n    parser = argparse.ArgumentParser(prog='tool')\n"
    "    parser.add_argument('--verbose', action='store_true')\n"
    "    parser.add_argument('--output', '-o', default=None, help='where to write')\n"
    "    for name in sorted(argv):\n        if name.startswith('-'):\n"
    "            continue\n        if not os.path.exists(name):\n"
    "            raise SystemExit(f'no such file: {name}')\n"
    "    return parser.parse_args(argv)\n"
)


@attrs.frozen
class Rates:
    """Tokens per second; None until measured."""

    prompt_tps: float | None = None
    decode_tps: float | None = None
    samples: int = 0


# A small model on two busy cores: what the embedded backend reports until it has
# measured (its calibration at start-up runs in the background), so that its first
# request is not sized for an unbounded machine.
EMBEDDED_PRIOR = Rates(prompt_tps=100.0, decode_tps=25.0)


class SpeedMeter:
    """Moving averages of prompt-evaluation and decode rates (thread-safe: the
    embedded backend's pipe reader thread feeds it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rates = Rates()

    @property
    def rates(self) -> Rates:
        return self._rates

    def observe(
        self,
        *,
        prompt_tokens: int = 0,
        prompt_s: float | None = None,
        decode_tokens: int = 0,
        decode_s: float | None = None,
    ) -> None:
        """One generation's counts (tokens actually evaluated, not those reused from the
        KV cache) and times; samples too small to mean anything are ignored."""
        with self._lock:
            r = self._rates
            p, d, n = r.prompt_tps, r.decode_tps, r.samples
            if prompt_s and prompt_s > 0 and prompt_tokens >= MIN_PROMPT_SAMPLE:
                p = _blend(p, prompt_tokens / prompt_s)
                n += 1
            if decode_s and decode_s > 0 and decode_tokens >= MIN_DECODE_SAMPLE:
                d = _blend(d, decode_tokens / decode_s)
                n += 1
            self._rates = Rates(p, d, n)

    def seed(self, prompt_tps: float | None, decode_tps: float | None) -> None:
        """Rates measured once (a calibration run), taken as one sample each."""
        with self._lock:
            r = self._rates
            p = r.prompt_tps if not prompt_tps else _blend(r.prompt_tps, prompt_tps)
            d = r.decode_tps if not decode_tps else _blend(r.decode_tps, decode_tps)
            self._rates = Rates(p, d, r.samples + bool(prompt_tps) + bool(decode_tps))


# Characters a token when a prompt's size is only known in characters: the same count
# as the budget's (`server.routing.time_budget.CHARS_PER_TOKEN`), so that a rate
# estimated here turns back into the same characters a second there.
ESTIMATE_CHARS_PER_TOKEN = 3.5
# Fewest new prompt tokens a first-token time is read as a rate from: fewer are mostly
# fixed costs (the request, one batch), and a FIM prompt re-reads its suffix at every key,
# which would make a noisy sample of every keystroke and flip the window's size.
MIN_ESTIMATE_TOKENS = 64


class FirstTokenEstimate:
    """The prompt-evaluation rate of a server that only reports it in a final line that
    a closed stream never reads (Ollama, single lines): from the time to the first token
    and the part of the prompt its KV cache did not hold. The server keeps the previous
    prompt's KV, so what this request shares with the previous one costs nothing; what
    is new was read in (time to first token - one decode step)."""

    def __init__(self) -> None:
        self._last: str | None = None  # the previous prompt, as the server laid it out

    def sample(
        self, prompt: str, first_s: float | None, decode_tps: float | None
    ) -> tuple[int, float] | None:
        """(tokens evaluated, seconds) for this request, or None when it says nothing
        (no first token: the cache then holds an unknown part of it, and the next
        request is not sampled either)."""
        last, self._last = self._last, (prompt if first_s is not None else None)
        if first_s is None or last is None:
            return None
        new = len(prompt) - common_prefix_len(prompt, last)
        tokens = int(new / ESTIMATE_CHARS_PER_TOKEN)
        seconds = first_s - (1 / decode_tps if decode_tps else 0.0)
        if tokens < MIN_ESTIMATE_TOKENS or seconds <= 0:
            return None
        return tokens, seconds

    def forget(self) -> None:
        """The server's cache is unknown (the model reloaded, a request failed)."""
        self._last = None


def common_prefix_len(a: str, b: str) -> int:
    """Length of the longest common start of `a` and `b` (slices, not a char loop)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # invariant: a[:lo] == b[:lo]
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _blend(old: float | None, new: float) -> float:
    return new if old is None else (1 - ALPHA) * old + ALPHA * new


__all__ = [
    "CALIBRATION_TEXT",
    "EMBEDDED_PRIOR",
    "ESTIMATE_CHARS_PER_TOKEN",
    "FirstTokenEstimate",
    "Rates",
    "SpeedMeter",
    "common_prefix_len",
]
