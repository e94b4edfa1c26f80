"""Accuracy of the syntax gate on the benchmark data.

1. False rejects: every ground truth spliced into its file (HumanEval single-line infilling:
   prefix = prompt, suffix = suffix; SAFIM block and API: eval_prompt split at the literal
   {{completion}}; C# skipped) must be judged valid.
2. Catch rate: broken completions made from the same ground truths (cut mid-token, drop a
   closing bracket, add one, break the indentation (Python), leave a string open; and, for
   multi-line Python middles, cuts at random points, as a token budget, a stop string or a
   cancelled stream leaves them: "cut-random" on the middle as the data has it (the hole
   ends before its line's newline), "cut-random-lines" on the same middle made of whole
   lines (the prefix ends at a line start, the middle with its newline, as multi-line
   infilling tasks have it); CUTS cuts per middle, none between \r and \n, none that
   leaves only whitespace, which the pipeline turns into an empty completion). A broken
   variant counts only when the language's own compiler check (ast.parse, javalang, g++)
   accepts the original file and rejects the broken one: some "breaks" are valid code.
3. False rejects in buffers broken elsewhere: the ground truth again, in a file whose suffix
   is cut in half, or with an unclosed `foo(` line a few lines before or after it.

g++ takes ~0.15 s a check with a precompiled <bits/stdc++.h> (~0.9 s without), so for C/C++
the compiler-dependent parts (the reference for breaks, mode "compiler", and mode "confirm"
on breaks and broken buffers) run on a sample (--compiler-sample, per language).
Mode "confirm" on the ground truths, which asks g++ only when tree-sitter objects, runs on
all of them.

    python -m studies.gate_accuracy                      # everything, ~10 min on 2 cores
    python -m studies.gate_accuracy --limit 100 --modes tree-sitter --json
"""

from __future__ import annotations

import argparse
import collections
import gzip
import hashlib
import json
import os
import random
import re
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from synconfroute.server.syntax import (
    MODES,
    CompilerConfig,
    SyntaxDocument,
    _compilers,
    prepare_pch,
)
from synconfroute.server.syntax.languages import LANGUAGES

ROOT = Path(__file__).resolve().parent.parent

LANGS = ("python", "java", "cpp")
BREAKS = (
    "cut-mid-token",
    "drop-closer",
    "add-closer",
    "break-indent",
    "open-string",
    "cut-random",
    "cut-random-lines",
)
CUTS = 5  # random cuts per multi-line Python middle
PREBROKEN = ("truncated-suffix", "open-call-before", "open-call-after")
SLOW_CHECKERS = ("g++", "gcc")


def data_dir() -> Path:
    env = os.environ.get("SYNCONFROUTE_DATA")
    return Path(env) if env else (ROOT.parent / "shared" / "data")


Item = tuple[str, str, str, str, str, str]  # dataset, lang, task_id, prefix, truth, suffix


def load_items(folder: Path, langs: tuple[str, ...], limit: int | None) -> list[Item]:
    files = {
        "humaneval": folder / "humaneval-single-line-infilling.jsonl.gz",
        "safim-block": folder / "safim-block.jsonl.gz",
        "safim-api": folder / "safim-api.jsonl.gz",
    }
    missing = [str(p) for p in files.values() if not p.exists()]
    if missing:
        sys.exit(
            f"benchmark data not found: {', '.join(missing)}\n"
            "Set SYNCONFROUTE_DATA to the folder with the .jsonl.gz files "
            "(default: ../shared/data next to the repository)."
        )
    out: list[Item] = []
    if "python" in langs:
        with gzip.open(files["humaneval"], "rt", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh]
        for r in rows[:limit]:
            out.append(
                (
                    "humaneval",
                    "python",
                    r["task_id"],
                    r["prompt"],
                    r["canonical_solution"],
                    r["suffix"],
                )
            )
    for ds in ("safim-block", "safim-api"):
        with gzip.open(files[ds], "rt", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh]
        per_lang: collections.Counter[str] = collections.Counter()
        for r in rows:
            lang = r["lang"]
            if lang not in langs:
                continue  # csharp: no grammar in the gate
            if limit is not None and per_lang[lang] >= limit:
                continue
            parts = r["eval_prompt"].split("{{completion}}")
            if len(parts) != 2:
                continue
            per_lang[lang] += 1
            out.append((ds, lang, r["task_id"], parts[0], r["ground_truth"], parts[1]))
    return out


