"""The syntax gate in files already broken at or near the cursor (issue 22).

Cases are made from real files: click and gson (../shared/data/repos), CPython's stdlib,
SAFIM C++ programs (ground truth filled in). A multi-line middle that starts at a block
header (Python: an `if`/`for`/`while`/`with`/`try`/`def` header and 1-3 lines of its body;
Java/C++: a header line ending in `{` and 1-3 lines after it) is deleted, so the text
without it is broken at the cursor (Python: the body's deeper indentation; brace
languages: a closing brace too many). Baselines, by kind:

- `hole`: the middle deleted, whole lines (the cursor at a line start);
- `hole-half-line`: the user typed the first part of the header line (cursor mid-line);
- `hole+open-call`: `hole` and an unclosed `foo(` line 2-4 lines above the cursor;
- `hole+cut-above`: `hole` and a line 1-3 lines above the cursor cut in half.

Completions: the deleted text (`truth`), random cuts of it (`cut-tail`, CUTS per middle, as
a token budget or a cancelled stream leaves them), one closing bracket dropped
(`drop-closer`), one opening bracket doubled (`double-opener`). Label: the language's own
check (ast.parse, javalang, g++ -fsyntax-only) on the ORIGINAL file (no damage other than
the completion), with the completion in place of the middle: accepted = a correct
completion the gate must accept, rejected = a broken one the gate should catch.

Split: by file (sha256 of its name), `tune` and `held`. Decide rules on `tune`, report
`held`. Labels are cached (--cache) so re-running the gate is fast.

    python -m studies.gate_broken                 # build (first run, minutes) and evaluate
    python -m studies.gate_broken --split held --show 20
    python -m studies.gate_broken --fresh --langs python --cache /tmp/fresh_py.jsonl.gz
    python -m studies.gate_broken --fresh 2 --langs python --cache /tmp/fresh2_py.jsonl.gz
"""

from __future__ import annotations

import argparse
import ast
import collections
import gzip
import hashlib
import json
import random
import re
import sys
import sysconfig
import tarfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from studies.gate_accuracy import data_dir
from synconfroute.server.syntax import CompilerConfig, SyntaxDocument, _compilers, prepare_pch

CUTS = 8
BASELINES = ("hole", "hole-half-line", "hole+open-call", "hole+cut-above")
COMPLETIONS = ("truth", "cut-tail", "drop-closer", "double-opener")
CHECKER = {"python": "python-ast", "java": "javalang", "cpp": "g++"}
# CPython modules used as Python sources next to click (stable, varied, mostly 300-3000 lines)
STDLIB = [
    "argparse.py",
    "ast.py",
    "bdb.py",
    "calendar.py",
    "cmd.py",
    "codeop.py",
    "configparser.py",
    "contextlib.py",
    "csv.py",
    "dataclasses.py",
    "difflib.py",
    "dis.py",
    "enum.py",
    "filecmp.py",
    "fileinput.py",
    "fnmatch.py",
    "fractions.py",
    "ftplib.py",
    "functools.py",
    "getopt.py",
    "gettext.py",
    "glob.py",
    "gzip.py",
    "heapq.py",
    "hmac.py",
    "imaplib.py",
    "inspect.py",
    "ipaddress.py",
    "locale.py",
    "mailbox.py",
    "mimetypes.py",
    "netrc.py",
    "ntpath.py",
    "nturl2path.py",
    "numbers.py",
    "opcode.py",
    "operator.py",
    "optparse.py",
    "pathlib.py",
    "pdb.py",
    "pickle.py",
    "pkgutil.py",
    "platform.py",
    "plistlib.py",
    "poplib.py",
    "posixpath.py",
    "pprint.py",
    "pstats.py",
    "pydoc.py",
    "quopri.py",
    "random.py",
    "reprlib.py",
    "rlcompleter.py",
    "runpy.py",
    "sched.py",
    "secrets.py",
    "selectors.py",
    "shelve.py",
    "shlex.py",
    "shutil.py",
    "smtplib.py",
    "socketserver.py",
    "statistics.py",
    "string.py",
    "subprocess.py",
    "symtable.py",
    "tabnanny.py",
    "tarfile.py",
    "tempfile.py",
    "textwrap.py",
    "threading.py",
    "timeit.py",
    "token.py",
    "tokenize.py",
    "trace.py",
    "traceback.py",
    "tracemalloc.py",
    "types.py",
    "typing.py",
    "uuid.py",
    "warnings.py",
    "wave.py",
    "weakref.py",
    "webbrowser.py",
    "zipapp.py",
    "zipfile.py",
]


