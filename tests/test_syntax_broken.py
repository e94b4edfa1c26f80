"""The gate in Python files already broken at or near the cursor (issue 22).

A hole under a block header leaves the suffix's deeper indentation as an error, an unclosed
`foo(` a few lines up or a half-typed line breaks the file away from the completion: the
gate must still judge the completion itself (scripts/gate_broken.py measures it on real
files).
"""

from __future__ import annotations

import ast

import pytest

from synconfroute.server.syntax import SyntaxDocument, _pywindow, check_completion

# HumanEval/1 with its multi-line middle (a `for` header and an `if` header) removed
PREFIX = """from typing import List


def separate_paren_groups(paren_string: str) -> List[str]:
    result = []
    current_string = []
    current_depth = 0

"""
SUFFIX = """            current_depth += 1
            current_string.append(c)
        elif c == ')':
            current_depth -= 1
            current_string.append(c)

            if current_depth == 0:
                result.append(''.join(current_string))
                current_string.clear()

    return result
"""
TRUTH = "    for c in paren_string:\n        if c == '(':\n"
OPEN_CALL = PREFIX.replace("    current_string = []\n", "    current_string = []\n    foo(\n")
HALF_LINE = PREFIX.replace("    current_string = []\n", "    current_string = \n")


def status(prefix: str, completion: str, suffix: str = SUFFIX) -> str:
    # a generous budget: the machine running the tests may be busy
    return check_completion(prefix, completion, suffix, "python", budget_s=5).status


def judged(
    prefix: str, completion: str, suffix: str, *, valid: bool, labelled: str | None = None
) -> None:
    """`ast.parse` labels the completed file valid or not (`labelled`: the file's start
    without the break the test made in `prefix`), and the gate, on `prefix`, says the same."""
    text = (prefix if labelled is None else labelled) + completion + suffix
    if valid:
        ast.parse(text)
    else:
        with pytest.raises(SyntaxError):
            ast.parse(text)
    assert status(prefix, completion, suffix) == ("valid" if valid else "invalid")


def test_the_hole_is_broken_and_the_truth_mends_it() -> None:
    with pytest.raises(SyntaxError):
        ast.parse(PREFIX + SUFFIX)
    ast.parse(PREFIX + TRUTH + SUFFIX)
    assert status(PREFIX, TRUTH) == "valid"


@pytest.mark.parametrize(
    "cut",
    [
        "    for c in paren_string:\n        if c ==",  # the example
        "    f",  # glued to the next line
        "    for c in paren_string:\n",  # the body's indentation matches no level
        "    for c in paren_string:\n        if c == '(",  # a string left open
        "    for c in paren_str",
    ],
)
@pytest.mark.parametrize("prefix", [PREFIX, OPEN_CALL, HALF_LINE], ids=["hole", "open", "half"])
def test_cut_tails_in_a_file_broken_at_the_cursor_are_caught(prefix: str, cut: str) -> None:
    with pytest.raises(SyntaxError):
        ast.parse(PREFIX + cut + SUFFIX)
    assert status(prefix, cut) == "invalid"


@pytest.mark.parametrize("prefix", [OPEN_CALL, HALF_LINE], ids=["open", "half"])
def test_a_correct_completion_under_user_breakage_passes(prefix: str) -> None:
    assert status(prefix, TRUTH) == "valid"


def test_unclosed_call_three_lines_above_a_correct_line() -> None:
    """The unclosed-paren false reject: a correct statement three lines under `foo(`."""
    prefix = "def f(xs):\n    total = 0\n    foo(\n    for x in xs:\n        total += x\n"
    suffix = "    return total\n"
    assert status(prefix, "    total *= 2\n", suffix) == "valid"
    assert status(prefix, "    total *=\n", suffix) == "invalid"


def test_a_completion_that_dedents_wrongly_is_caught_below_the_zone() -> None:
    # the cut leaves `try:` with its body at 17 columns; the lines after the next one
    # come back to 16: no outer level matches
    prefix = "def f(p):\n    if p:\n        x = 1\n"
    suffix = (
        "            a = open(p)\n            b = a.read()\n        except OSError:\n"
        "            pass\n    return 0\n"
    )
    assert status(prefix, "        try:\n     ", suffix) == "invalid"
    assert status(prefix, "        try:\n", suffix) == "valid"