# ---------------------------------------------------------------- variants

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|\d+(?:\.\d+)?|\S")
_STRING = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'")


def _rng(task_id: str, kind: str) -> random.Random:
    return random.Random(hashlib.sha256(f"{task_id}|{kind}".encode()).digest())


def make_breaks(lang: str, truth: str, task_id: str) -> dict[str, str]:
    """Broken versions of `truth`, by kind; a kind is absent where it does not apply."""
    out: dict[str, str] = {}
    body = truth.rstrip()
    # cut mid-token: inside the multi-character token nearest the middle of the completion
    toks = [m for m in _TOKEN.finditer(body) if m.end() - m.start() >= 2]
    if toks:
        mid = len(body) / 2
        tok = min(toks, key=lambda m: abs((m.start() + m.end()) / 2 - mid))
        out["cut-mid-token"] = truth[: tok.start() + (tok.end() - tok.start()) // 2]
    closers = [i for i, c in enumerate(truth) if c in ")]}"]
    if closers:
        i = _rng(task_id, "drop").choice(closers)
        out["drop-closer"] = truth[:i] + truth[i + 1 :]
        j = _rng(task_id, "add").choice(closers)
        out["add-closer"] = truth[: j + 1] + truth[j] + truth[j + 1 :]
    if lang == "python":
        lines = truth.split("\n")
        # lines whose indentation belongs to the completion (the first one only when the
        # completion starts a line, as in HumanEval)
        cands = [
            k
            for k, ln in enumerate(lines)
            if ln.strip() and ln[: len(ln) - len(ln.lstrip())] and (k > 0 or ln[0] in " \t")
        ]
        if cands:
            k = _rng(task_id, "indent").choice(cands)
            ln = lines[k]
            ind = ln[: len(ln) - len(ln.lstrip())]
            lines[k] = (ind[:-1] if ind.endswith(" ") else ind + " ") + ln.lstrip()
            out["break-indent"] = "\n".join(lines)
    strings = [m for m in _STRING.finditer(truth) if not truth.startswith('"""', m.start())]
    if strings:
        m = _rng(task_id, "string").choice(strings)
        out["open-string"] = truth[: m.end() - 1] + truth[m.end() :]
    return out


def make_cuts(
    lang: str, prefix: str, truth: str, suffix: str, task_id: str, n: int = CUTS
) -> list[tuple[str, str, str, str, list[str]]]:
    """(kind, prefix, whole middle, suffix, cut middles): random cuts of a multi-line Python
    middle, as it comes and made of whole lines (see the module doc); none for others."""
    if lang != "python" or "\n" not in truth.strip():
        return []
    shapes = [("cut-random", prefix, truth, suffix)]
    nl = "\r\n" if suffix.startswith("\r\n") else "\n"
    ls = prefix.rfind("\n") + 1
    if suffix.startswith(nl) and not prefix[ls:].strip():
        shapes.append(
            ("cut-random-lines", prefix[:ls], prefix[ls:] + truth + nl, suffix[len(nl) :])
        )
    out = []
    for kind, pre, mid, suf in shapes:
        rng = _rng(task_id, kind)
        ats = sorted({rng.randrange(1, len(mid)) for _ in range(n)})
        # never between \r and \n: Python takes a lone \r for a line break, tree-sitter does not
        cuts = [mid[: at - 1 if mid[at - 1 : at + 1] == "\r\n" else at] for at in ats]
        # a cut that leaves only whitespace is no completion (post_process empties it)
        cuts = [c for c in cuts if c.strip()]
        out.append((kind, pre, mid, suf, cuts))
    return out


def make_prebroken(prefix: str, suffix: str) -> dict[str, tuple[str, str]]:
    """(prefix, suffix) pairs for buffers broken away from the completion."""
    out: dict[str, tuple[str, str]] = {}
    slines = suffix.split("\n")
    if len(slines) >= 6:
        out["truncated-suffix"] = (prefix, "\n".join(slines[: (len(slines) + 1) // 2]))
    plines = prefix.split("\n")
    if len(plines) >= 6:
        k = len(plines) - 4  # an unclosed call three full lines above the completion's line
        ind = plines[k][: len(plines[k]) - len(plines[k].lstrip())]
        out["open-call-before"] = ("\n".join([*plines[:k], ind + "foo(", *plines[k:]]), suffix)
    if len(slines) >= 6:
        k = 4
        ind = slines[k][: len(slines[k]) - len(slines[k].lstrip())]
        out["open-call-after"] = (prefix, "\n".join([*slines[:k], ind + "foo(", *slines[k:]]))
    return out


# ---------------------------------------------------------------- evaluation

_memo: dict[tuple[str, str], Any] = {}


def _memo_checker(real: Callable[..., Any]) -> Callable[..., Any]:
    """The same text gets the same compiler answer: don't pay g++ twice for it."""

    def run(name: str, text: str, deadline: float | None, config: Any = None) -> Any:
        key = (name, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest())
        hit = _memo.get(key)
        if hit is not None:
            return hit
        res = (
            real(name, text, deadline, config) if config is not None else real(name, text, deadline)
        )
        if not res.timed_out:
            if len(_memo) > 20000:
                _memo.clear()
            _memo[key] = res
        return res

    return run


def _worker_init() -> None:
    _compilers.run_checker = _memo_checker(_compilers.run_checker)


def evaluate(job: tuple[Item, tuple[str, ...], bool, str | None, int]) -> dict[str, Any]:
    """All counts for one item: {key tuple as string: count} plus failure examples."""
    item, modes, sampled, pch, cuts_per_middle = job
    dataset, lang, task_id, prefix, truth, suffix = item
    config = CompilerConfig(pch_dir=Path(pch) if pch else None)
    checker = LANGUAGES[lang].compiler or ""
    slow = checker in SLOW_CHECKERS
    counts: collections.Counter[str] = collections.Counter()
    fails: list[dict[str, Any]] = []
    times: collections.defaultdict[str, float] = collections.defaultdict(float)

    def note(key: tuple[str, ...], n: int = 1) -> None:
        counts["|".join(key)] += n

    def run(doc: SyntaxDocument, at: int, text: str, mode: Any) -> Any:
        v = doc.check(text, at, mode=mode)
        times[mode] += v.elapsed_s
        counts["|".join(("checks", mode))] += 1
        return v

    doc = SyntaxDocument(prefix + suffix, lang, compilers=config)
    at = len(prefix.encode("utf-8", "surrogatepass"))

    # 1. false rejects on the ground truth
    for mode in modes:
        if mode == "compiler" and slow and not sampled:
            continue
        v = run(doc, at, truth, mode)
        note(("truth", lang, mode, "n"))
        if v.status != "valid":
            note(("truth", lang, mode, v.status))
            fails.append(
                {
                    "what": "false-reject",
                    "task": task_id,
                    "lang": lang,
                    "mode": mode,
                    "verdict": f"{v.status} {v.checker} {v.line}:{v.column} {v.message} "
                    f"| {v.detail}",
                }
            )

    # 2. catch rate on broken completions, against the compiler's own verdict
    if not slow or sampled:
        ref_ok = _compilers.run_checker(checker, prefix + truth + suffix, None, config)
        note(("reference", lang, "truth-accepted" if ref_ok.ok else "truth-rejected"))
        if ref_ok.ok:
            for kind, broken in make_breaks(lang, truth, task_id).items():
                ref = _compilers.run_checker(checker, prefix + broken + suffix, None, config)
                note(("break", lang, kind, "made"))
                if ref.ok or ref.failure:
                    note(("break", lang, kind, "still-valid"))
                    continue
                note(("break", lang, kind, "counted"))
                for mode in modes:
                    v = run(doc, at, broken, mode)
                    note(("caught", lang, mode, kind, "n"))
                    note(("caught", lang, mode, kind, v.status))
                    if v.status != "invalid" and len(fails) < 50:
                        fails.append(
                            {
                                "what": "missed",
                                "task": task_id,
                                "lang": lang,
                                "mode": mode,
                                "kind": kind,
                                "verdict": f"{v.status} {v.checker} {v.detail}",
                            }
                        )

        # random cuts of multi-line Python middles, in their own documents (the lines
        # shape moves the hole's edges)
        for kind, pre, whole, suf, cuts in make_cuts(
            lang, prefix, truth, suffix, task_id, cuts_per_middle
        ):
            cdoc = SyntaxDocument(pre + suf, lang, compilers=config)
            cat = len(pre.encode("utf-8", "surrogatepass"))
            if kind != "cut-random":  # the whole middle in this shape is correct too
                for mode in modes:
                    v = run(cdoc, cat, whole, mode)
                    note(("truth-lines", lang, mode, "n"))
                    if v.status != "valid":
                        note(("truth-lines", lang, mode, v.status))
            for broken in cuts:
                note(("break", lang, kind, "made"))
                ref = _compilers.run_checker(checker, pre + broken + suf, None, config)
                if ref.failure:
                    continue
                if ref.ok:
                    # a cut the compiler accepts is a correct completion: the gate must agree
                    note(("break", lang, kind, "still-valid"))
                    for mode in modes:
                        v = run(cdoc, cat, broken, mode)
                        note(("cut-valid", lang, mode, kind, "n"))
                        if v.status != "valid":
                            note(("cut-valid", lang, mode, kind, v.status))
                            fails.append(
                                {
                                    "what": "valid-cut-rejected",
                                    "task": task_id,
                                    "lang": lang,
                                    "mode": mode,
                                    "kind": kind,
                                    "tail": broken[-40:],
                                    "next": suf[:40],
                                    "verdict": f"{v.status} {v.line}:{v.column} {v.message}",
                                }
                            )
                    continue
                note(("break", lang, kind, "counted"))
                for mode in modes:
                    v = run(cdoc, cat, broken, mode)
                    note(("caught", lang, mode, kind, "n"))
                    note(("caught", lang, mode, kind, v.status))
                    if v.status != "invalid" and len(fails) < 50:
                        fails.append(
                            {
                                "what": "missed",
                                "task": task_id,
                                "lang": lang,
                                "mode": mode,
                                "kind": kind,
                                "tail": broken[-40:],
                                "next": suf[:40],
                                "verdict": f"{v.status} {v.checker} {v.detail}",
                            }
                        )

    # 3. false rejects in buffers broken elsewhere
    for kind, (pre, suf) in make_prebroken(prefix, suffix).items():
        bdoc = SyntaxDocument(pre + suf, lang, compilers=config)
        bat = len(pre.encode("utf-8", "surrogatepass"))
        for mode in modes:
            if mode != "tree-sitter" and slow and not sampled:
                continue
            v = run(bdoc, bat, truth, mode)
            note(("prebroken", lang, mode, kind, "n"))
            if v.status != "valid":
                note(("prebroken", lang, mode, kind, v.status))
                if len(fails) < 50:
                    fails.append(
                        {
                            "what": "prebroken-reject",
                            "task": task_id,
                            "lang": lang,
                            "mode": mode,
                            "kind": kind,
                            "verdict": f"{v.status} {v.checker} {v.line}:{v.column} "
                            f"{v.message} | {v.detail}",
                        }
                    )
    return {"counts": dict(counts), "fails": fails, "times": dict(times), "dataset": dataset}


def _chunks(jobs: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(jobs), size):
        yield jobs[i : i + size]


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:6.2f}%" if b else "     -"


def report(
    counts: collections.Counter[str], times: dict[str, float], args: argparse.Namespace
) -> str:
    def c(*key: str) -> int:
        return counts.get("|".join(key), 0)

    lines = []
    lines.append("False rejects on correct completions (ground truth spliced into its file)")
    lines.append(
        f"{'lang':8} {'mode':12} {'checked':>8} {'rejected':>9} {'rate':>8} "
        f"{'timeout':>8} {'other':>6}"
    )
    for lang in args.langs:
        for mode in args.modes:
            n = c("truth", lang, mode, "n")
            if not n:
                continue
            rej = c("truth", lang, mode, "invalid")
            other = c("truth", lang, mode, "error") + c("truth", lang, mode, "unsupported-language")
            lines.append(
                f"{lang:8} {mode:12} {n:8d} {rej:9d} {_pct(rej, n):>8} "
                f"{c('truth', lang, mode, 'timeout'):8d} {other:6d}"
            )
    for lang in args.langs:
        for mode in args.modes:
            n = c("truth-lines", lang, mode, "n")
            if n:
                rej = c("truth-lines", lang, mode, "invalid")
                lines.append(
                    f"{lang:8} {mode:12} {n:8d} {rej:9d} {_pct(rej, n):>8}   "
                    "(multi-line middles made of whole lines)"
                )
            for kind in ("cut-random", "cut-random-lines"):
                n = c("cut-valid", lang, mode, kind, "n")
                if n:
                    rej = c("cut-valid", lang, mode, kind, "invalid")
                    lines.append(
                        f"{lang:8} {mode:12} {n:8d} {rej:9d} {_pct(rej, n):>8}   "
                        f"({kind} cuts the compiler check accepts)"
                    )
    lines.append("")
    lines.append(
        "Catch rate on broken completions (counted: the compiler check rejects the broken file "
        "and accepts the original)"
    )
    lines.append(
        f"{'lang':8} {'mode':12} {'break':17} {'counted':>8} {'caught':>7} {'rate':>8} "
        f"{'timeout':>8}"
    )
    for lang in args.langs:
        for mode in args.modes:
            tot_n = tot_c = 0
            for kind in BREAKS:
                n = c("caught", lang, mode, kind, "n")
                if not n:
                    continue
                caught = c("caught", lang, mode, kind, "invalid")
                tot_n += n
                tot_c += caught
                lines.append(
                    f"{lang:8} {mode:12} {kind:17} {n:8d} {caught:7d} {_pct(caught, n):>8} "
                    f"{c('caught', lang, mode, kind, 'timeout'):8d}"
                )
            if tot_n:
                lines.append(
                    f"{lang:8} {mode:12} {'ALL':17} {tot_n:8d} {tot_c:7d} {_pct(tot_c, tot_n):>8}"
                )
    lines.append("")
    lines.append(
        "Breaks made vs counted (still-valid: the compiler check accepts the 'broken' file)"
    )
    for lang in args.langs:
        acc, rej = c("reference", lang, "truth-accepted"), c("reference", lang, "truth-rejected")
        parts = [f"{lang}: reference accepts {acc} original files, rejects {rej}"]
        for kind in BREAKS:
            made = c("break", lang, kind, "made")
            if made:
                parts.append(
                    f"{kind} {made} made/{c('break', lang, kind, 'counted')} counted/"
                    f"{c('break', lang, kind, 'still-valid')} still valid"
                )
        lines.append("; ".join(parts))
    lines.append("")
    lines.append("False rejects on correct completions in buffers broken elsewhere")
    lines.append(f"{'lang':8} {'mode':12} {'buffer':17} {'checked':>8} {'rejected':>9} {'rate':>8}")
    for lang in args.langs:
        for mode in args.modes:
            for kind in PREBROKEN:
                n = c("prebroken", lang, mode, kind, "n")
                if not n:
                    continue
                rej = c("prebroken", lang, mode, kind, "invalid")
                lines.append(f"{lang:8} {mode:12} {kind:17} {n:8d} {rej:9d} {_pct(rej, n):>8}")
    lines.append("")
    lines.append("Mean check time per mode")
    for mode in args.modes:
        n = c("checks", mode)
        if n:
            lines.append(f"{mode:12} {1000.0 * times.get(mode, 0.0) / n:9.3f} ms over {n} checks")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--limit", type=int, default=None, help="items per dataset and language")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated gate modes")
    ap.add_argument("--langs", default=",".join(LANGS), help="comma-separated: python,java,cpp")
    ap.add_argument(
        "--compiler-sample",
        type=int,
        default=300,
        help="C/C++ items per language for the g++-dependent parts (0: all)",
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the compiler sample")
    ap.add_argument(
        "--cuts", type=int, default=CUTS, help="random cuts per multi-line Python middle"
    )
    ap.add_argument(
        "--lf", action="store_true", help="CRLF line ends as LF (SAFIM's files are CRLF)"
    )
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    ap.add_argument(
        "--pch-dir",
        default=None,
        help="folder for a precompiled <bits/stdc++.h> (default: a folder in the user cache)",
    )
    ap.add_argument("--no-pch", action="store_true", help="run g++ without a precompiled header")
    ap.add_argument("--json", action="store_true", help="print the counts as JSON")
    ap.add_argument("--show-failures", type=int, default=10, help="print this many failures")
    args = ap.parse_args(argv)
    args.modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    args.langs = tuple(x.strip() for x in args.langs.split(",") if x.strip())
    for m in args.modes:
        if m not in MODES:
            ap.error(f"unknown mode {m!r}; choose from {', '.join(MODES)}")
    for lang in args.langs:
        if lang not in LANGS:
            ap.error(f"unknown language {lang!r}; choose from {', '.join(LANGS)}")

    items = load_items(data_dir(), args.langs, args.limit)
    if args.lf:
        items = [
            (ds, lang, task, *(x.replace("\r\n", "\n") for x in (pre, truth, suf)))
            for ds, lang, task, pre, truth, suf in items
        ]
    rng = random.Random(args.seed)
    sampled: set[str] = set()
    notes: list[str] = []
    for lang in args.langs:
        ids = [f"{it[0]}/{it[2]}" for it in items if it[1] == lang]
        slow = LANGUAGES[lang].compiler in SLOW_CHECKERS
        if slow and args.compiler_sample and len(ids) > args.compiler_sample:
            chosen = rng.sample(ids, args.compiler_sample)
            notes.append(
                f"{lang}: g++ parts (break reference, mode compiler, mode confirm on breaks and "
                f"broken buffers) on a sample of {len(chosen)} of {len(ids)} items "
                f"(--compiler-sample; 0 for all)"
            )
        else:
            chosen = ids
        sampled.update(chosen)

    pch: str | None = None
    if not args.no_pch and any(LANGUAGES[x].compiler in SLOW_CHECKERS for x in args.langs):
        if args.pch_dir:
            pch_dir = Path(args.pch_dir)
        else:
            import platformdirs

            pch_dir = Path(platformdirs.user_cache_dir("synconfroute")) / "pch"
        t = time.perf_counter()
        inc = prepare_pch(CompilerConfig(pch_dir=pch_dir))
        if inc is not None:
            pch = str(pch_dir)
            notes.append(
                f"g++ uses a precompiled <bits/stdc++.h> in {inc} ({time.perf_counter() - t:.1f} s)"
            )
        else:
            notes.append("g++ runs without a precompiled header (could not build one)")

    jobs = [(it, args.modes, f"{it[0]}/{it[2]}" in sampled, pch, args.cuts) for it in items]
    counts: collections.Counter[str] = collections.Counter()
    times: collections.Counter[str] = collections.Counter()
    fails: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    print(f"checking {len(items)} items with {args.jobs} worker(s)...", file=sys.stderr)
    with ProcessPoolExecutor(max_workers=args.jobs, initializer=_worker_init) as pool:
        for done, res in enumerate(pool.map(evaluate, jobs, chunksize=8), 1):
            counts.update(res["counts"])
            times.update(res["times"])
            fails.extend(res["fails"])
            if done % 500 == 0:
                print(f"  {done}/{len(items)} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    wall = time.perf_counter() - t0
    if args.json:
        print(
            json.dumps(
                {"counts": dict(sorted(counts.items())), "notes": notes, "seconds": wall}, indent=1
            )
        )
        return 0
    per_lang = collections.Counter(it[1] for it in items)
    print(f"items: {dict(per_lang)}; {wall:.0f} s")
    for n in notes:
        print("note:", n)
    print()
    print(report(counts, dict(times), args))
    if args.show_failures:
        print()
        print("Failures (first few):")
        shown: collections.Counter[str] = collections.Counter()
        for f in fails:
            key = f"{f['what']}|{f['lang']}|{f['mode']}"
            if shown[key] >= args.show_failures:
                continue
            shown[key] += 1
            print(" ", json.dumps(f, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