# --fresh: Python packages of the stdlib that no rule was decided on (none of the above)
FRESH_PACKAGES = [
    "asyncio",
    "email",
    "json",
    "http",
    "logging",
    "concurrent/futures",
    "urllib",
    "unittest",
    "importlib",
    "xml/dom",
    "multiprocessing",
]
# --fresh 2: a second such set, made after rules were decided on set 1
FRESH2_PACKAGES = [
    "collections",
    "ctypes",
    "curses",
    "dbm",
    "email/mime",
    "html",
    "idlelib",
    "lib2to3",
    "lib2to3/fixes",
    "re",
    "sqlite3",
    "tomllib",
    "venv",
    "wsgiref",
    "xml/etree",
    "xml/sax",
    "xmlrpc",
    "zoneinfo",
]
# --fresh 3: third-party code, not the stdlib's style: packages the test set-up installs
# (site-packages of the interpreter that runs the study), made after sets 1 and 2's rules
FRESH3_PACKAGES = [
    "_pytest",
    "anyio",
    "attr",
    "cachetools",
    "cattrs",
    "h11",
    "httpcore",
    "httpx",
    "hypothesis",
    "javalang",
    "platformdirs",
    "pygls",
]
# --fresh 4: more third-party code in site-packages, made after set 3's rules
FRESH4_PACKAGES = [
    "build",
    "dateutil",
    "diskcache",
    "jinja2",
    "markdown_it",
    "packaging",
    "pathspec",
    "pluggy",
    "pyparsing",
    "sortedcontainers",
    "starlette",
    "tomlkit",
    "uvicorn",
    "yaml",
]
# --fresh 5: more third-party code in site-packages, made after set 4's rules (report only)
FRESH5_PACKAGES = [
    "fastapi",
    "openai",
    "pydantic",
    "pydantic_settings",
    "pygments",
    "pytest_lsp",
    "rich",
    "sqlite_utils",
    "sse_starlette",
]
# --fresh 6: pip's and setuptools' own code, made after set 5's rules (report only)
FRESH6_PACKAGES = [
    "dotenv",
    "pip/_internal",
    "pip/_internal/commands",
    "pip/_internal/index",
    "pip/_internal/network",
    "pip/_internal/operations",
    "pip/_internal/req",
    "pip/_internal/utils",
    "pkg_resources",
    "setuptools",
    "setuptools/command",
]

# --fresh 7: more third-party code (imaging, plotting, CLI), made after set 6's rules
# (report only)
FRESH7_PACKAGES = [
    "PIL",
    "grimp",
    "idna",
    "importlinter",
    "iniconfig",
    "llm",
    "markupsafe",
    "matplotlib",
]


def split_of(name: str) -> str:
    return "held" if hashlib.sha256(name.encode()).digest()[0] % 2 else "tune"


# ---------------------------------------------------------------- sources