def test_a_continuation_line_is_read_both_ways() -> None:
    # the line above opens a bracket: the cursor's line may continue it
    prefix = "def f(a):\n    x = 1\n    y = g(a,\n"
    assert status(prefix, "          a)\n", "    return y\n") == "valid"


def test_clean_files_keep_the_differential() -> None:
    """No error near the cursor: the window judge is not asked (same verdicts as before)."""
    text = "def f(a):\n    x = 1\n\n    return x\n"
    doc = SyntaxDocument(text, "python")
    at = text.index("\n\n") + 1
    assert doc.check("    y = x + 1\n", at, budget_s=5).status == "valid"
    assert doc.check("    y = (x + 1\n", at, budget_s=5).status == "invalid"


def test_window_judge_reports_where() -> None:
    data = (PREFIX + "    for c in paren_string:\n        if c ==" + SUFFIX).encode()
    start = len(PREFIX)
    v = _pywindow.judge(data, start, start + len("    for c in paren_string:\n        if c =="))
    assert v.valid is False
    line_start = data.rfind(b"\n", 0, v.where) + 1
    assert data[line_start:].startswith(b"        if c ==")  # the glued line


def test_a_string_over_several_lines_above_the_cursor() -> None:
    """The line above closes a string whose text sits at column 0: its statement starts
    where the string opened, not at that column."""
    prefix = 'def main():\n    USAGE = """usage:\nrun it\n"""\n\n'
    suffix = "        print(USAGE)\n\n    usage(0)\n"
    assert status(prefix, "    def usage(code):\n", suffix) == "valid"
    assert status(prefix, "    def usa", suffix) == "invalid"


def test_a_try_whose_handler_is_further_down() -> None:
    prefix = "def f(p):\n    x = 1\n"
    suffix = (
        "        raise ValueError(p)\n    y = 2\n    try:\n        z = 3\n"
        + "        z += 1\n" * 45
        + "    except OSError:\n        pass\n"
    )
    assert status(prefix, "    if not p:\n", suffix) == "valid"


def test_a_body_less_header_of_the_users_below_is_not_the_completions_fault() -> None:
    """Neovim's e2e: completing `def add`'s body while `def sub(a, b):` below has none yet
    (the text already broken there) was rejected: "expected an indented block"."""
    from synconfroute.server.syntax import SyntaxDocument

    doc = SyntaxDocument("def add(a, b):\n    \n\n\ndef sub(a, b):\n    \n", "python")
    assert doc.check("total = a + b\n    return total", at=(1, 4)).status == "valid"
    assert doc.check("if x:", at=(1, 4)).status == "invalid"  # its own header, no body
    assert doc.check("total = (a", at=(1, 4)).status == "invalid"


def test_file_cut_short_inside_the_statement_leaves_it_to_the_differential() -> None:
    # HumanEval/19 with its suffix truncated: the dict the completion's item belongs to is
    # never closed. The window that continues the `{` runs into the end of the file, the
    # stub reading reads the items as annotations: no evidence either way (was: invalid).
    pre = (
        "from typing import List\n\n\ndef sort_numbers(numbers: str) -> str:\n"
        "    value_map = {\n        'zero': 0,\n        'one': 1,\n"
    )
    suf = "        'three': 3,\n        'four': 4,\n"
    assert check_completion(pre, "        'two': 2,\n", suf, "python").status == "valid"
    # broken items are still caught there
    assert check_completion(pre, "        'two': 2\n", suf, "python").status == "invalid"
    assert check_completion(pre, "        'two': (2,\n", suf, "python").status == "invalid"
    assert ast.parse(pre + "        'two': 2,\n" + suf + "    }\n") is not None


