"""Completion cache keyed by model and digests of prefix and suffix, with typing-through.

Typing-through: after a completion "foo(bar)" was shown at some prefix P, the
user types "fo"; the new request has prefix P+"fo" and the same suffix. We
find the entry by the suffix digest, check that the new prefix starts with P
(by digest of its first len(P) characters) and that the typed text starts the
cached completion, and serve "o(bar)" without asking any model.
"""

from __future__ import annotations

import hashlib

import attrs
from cachetools import LRUCache, TTLCache

from ..vocab.kinds import Reason


def digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


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
        # suffix-key -> prefix digests seen with it (for typing-through lookups); bounded
        # like the entries, or every suffix ever completed would keep a key here.
        self._by_suffix: LRUCache[tuple[str, bytes], list[bytes]] = LRUCache(maxsize)

    def put(
        self,
        model: str,
        prefix: str,
        suffix: str,
        entry_completion: str,
        route: str,
        reasons: tuple[Reason, ...],
        origin: object = None,
    ) -> None:
        if not entry_completion:
            return
        pd, sd = digest(prefix), digest(suffix)
        self._entries[(model, pd, sd)] = Entry(
            len(prefix), pd, entry_completion, route, reasons, origin
        )
        seen = self._by_suffix.get((model, sd))
        if seen is None:
            seen = self._by_suffix[(model, sd)] = []
        if pd not in seen:
            seen.append(pd)
            del seen[:-16]  # only recent prefixes matter for typing-through

    def get(self, model: str, prefix: str, suffix: str) -> Hit | None:
        sd = digest(suffix)
        exact = self._entries.get((model, digest(prefix), sd))
        if exact is not None:
            return Hit(exact.completion, "", exact)
        for pd in reversed(self._by_suffix.get((model, sd), [])):
            entry = self._entries.get((model, pd, sd))
            if entry is None or entry.prefix_len > len(prefix):
                continue
            typed = prefix[entry.prefix_len :]
            if (
                typed
                and entry.completion.startswith(typed)
                and len(typed) < len(entry.completion)
                and digest(prefix[: entry.prefix_len]) == entry.prefix_digest
            ):
                return Hit(entry.completion[len(typed) :], typed, entry)
        return None

    def clear(self) -> None:
        self._entries.clear()
        self._by_suffix.clear()
