"""The completion cache (with typing-through) and the post-processing of raw completions."""

from __future__ import annotations

from synconfroute.server.routing.cache import CompletionCache
from synconfroute.server.routing.pipeline import remote_access
from synconfroute.server.routing.text_rules import post_process, wants_multiline
from synconfroute.server.settings.config import Settings, with_values
from tests.files import existing

PRE, SUF = "def f(x):\n    return ", "\n"


def test_exact_hit_and_miss() -> None:
    c = CompletionCache()
    c.put("m", PRE, SUF, "x * 2", "local", ("confident-and-valid",))
    hit = c.get("m", PRE, SUF)
    assert hit is not None and hit.completion == "x * 2" and hit.typed == ""
    assert c.get("other-model", PRE, SUF) is None
    assert c.get("m", PRE, SUF + "more") is None
    assert c.get("m", PRE + "y", SUF) is None  # typed text that is not the completion


def test_typing_through_serves_the_rest() -> None:
    c = CompletionCache()
    c.put("m", PRE, SUF, "x * 2", "remote", ("low-confidence", "remote-ok"))
    hit = c.get("m", PRE + "x *", SUF)
    assert hit is not None and hit.completion == " 2" and hit.typed == "x *"
    assert hit.entry.route == "remote"
    assert c.get("m", PRE + "x * 2", SUF) is None  # fully typed: nothing left to offer


def test_typing_through_checks_the_whole_prefix() -> None:
    c = CompletionCache()
    c.put("m", PRE, SUF, "x * 2", "local", ())
    changed = "def g(x):\n    return " + "x"  # same length start, different text
    assert c.get("m", changed, SUF) is None


def test_empty_completions_are_not_cached() -> None:
    c = CompletionCache()
    c.put("m", PRE, SUF, "", "none", ())
    assert c.get("m", PRE, SUF) is None


def test_post_process_single_line() -> None:
    assert post_process("x * 2\n    y = 3", SUF, multiline=False) == "x * 2"
    assert post_process("\n    return 1\nfoo", "", multiline=False) == "\n    return 1"
    assert post_process("a\nb", "", multiline=True) == "a\nb"


def test_post_process_cuts_repeated_suffix() -> None:
    suffix = "\n    return total\n"
    raw = "total += x\n    return total\n"
    assert post_process(raw, suffix, multiline=True) == "total += x"
    # a short anchor (like ")") is never used to cut
    assert post_process("f(x)\n)", ")\n", multiline=True) == "f(x)\n)"


def test_post_process_whitespace_only_becomes_empty() -> None:
    assert post_process("  \n ", "", multiline=True) == ""


def test_remote_access() -> None:
    s = Settings()
    assert remote_access(s, None, "a.py") == "not-configured"
    fake_remote = object()
    assert remote_access(s, fake_remote, existing("/repo/a.py")) == "ok"  # type: ignore[arg-type]
    # A path that cannot be resolved to a real one fails closed (docs/privacy.md).
    assert remote_access(s, fake_remote, "a.py") == "privacy-blocked"  # type: ignore[arg-type]
    s = with_values(s, {"privacy": {"never_send": ["**/secrets/**", "*.env"]}})
    assert remote_access(s, fake_remote, existing("/repo/secrets/keys.py")) == "privacy-blocked"  # type: ignore[arg-type]
    assert remote_access(s, fake_remote, existing("/repo/prod.env")) == "privacy-blocked"  # type: ignore[arg-type]
    assert remote_access(s, fake_remote, existing("/repo/app.py")) == "ok"  # type: ignore[arg-type]
    s = with_values(s, {"privacy": {"local_only": True}})
    assert remote_access(s, fake_remote, existing("/repo/app.py")) == "local-only"  # type: ignore[arg-type]


def test_post_process_cuts_fences_and_double_blank_lines() -> None:
    raw = "0, n - 1\n```\n\nThis implementation uses dynamic programming"
    assert post_process(raw, "\n", multiline=True) == "0, n - 1"
    assert post_process("a = 1\n\n\nb = 2", "", multiline=True) == "a = 1"
    assert post_process("a = 1\n\nb = 2", "", multiline=True) == "a = 1\n\nb = 2"


def test_wants_multiline() -> None:
    assert not wants_multiline("def f():\n    return", True)  # finishing a line
    assert wants_multiline("def f():\n    ", True)  # blank line: a block may follow
    assert wants_multiline("def f():", True)  # after a block opener
    assert wants_multiline("int main() {", True)
    assert wants_multiline("", True)
    assert not wants_multiline("def f():\n    ", False)  # the setting wins


def test_typing_through_index_is_bounded() -> None:
    from synconfroute.server.routing.cache import CompletionCache

    cache = CompletionCache(maxsize=8)
    for i in range(1000):
        cache.put("m", f"p{i}", f"suffix {i}", "x", "local", ())
    assert len(cache._by_suffix) <= 8
    assert cache.get("m", "p999", "suffix 999") is not None


def test_typing_through_asks_the_entries_only_for_the_candidate() -> None:
    """Many prefixes seen with one suffix (every document ending the same way): a miss
    asks the TTLCache once (the exact key), a typing-through hit twice; the check of
    each candidate reads what was stored beside its digest. (Before: one lookup per
    prefix seen, up to 16, each reading the cache's timer.)"""
    from cachetools import TTLCache

    from synconfroute.server.routing.cache import CompletionCache

    class Counting(TTLCache):  # type: ignore[type-arg]
        lookups = 0

        def get(self, key: object, default: object = None) -> object:
            self.lookups += 1
            return super().get(key, default)

    cache = CompletionCache()
    entries = cache._entries = Counting(512, 600.0)
    for i in range(20):
        cache.put("m", f"def g{i}(x):\n    return ", SUF, "x + 1", "local", ())
    assert cache.get("m", "def other(x):\n    return ", SUF) is None
    assert entries.lookups == 1
    hit = cache.get("m", "def g7(x):\n    return x", SUF)
    assert hit is not None and hit.completion == " + 1" and hit.typed == "x"
    assert entries.lookups == 3
    # A prefix completed again keeps its place and serves its new completion.
    cache.put("m", "def g7(x):\n    return ", SUF, "x * 2", "local", ())
    hit = cache.get("m", "def g7(x):\n    return x", SUF)
    assert hit is not None and hit.completion == " * 2"
    # Only the 16 latest prefixes are kept for typing-through.
    assert cache.get("m", "def g3(x):\n    return x", SUF) is None


def test_typing_through_never_serves_an_expired_entry() -> None:
    from synconfroute.server.routing.cache import CompletionCache

    cache = CompletionCache(ttl_s=-1.0)  # every entry expired as soon as it is stored
    cache.put("m", PRE, SUF, "x * 2", "local", ())
    assert cache.get("m", PRE + "x", SUF) is None
    assert cache.get("m", PRE, SUF) is None