def test_a_finally_the_completion_dedents_to_belongs_to_the_try_above() -> None:
    # stdlib wave.py with `foo(` left open above: the completion runs out of the `if` into
    # the `try:`'s `finally:`. The window's stub for that level was an `if 1:`, which made
    # the handler a syntax error (was: invalid). Under an `if` it still is one.
    pre = (
        "class W:\n    def close(self):\n        try:\n            if self._file:\n"
        "                foo(\n                self._ensure_header_written(0)\n"
        "                "
    )
    mid = (
        "if self._datalength != self._datawritten:\n                    self._patchheader()\n"
        "                self._file.flush()\n        finally:\n            self._file = None"
    )
    suf = "\n            file = self._i_opened_the_file\n"
    assert check_completion(pre, mid, suf, "python").status == "valid"
    assert (
        check_completion(pre, mid.replace("finally:", "finaly:"), suf, "python").status == "invalid"
    )
    under_if = pre.replace("        try:\n", "        if x:\n")
    assert check_completion(under_if, mid, suf, "python").status == "invalid"


def test_a_line_cut_in_the_middle_of_a_statement_above_stands_for_all_of_it() -> None:
    # stdlib warnings.py with the line above cut mid-name: `% (frame.filenam` continues
    # `s += ('...'` two lines up. Standing for the cut line alone (at its deeper
    # indentation) made every `try:` there an indentation error (was: invalid).
    pre = (
        "def f(tb, s):\n    for frame in tb:\n"
        "        s += ('  File \"%s\", lineno %s\\n'\n"
        "              % (frame.filenam\n\n        "
    )
    mid = "try:\n            line = get(frame)\n        except Exception:\n            line = None"
    suf = "\n        if line:\n            s += line\n    return s\n"
    assert check_completion(pre, mid, suf, "python").status == "valid"
    assert (
        check_completion(pre, mid.replace("line = None", "line = (None"), suf, "python").status
        == "invalid"
    )
    assert (
        check_completion(pre, "try:\n            line = get(frame", suf, "python").status
        == "invalid"
    )


def test_a_call_over_several_lines_cut_above_the_hole() -> None:
    # The user's call over several lines, its argument lines deeper than the statement,
    # was cut in half on its last line; the hole below held an `if` block. Before: the
    # window stood for the cut line at its own depth, and the truth's line 8 columns in
    # "did not match any outer indentation level" (stdlib's importlib/abc.py).
    prefix = (
        "class Finder:\n"
        "    def find_loader(self, fullname):\n"
        '        warnings.warn("find_loader() is deprecated",\n'
        "                      DeprecationWarning,\n"
        "                      stackl\n"
    )
    truth = "        if not hasattr(self, 'find_spec'):\n            return None, []\n"
    suffix = "        found = self.find_spec(fullname)\n        return found.loader, []\n"
    clean = prefix.replace("stackl\n", "stacklevel=2)\n")
    judged(prefix, truth, suffix, valid=True, labelled=clean)
    # and a cut tail there is still caught
    cut = "        if not hasattr(self, 'find_"
    judged(prefix, cut, suffix, valid=False, labelled=clean)


def test_a_statement_under_a_call_cut_above_that_glues_into_valid_code() -> None:
    # stdlib asyncio/windows_events.py: the user's line above is cut inside a call
    # (`ov.ConnectEx(conn.`), and with the hole below it the text still parses: the cut
    # call swallows the argument line after the hole. The file does not look broken near
    # the cursor, so the differential blamed the completion's `def` (was: invalid). A
    # statement-only keyword no deeper than the open call's line is not its argument.
    prefix = (
        "class P:\n"
        "    def connect(self, conn, address):\n"
        "        ov = _overlapped.Overlapped(NULL)\n"
        "        ov.ConnectEx(conn.\n"
        "\n"
    )
    truth = (
        "        def finish_connect(trans, key, ov):\n"
        "            ov.getresult()\n"
        "            conn.setsockopt(socket.SOL_SOCKET,\n"
    )
    suffix = (
        "                            _overlapped.SO_UPDATE_CONNECT_CONTEXT, 0)\n"
        "            return conn\n"
        "\n"
        "        return self._register(ov, conn, finish_connect)\n"
    )
    # the cut call and the argument line after the hole parse as one statement
    ast.parse(prefix + suffix.split("\n")[0] + "\n")
    clean = prefix.replace("conn.\n", "conn.fileno(), address)\n")
    judged(prefix, truth, suffix, valid=True, labelled=clean)
    # a cut tail there is still caught, and so is a statement inside a call the user is
    # still writing (its argument lines deeper than the call's line)
    cut = "        def finish_connect(trans, key"
    judged(prefix, cut, suffix, valid=False, labelled=clean)
    args = prefix.replace("conn.\n\n", "conn,\n")
    deeper = "            return conn\n"
    assert status(args, deeper, "            address)\n") == "invalid"