def sources(
    max_cpp: int, max_java_lines: int, skip_cpp: int = 0, fresh: int = 0
) -> Iterator[tuple[str, str, str]]:
    """(language, name, text) of every source file; C++: SAFIM's programs `skip_cpp` to
    `skip_cpp + max_cpp` (a later range is a set no rule was decided on). `fresh` 1 to 7:
    files no rule was decided on: FRESH_PACKAGES (FRESH2_ to FRESH7_PACKAGES) instead
    of click and STDLIB, and the gson files longer than `max_java_lines` (up to 4,000
    lines) instead of the others (the same Java files for both)."""
    repos = data_dir() / "repos"
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    if fresh:
        packages = {
            1: FRESH_PACKAGES,
            2: FRESH2_PACKAGES,
            3: FRESH3_PACKAGES,
            4: FRESH4_PACKAGES,
            5: FRESH5_PACKAGES,
            6: FRESH6_PACKAGES,
        }.get(fresh, FRESH7_PACKAGES)
        root, where = (
            (Path(sysconfig.get_paths()["purelib"]), "site-packages")
            if fresh >= 3
            else (stdlib, "stdlib")
        )
        for package in packages:
            for p in sorted((root / package).glob("*.py")):
                yield "python", f"{where}/{package}/{p.name}", p.read_text("utf-8")
    else:
        with tarfile.open(repos / "click-src.tar.gz") as tf:
            for m in tf.getmembers():
                if m.isfile() and m.name.endswith(".py"):
                    f = tf.extractfile(m)
                    assert f is not None
                    yield "python", "click/" + m.name, f.read().decode("utf-8")
        for name in STDLIB:
            p = stdlib / name
            if p.exists():
                yield "python", "stdlib/" + name, p.read_text("utf-8")
    with tarfile.open(repos / "gson-main.tar.gz") as tf:
        for m in tf.getmembers():
            if m.isfile() and m.name.endswith(".java"):
                f = tf.extractfile(m)
                assert f is not None
                text = f.read().decode("utf-8")
                lines = text.count("\n")
                if (max_java_lines < lines <= 4000) if fresh else lines <= max_java_lines:
                    yield "java", "gson/" + m.name, text
    with gzip.open(data_dir() / "safim-block.jsonl.gz", "rt", encoding="utf-8") as fh:
        n = -skip_cpp
        for line in fh:
            r = json.loads(line)
            if r["lang"] != "cpp" or r["eval_prompt"].count("{{completion}}") != 1:
                continue
            n += 1
            if n <= 0:
                continue
            text = r["eval_prompt"].replace("{{completion}}", r["ground_truth"])
            yield "cpp", "safim/" + r["task_id"], text.replace("\r\n", "\n")
            if n >= max_cpp:
                break


# ---------------------------------------------------------------- middles

_PY_BLOCKS = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef)
_BRACE_HEADER = re.compile(r"^\s+(?:\}\s*else\b.*|if\b.*|for\b.*|while\b.*|try\s*|else\b.*)\{\s*$")


def middles(lang: str, text: str, rng: random.Random, n: int) -> list[tuple[int, int]]:
    """(first line, end line) of up to n middles: a block header and 1-3 lines after it."""
    lines = text.split("\n")
    cands: list[tuple[int, int]] = []
    if lang == "python":
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, _PY_BLOCKS) and node.col_offset > 0 and node.body:
                first = node.lineno - 1
                body = node.body[0].lineno - 1
                if body > first and lines[first].rstrip().endswith(":"):
                    end = min(body + rng.randint(1, 3), len(lines) - 1)
                    cands.append((first, end))
    else:
        for i, ln in enumerate(lines):
            if _BRACE_HEADER.match(ln) and i + 4 < len(lines):
                cands.append((i, i + 1 + rng.randint(1, 3)))
    rng.shuffle(cands)
    out: list[tuple[int, int]] = []
    for first, end in cands:
        if all(end <= a or first >= b for a, b in out) and "".join(lines[first:end]).strip():
            out.append((first, end))
        if len(out) >= n:
            break
    return out


_OPEN = "([{"
_CLOSE = ")]}"


