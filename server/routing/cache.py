"""Completion cache keyed by model and digests of prefix and suffix, with typing-through.

Typing-through: after a completion "foo(bar)" was shown at some prefix P, the
user types "fo"; the new request has prefix P+"fo" and the same suffix. We
find the entry by the suffix digest, check that the new prefix starts with P
(by digest of its first len(P) characters) and that the typed text starts the
cached completion, and serve "o(bar)" without asking any model.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable

import attrs
from cachetools import LRUCache, TTLCache

from ..learning import later
from ..vocab.kinds import Reason


def digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def digests(prefix: str, suffix: str) -> tuple[bytes, bytes]:
    """A request's (prefix, suffix) digests: made once, read by its `get` and its `put`."""
    return digest(prefix), digest(suffix)


@attrs.frozen
class Entry:
    prefix_len: int
    prefix_digest: bytes
    completion: str
    route: str
    reasons: tuple[Reason, ...]
    origin: object = None  # the decision that produced it (for the hover card)


@attrs.frozen
class Hit:
    completion: str  # what is left to insert
    typed: str  # what the user typed since the entry was made
    entry: Entry


class CompletionCache:
    def __init__(self, maxsize: int = 512, ttl_s: float = 600.0) -> None:
        self._entries: TTLCache[tuple[str, bytes, bytes], Entry] = TTLCache(maxsize, ttl_s)
        # suffix-key -> the prefixes seen with it, oldest first (for typing-through
        # lookups): each prefix digest with what the typing-through check reads (its
        # length and completion), so only the one candidate that passes touches the
        # TTLCache (each lookup there reads its timer). Bounded like the entries, or
        # every suffix ever completed would keep a key here.
        self._by_suffix: LRUCache[tuple[str, bytes], dict[bytes, tuple[int, str]]] = LRUCache(
            maxsize
        )
        self._pending: list[Callable[[], None]] = []  # put after the response, not yet

    def _put_pending(self) -> None:
        pending, self._pending = self._pending, []
        for put in pending:
            put()

    def put(
        self,
        model: str,
        prefix: str,
        suffix: str,
        entry_completion: str,
        route: str,
        reasons: tuple[Reason, ...],
        origin: object = None,
        made: tuple[bytes, bytes] | None = None,  # `digests(prefix, suffix)`, if made
        *,
        after_response: bool = False,
    ) -> None:
        """Keep a completion shown at (prefix, suffix). `after_response`: once the
        request's response is written, as the user does not wait for the entry (a
        TTLCache and an LRUCache written, ~40 µs with the caches cold after the model's
        wait); a `get` before then puts it first, `clear` drops it."""
        if not entry_completion:
            return
        if after_response:
            args = (model, prefix, suffix, entry_completion, route, reasons, origin, made)
            self._pending.append(functools.partial(self.put, *args))
            if len(self._pending) == 1:
                later.after_response(self._put_pending)
            return
        pd, sd = digests(prefix, suffix) if made is None else made
        self._entries[(model, pd, sd)] = Entry(
            len(prefix), pd, entry_completion, route, reasons, origin
        )
        seen = self._by_suffix.get((model, sd))
        if seen is None:
            seen = self._by_suffix[(model, sd)] = {}
        fresh = pd not in seen
        seen[pd] = (len(prefix), entry_completion)  # a known prefix keeps its place
        if fresh and len(seen) > 16:  # only recent prefixes matter for typing-through
            del seen[next(iter(seen))]

    def get(
        self, model: str, prefix: str, suffix: str, made: tuple[bytes, bytes] | None = None
    ) -> Hit | None:
        if self._pending:
            self._put_pending()
        pd, sd = digests(prefix, suffix) if made is None else made
        exact = self._entries.get((model, pd, sd))
        if exact is not None:
            return Hit(exact.completion, "", exact)
        seen = self._by_suffix.get((model, sd))
        for pd, (prefix_len, completion) in reversed(seen.items() if seen else ()):
            if prefix_len >= len(prefix):
                continue  # nothing typed since
            typed = prefix[prefix_len:]
            if (
                completion.startswith(typed)
                and len(typed) < len(completion)
                and digest(prefix[:prefix_len]) == pd
            ):
                entry = self._entries.get((model, pd, sd))  # gone: expired or evicted
                if entry is not None and entry.completion == completion:
                    return Hit(completion[len(typed) :], typed, entry)
        return None

    def clear(self) -> None:
        self._pending.clear()
        self._entries.clear()
        self._by_suffix.clear()