def test_a_handler_of_the_try_on_the_cursors_line() -> None:
    # stdlib multiprocessing/util.py: the user typed `try`; the completion finishes the
    # header, its body and its handler. The handler's `try:` is the cursor's line, not one
    # above the window, whose stub must stay an `if 1:` (was: invalid, "expected 'except'
    # or 'finally' block").
    prefix = (
        "def _flush_std_streams():\n"
        "    try:\n        sys.stdout.flush()\n"
        "    except (AttributeError, ValueError):\n        pass\n"
        "    try"
    )
    truth = (
        ":\n        sys.stderr.flush()\n    except (AttributeError, ValueError):\n        pass\n"
    )
    suffix = "\n#\n# Start a program\n#\n\ndef spawnv_passfds(path, args, passfds):\n    pass\n"
    ast.parse(prefix + truth + suffix)
    broken = prefix.replace("    try:\n", "    try:\n        foo(\n", 1)
    assert status(broken, truth, suffix) == "valid"
    # without its handler the `try:` is still caught
    assert status(broken, ":\n        sys.stderr.flush()\n", suffix) == "invalid"


def test_a_statement_under_a_docstring_whose_closing_quotes_were_cut() -> None:
    # stdlib xml/sax/handler.py: the user's line above was cut inside a docstring, so the
    # string runs on through the cursor to the next docstring's quotes. The completion (a
    # method with its own docstring) closed the user's string and was blamed (was: invalid);
    # its cut tails were string content to the differential (was: valid).
    prefix = (
        "class ContentHandler:\n"
        "    def startElement(self, name, attrs):\n"
        '        """Signals the start of an element in non-namespace mode.\n'
        "\n"
        "        The name parameter contains the raw XML 1.0 name of\n"
        "        the ele\n"
        "\n"
    )
    truth = (
        "    def endElement(self, name):\n"
        '        """Signals the end of an element in non-namespace mode.\n'
        "\n"
        "        The name parameter contains the name of the element type, just\n"
    )
    suffix = (
        '        as with the startElement event."""\n'
        "\n"
        "    def characters(self, content):\n"
        "        pass\n"
    )
    clean = prefix.replace("the ele\n", 'the element type."""\n')
    judged(prefix, truth, suffix, valid=True, labelled=clean)
    for cut in ("    def end", "    def endElement(self, name):\n        "):
        judged(prefix, cut, suffix, valid=False, labelled=clean)
    # inside a docstring the user is writing, prose stays string content, even where a
    # line of it starts with a keyword (or is shallower than the quotes)
    writing = clean.replace('type."""', "type,")
    assert status(writing, "        with the given name.\n", suffix) == "valid"
    assert status(writing, "    def is a word here\n", suffix) == "valid"


def test_a_body_under_a_signature_cut_in_its_parameters() -> None:
    # h11/_util.py: the user's `def` line was cut inside its parameter list, comments
    # follow the hole, so the file breaks only far below the cursor. The body's `if`
    # header cannot be a parameter (was: invalid, "unexpected 'if'").
    prefix = "class ProtocolError(Exception):\n    def __init__(self, msg: str, erro\n"
    truth = (
        "        if type(self) is ProtocolError:\n"
        '            raise TypeError("tried to directly instantiate ProtocolError")\n'
        "        Exception.__init__(self, msg)\n"
    )
    suffix = (
        "\n\n# Strategy: a comment\n# over several lines\n#\n"
        "class Local(ProtocolError):\n    pass\n"
    )
    clean = prefix.replace("erro\n", "error_status_hint: int = 400) -> None:\n")
    judged(prefix, truth, suffix, valid=True, labelled=clean)
    cut = '        if type(self) is ProtocolError:\n            raise TypeError("tried'
    judged(prefix, cut, suffix, valid=False, labelled=clean)