def completions(truth: str, rng: random.Random, cuts: int) -> list[tuple[str, str]]:
    out = [("truth", truth)]
    ats = sorted({rng.randrange(1, len(truth)) for _ in range(cuts)})
    for at in ats:
        if truth[at - 1 : at + 1] == "\r\n":
            at -= 1
        c = truth[:at]
        if c.strip() and c != truth:
            out.append(("cut-tail", c))
    closers = [i for i, ch in enumerate(truth) if ch in _CLOSE]
    if closers:
        i = rng.choice(closers)
        out.append(("drop-closer", truth[:i] + truth[i + 1 :]))
    openers = [i for i, ch in enumerate(truth) if ch in _OPEN]
    if openers:
        i = rng.choice(openers)
        out.append(("double-opener", truth[: i + 1] + truth[i] + truth[i + 1 :]))
    return out


def baselines(
    lines: list[str], first: int, end: int, rng: random.Random
) -> list[tuple[str, str, str, str, str]]:
    """(kind, prefix, suffix, clean prefix, clean suffix): the text without the middle.

    The clean pair is the original around the same hole (labels are computed on it); the
    pair the gate sees may carry more damage above the cursor.
    """
    pre = "\n".join(lines[:first]) + "\n"
    suf = "\n".join(lines[end:])
    out = [("hole", pre, suf, pre, suf)]
    header = lines[first]
    ind = len(header) - len(header.lstrip())
    if len(header.rstrip()) - ind >= 2:
        k = ind + rng.randint(1, len(header.rstrip()) - ind - 1)
        out.append(("hole-half-line", pre + header[:k], suf, pre + header[:k], suf))
    above = [i for i in range(max(0, first - 4), first - 1) if lines[i].strip()]
    if above:
        i = rng.choice(above)
        ind_i = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        damaged = "\n".join([*lines[:i], ind_i + "foo(", *lines[i:first]]) + "\n"
        out.append(("hole+open-call", damaged, suf, pre, suf))
    above = [i for i in range(max(0, first - 3), first) if len(lines[i].strip()) >= 6]
    if above:
        i = rng.choice(above)
        ln = lines[i]
        s = len(ln) - len(ln.lstrip())
        half = ln[: s + (len(ln) - s) // 2]
        damaged = "\n".join([*lines[:i], half, *lines[i + 1 : first]]) + "\n"
        out.append(("hole+cut-above", damaged, suf, pre, suf))
    return out


# ---------------------------------------------------------------- build (labels)


def _build_file(job: tuple[str, str, str, int, int, str | None]) -> list[dict[str, Any]]:
    lang, name, text, per_file, cuts, pch = job
    config = CompilerConfig(pch_dir=Path(pch) if pch else None)
    rng = random.Random(hashlib.sha256(name.encode()).digest())
    checker = CHECKER[lang]
    if not _compilers.run_checker(checker, text, None, config).ok:
        return []
    lines = text.split("\n")
    out: list[dict[str, Any]] = []
    seen: dict[str, Any] = {}  # the same text gets the same answer: g++ is slow

    def check(t: str) -> Any:
        # (a deadline: javalang backtracks for minutes on some broken long files; a label
        # that times out leaves its case out)
        if t not in seen:
            seen[t] = _compilers.run_checker(checker, t, time.monotonic() + 20, config)
        return seen[t]

    for first, end in middles(lang, text, rng, per_file):
        truth = "\n".join(lines[first:end]) + "\n"
        comps = completions(truth, rng, cuts)
        for kind, pre, suf, cpre, csuf in baselines(lines, first, end, rng):
            if kind == "hole-half-line":
                typed = pre[pre.rfind("\n") + 1 :]
                comps_here = [(k, c[len(typed) :]) for k, c in comps if c.startswith(typed)]
                comps_here = [(k, c) for k, c in comps_here if c.strip()]
            else:
                comps_here = comps
            # broken at the cursor: the clean text without the middle fails the check
            if check(cpre + csuf).ok:
                continue
            for ckind, comp in comps_here:
                res = check(cpre + comp + csuf)
                if res.timed_out or res.failure:
                    continue
                out.append(
                    {
                        "lang": lang,
                        "file": name,
                        "split": split_of(name),
                        "line": first,
                        "baseline": kind,
                        "kind": ckind,
                        "prefix": pre,
                        "suffix": suf,
                        "completion": comp,
                        "ok": res.ok,
                        "multiline": "\n" in comp.rstrip("\n"),
                    }
                )
    return out


def build(args: argparse.Namespace) -> list[dict[str, Any]]:
    pch: str | None = None
    if "cpp" in args.langs:
        import platformdirs

        pch_dir = Path(platformdirs.user_cache_dir("synconfroute")) / "pch"
        if prepare_pch(CompilerConfig(pch_dir=pch_dir)) is not None:
            pch = str(pch_dir)
    jobs = []
    for lang, name, text in sources(args.cpp_files, args.java_max_lines, args.cpp_skip, args.fresh):
        if lang in args.langs:
            per = args.per_file if lang != "cpp" else 2
            jobs.append((lang, name, text, per, args.cuts, pch))
    cases: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for k, res in enumerate(pool.map(_build_file, jobs, chunksize=2), 1):
            cases.extend(res)
            if k % 50 == 0:
                print(
                    f"  built {k}/{len(jobs)} files ({time.perf_counter() - t0:.0f} s)",
                    file=sys.stderr,
                )
    return cases


# ---------------------------------------------------------------- evaluate


def _evaluate(job: tuple[list[dict[str, Any]], str, bool]) -> list[tuple[str, str]]:
    """Each case's verdict: "invalid" also for a valid one the names gate flags (`names`,
    as the server runs by default: the completion is escalated either way)."""
    group, mode, names = job
    out = []
    doc: SyntaxDocument | None = None
    key: tuple[str, str] | None = None
    for c in group:
        if key != (c["prefix"], c["suffix"]):
            key = (c["prefix"], c["suffix"])
            doc = SyntaxDocument(c["prefix"] + c["suffix"], c["lang"])
        assert doc is not None
        v = doc.check(
            c["completion"], len(c["prefix"].encode("utf-8")), mode=mode, budget_s=5, names=names
        )
        status = "invalid" if v.undefined else v.status
        out.append((status, f"{v.line}:{v.column} {v.message} {v.detail}"))
    return out


# g++ -fsyntax-only also checks names and types: complaints a syntax gate cannot make
_SEMANTIC = (
    "was not declared in this scope",
    "has not been declared",
    "no match for",
    "lvalue required",
    "wrong number of template arguments",
    "invalid operands",
    "cannot convert",
    "conflicting declaration",
    "redeclaration of",
)


def _around(f: dict[str, Any]) -> str:
    """A case's completion between \u2588 marks, with 3 lines above and 2 below."""
    above = "\n".join(f["prefix"].split("\n")[-3:])
    below = "\n".join(f["suffix"].split("\n")[:2])
    return above + "\u2588" + f["completion"] + "\u2588" + below


def explain_misses(
    cases: list[dict[str, Any]], fails: dict[str, list[dict[str, Any]]], show: int
) -> None:
    """Per language: the missed multi-line cut tails whose label is the compiler's complaint
    about names and types only (g++ -fsyntax-only checks them too; a syntax gate cannot),
    the catch rate of the rest (syntax errors), and `show` of the syntax misses."""
    import platformdirs

    config = CompilerConfig(pch_dir=Path(platformdirs.user_cache_dir("synconfroute")) / "pch")
    # the labels were made on the text without damage above: the `hole` case's prefix
    clean = {(c["file"], c["line"]): c["prefix"] for c in cases if c["baseline"] == "hole"}
    for lang in ("cpp",):
        missed = [
            f
            for key, fl in fails.items()
            if key.startswith(lang + "|") and "|cut-tail|broken" in key
            for f in fl
        ]
        names = 0
        syntax: list[tuple[dict[str, Any], str]] = []
        for f in missed:
            pre = f["prefix"]
            if f["baseline"] in ("hole+open-call", "hole+cut-above"):
                pre = clean.get((f["file"], f["line"]), pre)
            res = _compilers.run_checker(
                CHECKER[lang], pre + f["completion"] + f["suffix"], None, config
            )
            msgs = [d.message for d in res.diagnostics]
            if msgs and all(any(u in m for u in _SEMANTIC) for m in msgs):
                names += 1
            else:
                syntax.append((f, msgs[0] if msgs else "(no message)"))
        broken = sum(
            1
            for c in cases
            if c["lang"] == lang and c["kind"] == "cut-tail" and c["multiline"] and not c["ok"]
        )
        with_syntax = broken - names
        caught = with_syntax - len(syntax)
        print(
            f"  {lang}: of {len(missed)} missed multi-line cut tails, {names} are rejected by "
            f"{CHECKER[lang]} only for names or types (no syntax error); syntax errors "
            f"caught {caught}/{with_syntax} = {100 * caught / max(with_syntax, 1):.2f}%"
        )
        for f, msg in syntax[:show]:
            print(f"-- {f['file']}:{f['line']} {f['baseline']}: {msg}")
            print(_around(f))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--langs", default="python,java,cpp")
    ap.add_argument("--split", default="held", choices=("tune", "held", "all"))
    ap.add_argument("--per-file", type=int, default=8, help="middles per Python/Java file")
    ap.add_argument("--cpp-files", type=int, default=150, help="SAFIM C++ programs")
    ap.add_argument(
        "--cpp-skip", type=int, default=0, help="skip this many SAFIM C++ programs first"
    )
    ap.add_argument("--java-max-lines", type=int, default=700)
    ap.add_argument(
        "--fresh",
        type=int,
        nargs="?",
        const=1,
        default=0,
        choices=(0, 1, 2, 3, 4, 5, 6, 7),
        help="Python and Java files no rule was decided on (stdlib packages, set 1 or 2; "
        "sets 3 to 7: third-party packages in site-packages; "
        "gson's long files); for C++ pass --cpp-skip past the programs used so far",
    )
    ap.add_argument("--cuts", type=int, default=CUTS)
    ap.add_argument("--mode", default="tree-sitter")
    ap.add_argument(
        "--names",
        action="store_true",
        help="run the names gate after a valid verdict too, as the server does by default "
        "(routing.semantic = names): a completion it flags counts as rejected",
    )
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cache", default="/tmp/gate_broken_cases.jsonl.gz")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--show", type=int, default=0, help="print this many failures per kind")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--explain-misses",
        action="store_true",
        help="ask g++ why it rejects the C++ cut tails the gate passed: those it rejects only "
        "for names or types (a declaration cut off) are no syntax errors",
    )
    args = ap.parse_args(argv)
    args.langs = tuple(x for x in args.langs.split(",") if x)
    cache = Path(args.cache)
    if cache.exists() and not args.rebuild:
        with gzip.open(cache, "rt", encoding="utf-8") as fh:
            cases = [json.loads(line) for line in fh]
    else:
        cases = build(args)
        with gzip.open(cache, "wt", encoding="utf-8") as fh:
            for c in cases:
                fh.write(json.dumps(c) + "\n")
    cases = [c for c in cases if c["lang"] in args.langs]
    if args.split != "all":
        cases = [c for c in cases if c["split"] == args.split]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = collections.defaultdict(list)
    for c in cases:
        groups[(c["prefix"], c["suffix"])].append(c)
    glist = list(groups.values())
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(
            pool.map(_evaluate, [(g, args.mode, args.names) for g in glist], chunksize=16)
        )
    wall = time.perf_counter() - t0
    counts: collections.Counter[tuple[str, ...]] = collections.Counter()
    fails: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for g, res in zip(glist, results, strict=True):
        for c, (status, why) in zip(g, res, strict=True):
            kind = c["kind"] if c["kind"] != "cut-tail" or c["multiline"] else "cut-tail-1line"
            key = (c["lang"], c["baseline"], kind, "ok" if c["ok"] else "broken")
            counts[(*key, "n")] += 1
            counts[(*key, status)] += 1
            wrong = (status == "invalid") if c["ok"] else (status != "invalid")
            if wrong:
                fails["|".join(key)].append({**c, "why": why})
    if args.json:
        print(json.dumps({"|".join(k): v for k, v in sorted(counts.items())}, indent=1))
        return 0
    print(f"split {args.split}: {len(cases)} checks in {len(glist)} documents, {wall:.0f} s")
    print(
        f"{'lang':7} {'baseline':15} {'completion':14} {'correct':>8} {'rejected':>9} "
        f"{'broken':>7} {'caught':>7} {'rate':>8}"
    )
    tot: collections.Counter[tuple[str, str]] = collections.Counter()
    for lang in args.langs:
        for base in BASELINES:
            for kind in ("truth", "cut-tail", "cut-tail-1line", "drop-closer", "double-opener"):
                ok_n = counts[(lang, base, kind, "ok", "n")]
                ok_rej = counts[(lang, base, kind, "ok", "invalid")]
                br_n = counts[(lang, base, kind, "broken", "n")]
                br_c = counts[(lang, base, kind, "broken", "invalid")]
                if not ok_n and not br_n:
                    continue
                tot[(lang, "ok")] += ok_n
                tot[(lang, "rej")] += ok_rej
                tot[(lang, "br")] += br_n
                tot[(lang, "caught")] += br_c
                rate = f"{100 * br_c / br_n:7.2f}%" if br_n else "       -"
                print(
                    f"{lang:7} {base:15} {kind:14} {ok_n:8d} {ok_rej:9d} {br_n:7d} {br_c:7d} {rate}"
                )
        br = tot[(lang, "br")]
        if br or tot[(lang, "ok")]:
            rate = f"{100 * tot[(lang, 'caught')] / br:7.2f}%" if br else "-"
            print(
                f"{lang:7} {'ALL':15} {'':14} {tot[(lang, 'ok')]:8d} {tot[(lang, 'rej')]:9d} "
                f"{br:7d} {tot[(lang, 'caught')]:7d} {rate}"
            )
    # the must-show figure: multi-line cut tails in files broken at the cursor
    n = sum(v for k, v in counts.items() if k[2] == "cut-tail" and k[3] == "broken" and k[4] == "n")
    c = sum(
        v
        for k, v in counts.items()
        if k[2] == "cut-tail" and k[3] == "broken" and k[4] == "invalid"
    )
    ok_n = sum(v for k, v in counts.items() if k[3] == "ok" and k[4] == "n")
    ok_r = sum(v for k, v in counts.items() if k[3] == "ok" and k[4] == "invalid")
    print(
        f"\nmulti-line cut tails caught: {c}/{n} = {100 * c / max(n, 1):.2f}%; "
        f"correct completions rejected: {ok_r}/{ok_n}"
    )
    for lang in args.langs:

        def count(kind: str, ok: str, status: str, lang: str = lang) -> int:
            return sum(
                v
                for k, v in counts.items()
                if k[0] == lang and (not kind or k[2] == kind) and k[3] == ok and k[4] == status
            )

        n, c = count("cut-tail", "broken", "n"), count("cut-tail", "broken", "invalid")
        print(
            f"  {lang}: multi-line cut tails caught {c}/{n} = {100 * c / max(n, 1):.2f}%; "
            f"correct rejected {count('', 'ok', 'invalid')}/{count('', 'ok', 'n')}"
        )
    if args.explain_misses:
        explain_misses(cases, fails, args.show)
    if args.show:
        for key, fl in sorted(fails.items()):
            print(f"\n== {key}: {len(fl)}")
            for f in fl[: args.show]:
                print(f"-- {f['file']}:{f['line']} {f['why']}")
                print(_around(f))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