def test_the_window_stands_for_match_and_case_with_their_own_stubs() -> None:
    # anyio/_lazyimport.py: the window grows over the user's next `case` clause; with an
    # `if 1:` for each enclosing header that `case` was a syntax error in the user's lines
    # (was: invalid). A header without its colon there is still caught.
    prefix = (
        "def exports(tree):\n"
        "    out = {}\n"
        "    for stmt in tree.body:\n"
        "        match stmt:\n"
        "            case ast.ImportFrom():\n"
        "                foo(\n"
        "                for alias in stmt.names:\n"
        "                    if alias"
    )
    truth = '.name == "*":\n                        continue\n'
    suffix = (
        "                    out[alias.name] = alias\n"
        "            case ast.Expr() if isinstance(stmt.value, ast.Call):\n"
        "                pass\n"
        "    return out\n"
    )
    judged(prefix, truth, suffix, valid=True, labelled=prefix.replace("                foo(\n", ""))
    bare = '.name == "*"\n                        continue\n'  # the header's ':' dropped
    judged(prefix, bare, suffix, valid=False, labelled=prefix.replace("                foo(\n", ""))


def test_a_docstring_cut_short_that_swallows_the_code_below() -> None:
    # platformdirs/_xdg.py, the user half-way through a method's name: a cut inside the
    # docstring leaves its quotes open; every docstring below then pairs its quotes the
    # wrong way round, and Python reports only an unterminated string that moves down as
    # the window grows (was: valid, "in the lines after it").
    prefix = (
        "class Xdg:\n"
        "    @property\n"
        "    def user_videos_dir(self) -> str:\n"
        '        """Videos directory tied to the user."""\n'
        '        return self._media("XDG_VIDEOS_DIR")\n'
        "\n"
        "    @property\n"
        "    def user_music_dir(sel"
    )
    truth = (
        'f) -> str:\n        """Music directory tied to the user."""\n'
        '        return self._media("XDG_MUSIC_DIR")\n'
    )
    # more methods below than the window grows over (their quotes keep the error moving)
    suffix = "".join(
        "\n    @property\n"
        f"    def user_{name}_dir(self) -> str:\n"
        f'        """{name.title()} directory tied to the user."""\n'
        f'        return self._media("XDG_{name.upper()}_DIR")\n'
        for name in (
            "desktop",
            "projects",
            "pictures",
            "documents",
            "downloads",
            "templates",
            "public",
            "state",
            "cache",
            "config",
            "data",
            "runtime",
        )
    )
    judged(prefix, truth, suffix, valid=True)
    cut = 'f) -> str:\n        """Music directory tied to the user, from'
    judged(prefix, cut, suffix, valid=False)
    # a docstring the user's lines go on with (prose, then its quotes) is no such cut
    prose = '        more about it.\n        """\n        return 1\n'
    ast.parse(prefix + 'f) -> str:\n        """Music, from\n' + prose)
    assert status(prefix, 'f) -> str:\n        """Music, from\n', prose + suffix) == "valid"


def test_triple_quotes_inside_a_one_line_string_open_nothing() -> None:
    # stdlib tokenize.py: `'"""'` holds three quotes that open no string (was: invalid
    # once the count of quotes ignored the string around them)
    prefix = "triple = set()\nfor t in prefixes():\n    foo(\n"
    truth = "    for u in (t + '\"\"\"', t + \"'''\"):\n        triple.add(u)\n"
    suffix = "del t, u\n\n\ndef f():\n    pass\n"
    judged(prefix, truth, suffix, valid=True, labelled=prefix.replace("    foo(\n", ""))


def test_a_body_under_a_header_keyword_cut_short() -> None:
    # platformdirs/testing.py: the user's `finally:` above was cut to `fina`, a name that
    # parses as a statement, so the file does not look broken; the body the completion
    # puts under it was an "unexpected indent" (was: invalid). Under a whole statement the
    # same indentation still is one.
    prefix = "def isolated(cls):\n    try:\n        yield\n    fina\n"
    truth = "        with _LOCK:\n            scope.close(cls)\n"
    suffix = "\n\nclass _Isolation:\n    pass\n"
    judged(prefix, truth, suffix, valid=True, labelled=prefix.replace("fina", "finally:"))
    cut = "        with _LOCK:\n            scope.close(cl"
    judged(prefix, cut, suffix, valid=False, labelled=prefix.replace("fina", "finally:"))
    assert status(prefix.replace("    fina\n", "    final = 1\n"), truth, suffix) == "invalid"


def test_match_as_a_name_is_no_header() -> None:
    # jinja2/utils.py: the user's line above, `match = re.match(r"^(`, was cut inside its
    # call; `match` there is a name, not a `match` statement, so the window's stub for it
    # must be a statement, not a header whose body the completion's `if` would have to be
    # (was: invalid, "expected an indented block")
    prefix = 'def urlize(middle):\n    for x in y:\n        match = re.match(r"^(\n\n'
    truth = "        if match:\n            head = match.group()\n"
    suffix = "            middle = middle[match.end() :]\n\n    return middle\n"
    clean = prefix.replace('r"^(\n', 'r"^(a)", middle)\n')
    judged(prefix, truth, suffix, valid=True, labelled=clean)
    assert status(prefix, "        if match:\n            head = match.gr(", suffix) == "invalid"


def test_a_method_after_a_method_longer_than_the_lines_read_up() -> None:
    # fastapi/applications.py: `__init__`'s signature and docstrings run for ~900 lines,
    # so the window's search for the enclosing headers (400 lines up) stopped inside it
    # and one stub at column 0 stood for the class and the method; the new method at
    # column 4 then "did not match any outer indentation level" (was: invalid).
    params = "".join(
        f"        p{i}: Annotated[\n"
        "            int,\n"
        '            Doc("""\n'
        f"            Doc of parameter {i}, read more in the docs.\n"
        '            """),\n'
        "        ] = 0,\n"
        for i in range(120)
    )
    prefix = (
        "class App:\n"
        "    def __init__(\n"
        "        self,\n" + params + "    ) -> None:\n"
        "        self.setup()\n"
        "\n"
        "    def build"
    )
    truth = "_stack(self) -> list:\n        # a comment on why\n        debug = self.debug\n"
    suffix = "        handler = None\n        return [debug, handler]\n"
    assert prefix.count("\n") > 480
    judged(prefix, truth, suffix, valid=True)
    assert (
        status(prefix, "_stack(self) -> list:\n        debug = (self.debug\n", suffix) == "invalid"
    )


def test_a_method_under_a_string_left_open_to_the_end_of_the_file() -> None:
    # pip/_internal/commands/check.py: the user's `usage = """` line was cut before its
    # closing quotes and no other triple quote follows, so the string runs on to the end
    # of the file. The window stood for the string's prose line as code, and the new method
    # under it "unexpected indent" (was: invalid); its cut tails stay caught.
    prefix = (
        "class CheckCommand(Command):\n"
        "    ignore_require_venv = True\n"
        '    usage = """\n'
        "      %prog [op\n"
        "\n"
    )
    truth = (
        "    def run(self, options, args):\n"
        "        package_set = create_package_set()\n"
        "        missing, conflicting = check_package_set(package_set)\n"
    )
    suffix = "        if missing:\n            return 1\n        return 0\n"
    clean = prefix.replace("[op\n", '[options]"""\n')
    judged(prefix, truth, suffix, valid=True, labelled=clean)
    for cut in ("    def run(self, opt", truth[:-30]):
        judged(prefix, cut, suffix, valid=False, labelled=clean)


def test_a_template_string_of_the_users_longer_than_the_window_below() -> None:
    # setuptools/command/editable_wheel.py: the next line of code after the completion
    # opens a string of 50 lines (a source template); the window grew 40 lines and still
    # saw it unterminated, on the zone's line (was: invalid). A completion that leaves a
    # docstring's prose as code before such a string is still caught.
    prefix = "class Wheel:\n    def _get_root(self"
    truth = '):\n        """Where the modules are loaded from."""\n        return self.root\n'
    template = "".join(f"line {i} of the template\n" for i in range(50))
    suffix = '\n\n_TEMPLATE = """\\\n' + template + '"""\n'
    judged(prefix, truth, suffix, valid=True)
    assert status(prefix, '):\n        """Where the modules', suffix) == "invalid"
    prose = "):\n        Where the modules are loaded from.\n"
    assert status(prefix, prose, '        """\n' + suffix) == "invalid"


def test_a_try_cut_before_its_handler_in_a_whole_file() -> None:
    # dateutil/_tzdata_impl.py: the file is whole around the cursor, and the cut leaves a
    # `try:` whose handler was in the rest of the completion. tree-sitter passes it; Python
    # reports it only at the next `def`, far from the completion (was: valid).
    prefix = (
        "def _open_binary(package, resource, key):\n"
        "    if not resource:\n"
        "        raise TZFileNotFound(key)\n"
        "\n"
    )
    truth = (
        "    try:\n"
        "        return resources.files(package).joinpath(resource).open('rb')\n"
        "    except (ImportError, FileNotFoundError):\n"
        "        raise TZFileNotFound(key) from None\n"
    )
    suffix = "\n\ndef _load_keys():\n    with _open_text('tzdata') as f:\n        return f.read()\n"
    judged(prefix, truth, suffix, valid=True)
    for cut in ("    try:\n        r", "    try:\n        return resources.files(package)\n"):
        judged(prefix, cut, suffix, valid=False)


def test_a_cut_inside_the_next_lines_indentation_in_a_whole_file() -> None:
    # dateutil/relativedelta.py: the cut ends after a newline and one space, which the
    # suffix's first line gets too: it then matches no indentation level (Python: far
    # below; tree-sitter: no error at all). The completion whole passes (was: valid).
    prefix = (
        "class Delta:\n"
        "    def __abs__(self):\n"
        "        return self.__class__(years=abs(self.years),\n"
        "                              months=abs(self.months))\n"
        "\n"
    )
    truth = "    def __neg__(self):\n        return self.__class__(years=-self.years,\n"
    fields = ("months", "days", "hours", "minutes", "seconds", "weekday")
    suffix = (
        "".join(f"                              {f}=-self.{f},\n" for f in fields)
        + "                              microseconds=-self.microseconds)\n"
        + "\n    def __bool__(self):\n        return True\n"
    )
    judged(prefix, truth, suffix, valid=True)
    for cut in ("    def __neg__(self):\n ", "    def __neg__(self):\n        "):
        judged(prefix, cut, suffix, valid=False)


def test_a_try_without_its_handler_above_a_docstring_the_window_reaches() -> None:
    # packaging/_elffile.py: in a file broken at the cursor, a `try:` left without its
    # handler. The window grew to find the handler further down, and ended inside a long
    # docstring, and Python's tokenizer reported only that string (was: valid,
    # "in the lines after it"). The window up to the string shows the `try:`'s error.
    prefix = "class ELFFile:\n    def __init__(self, f):\n        self._f = f\n\n        try"
    truth = (
        ":\n"
        "            ident = self._read('16B')\n"
        "        except struct.error as e:\n"
        "            raise ELFInvalid('unable to parse') from e\n"
    )
    body = "".join(f"        self.field{i} = ident[{i}]\n" for i in range(25))
    prose = "".join(f"        Line {i} of a long docstring.\n" for i in range(30))
    suffix = (
        "        magic = bytes(ident[:4])\n" + body + "\n"
        "    def _read(self, fmt):\n"
        '        """Read a struct of the given format.\n' + prose + '        """\n'
        "        return struct.unpack(fmt, self._f.read(struct.calcsize(fmt)))\n"
    )
    judged(prefix, truth, suffix, valid=True)
    judged(prefix, ":\n        ", suffix, valid=False)
    judged(prefix, ":\n            ident = self._read('16B')\n", suffix, valid=False)
