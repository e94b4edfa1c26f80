"""The FIM template registry: exact prompts, stop lists and detection traps."""

from __future__ import annotations

import pytest

from synconfroute.clients import templates
from synconfroute.clients.templates import detect, get

PRE, SUF = "def f(x):\n    return ", "\n\nprint(f(2))\n"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("qwen2.5-coder", f"<|fim_prefix|>{PRE}<|fim_suffix|>{SUF}<|fim_middle|>"),
        ("starcoder", f"<fim_prefix>{PRE}<fim_suffix>{SUF}<fim_middle>"),
        ("starcoder2", f"<fim_prefix>{PRE}<fim_suffix>{SUF}<fim_middle>"),
        ("deepseek-coder", f"<｜fim▁begin｜>{PRE}<｜fim▁hole｜>{SUF}<｜fim▁end｜>"),
        ("codellama", f"<PRE> {PRE} <SUF>{SUF} <MID>"),
        ("codestral", f"[SUFFIX]{SUF}[PREFIX]{PRE}"),
        ("codegemma", f"<|fim_prefix|>{PRE}<|fim_suffix|>{SUF}<|fim_middle|>"),
    ],
)
def test_render_is_pinned(name: str, expected: str) -> None:
    assert get(name).render(PRE, SUF) == expected


def test_deepseek_uses_full_width_bar_and_lower_block() -> None:
    t = get("deepseek-coder")
    assert "\uff5c" in t.prefix_token and "\u2581" in t.prefix_token
    assert "|" not in t.prefix_token  # an ASCII bar would be plain text to the model


def test_qwen_repo_level_prompt() -> None:
    prompt = templates.QWEN_CODER.render(
        "a = ", "\n", repo="acme/app", path="src/main.py", files=[("src/util.py", "X = 1\n")]
    )
    assert prompt == (
        "<|repo_name|>acme/app\n"
        "<|file_sep|>src/util.py\nX = 1\n"
        "<|file_sep|>src/main.py\n<|fim_prefix|>a = <|fim_suffix|>\n<|fim_middle|>"
    )


def test_repo_level_ignored_by_families_without_it() -> None:
    assert (
        templates.STARCODER.render("a", "b", repo="r") == "<fim_prefix>a<fim_suffix>b<fim_middle>"
    )


CTX = [("pkg/util.py", "def helper(x):\n    return x\n"), ("pkg/b.py", "B = 1")]


def test_qwen_repo_level_with_context_files() -> None:
    # Qwen2.5-Coder's README: repo name then newline; each file's path, newline, code.
    assert templates.QWEN_CODER.render("y = ", "\n", repo="app", path="main.py", files=CTX) == (
        "<|repo_name|>app\n"
        "<|file_sep|>pkg/util.py\ndef helper(x):\n    return x\n"
        "<|file_sep|>pkg/b.py\nB = 1\n"
        "<|file_sep|>main.py\n<|fim_prefix|>y = <|fim_suffix|>\n<|fim_middle|>"
    )


def test_starcoder2_repo_level_with_context_files() -> None:
    # StarCoder2 paper, section 5: no newline after the repo name; the FIM file's path
    # follows <fim_prefix>.
    assert templates.STARCODER2.render("y = ", "\n", repo="app", path="main.py", files=CTX) == (
        "<repo_name>app"
        "<file_sep>pkg/util.py\ndef helper(x):\n    return x\n"
        "<file_sep>pkg/b.py\nB = 1\n"
        "<file_sep><fim_prefix>main.py\ny = <fim_suffix>\n<fim_middle>"
    )


def test_starcoder1_gets_comment_headers_not_repo_tokens() -> None:
    assert templates.STARCODER.render("y = ", "\n", repo="app", path="main.py", files=CTX) == (
        "<fim_prefix># Path: pkg/util.py\ndef helper(x):\n    return x\n\n"
        "# Path: pkg/b.py\nB = 1\n\n"
        "# Path: main.py\ny = <fim_suffix>\n<fim_middle>"
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("deepseek-coder", "<｜fim▁begin｜>{pre}<｜fim▁hole｜>S<｜fim▁end｜>"),
        ("codellama", "<PRE> {pre} <SUF>S <MID>"),
        ("codestral", "[SUFFIX]S[PREFIX]{pre}"),
        ("codegemma", "<|fim_prefix|>{pre}<|fim_suffix|>S<|fim_middle|>"),
    ],
)
def test_other_families_put_context_in_commented_headers(name: str, expected: str) -> None:
    files = [("src/Util.java", "static int helper(int x) { return x; }")]
    pre = (
        "// Path: src/Util.java\nstatic int helper(int x) { return x; }\n\n"
        "// Path: src/Main.java\nint y = "
    )
    got = get(name).render("int y = ", "S", repo="app", path="src/Main.java", files=files)
    assert got == expected.format(pre=pre)


def test_prefix_only_context_and_comment_syntax() -> None:
    assert templates.commented("x", [], "a.py") == "x"  # no files: the prefix unchanged
    assert templates.commented("x = ", [("u.py", "U = 1\n")], "a.py") == (
        "# Path: u.py\nU = 1\n\n# Path: a.py\nx = "
    )
    assert templates.comment_marker("main.go") == "//"
    assert templates.comment_marker("q.sql") == "--"


@pytest.mark.parametrize(
    ("name", "stops"),
    [
        (
            "qwen2.5-coder",
            {
                "<|endoftext|>",
                "<|fim_prefix|>",
                "<|fim_suffix|>",
                "<|fim_middle|>",
                "<|fim_pad|>",
                "<|repo_name|>",
                "<|file_sep|>",
                "<|im_start|>",
                "<|im_end|>",
            },
        ),
        (
            "starcoder",
            {
                "<fim_prefix>",
                "<fim_suffix>",
                "<fim_middle>",
                "<fim_pad>",
                "<file_sep>",
                "<|endoftext|>",
            },
        ),
        (
            "deepseek-coder",
            {"<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>", "<｜end▁of▁sentence｜>"},
        ),
        (
            "starcoder2",
            {
                "<fim_prefix>",
                "<fim_suffix>",
                "<fim_middle>",
                "<fim_pad>",
                "<file_sep>",
                "<repo_name>",
                "<|endoftext|>",
            },
        ),
        ("codellama", {"<EOT>", "<PRE>", "<SUF>", "<MID>"}),
        ("codestral", {"[PREFIX]", "[SUFFIX]", "</s>"}),
        ("codegemma", {"<|file_separator|>", "<end_of_turn>", "<eos>"}),
    ],
)
def test_stop_lists_are_pinned(name: str, stops: set[str]) -> None:
    assert set(get(name).stop) == stops


@pytest.mark.parametrize("template", list(templates.TEMPLATES.values()), ids=lambda t: t.name)
def test_no_stop_string_glues_two_tokens(template: templates.FimTemplate) -> None:
    # Trap seen in other tools: "<|fim_prefix|><|fim_suffix|>" as ONE stop string never fires.
    for stop in template.stop:
        for other in template.stop:
            if other != stop:
                assert other not in stop, (stop, other)
        assert stop.strip() == stop and stop


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("qwen2.5-coder:3b", "qwen2.5-coder"),
        ("Qwen/Qwen2.5-Coder-32B-Instruct", "qwen2.5-coder"),
        ("qwen2.5-coder:7b-base-q4_K_M", "qwen2.5-coder"),
        ("qwen3-coder:30b", "qwen2.5-coder"),
        ("bigcode/starcoder2-15b", "starcoder2"),
        ("starcoder2:3b", "starcoder2"),
        ("bigcode/starcoder", "starcoder"),
        ("stable-code:3b-code", "starcoder"),
        ("deepseek-coder:6.7b-base", "deepseek-coder"),
        ("deepseek-ai/deepseek-coder-1.3b-base", "deepseek-coder"),
        ("codellama:7b-code", "codellama"),
        ("codellama/CodeLlama-13b-hf", "codellama"),
        ("codestral:22b", "codestral"),
        ("mistralai/Codestral-22B-v0.1", "codestral"),
        ("codegemma:2b", "codegemma"),
        ("google/codegemma-7b", "codegemma"),
    ],
)
def test_detect(model: str, family: str) -> None:
    found = detect(model)
    assert found is not None and found.name == family


@pytest.mark.parametrize(
    "model",
    # Trap: a "qwen" chat model without "coder" must NOT be matched (to StarCoder or anything).
    [
        "qwen2.5:7b",
        "Qwen/Qwen2.5-7B-Instruct",
        "llama3.1:8b",
        "gemma2:9b",
        "deepseek-r1:7b",
        "SmolLM2",
    ],
)
def test_detect_refuses_non_fim_models(model: str) -> None:
    assert detect(model) is None


def test_get_aliases_and_unknown() -> None:
    assert get("StarCoder2").name == "starcoder2"
    assert get(" qwen ").name == "qwen2.5-coder"
    with pytest.raises(KeyError, match="known: codegemma"):
        get("gpt-9")


def test_sentinels_skip_empty_markers() -> None:
    assert templates.CODESTRAL.sentinels == ("[PREFIX]", "[SUFFIX]")


@pytest.mark.parametrize(
    ("setting", "model", "mode", "family"),
    [
        (None, "qwen2.5-coder:3b", "auto", "qwen2.5-coder"),
        ("", "my-general-llm", "auto", None),
        (" Auto ", "bigcode/starcoder2-3b", "auto", "starcoder2"),
        ("off", "qwen2.5-coder:3b", "off", None),
        ("OFF", "my-general-llm", "off", None),
        ("starcoder2", "qwen2.5-coder:3b", "fixed", "starcoder2"),
        ("starcoder", "qwen2.5-coder:3b", "fixed", "starcoder"),
        ("codellama", "my-general-llm", "fixed", "codellama"),
    ],
)
def test_resolve_gives_every_backend_one_meaning(
    setting: str | None, model: str, mode: str, family: str | None
) -> None:
    got = templates.resolve(setting, model)
    assert got.mode == mode
    assert (got.template.name if got.template else None) == family
    assert templates.resolve(got.spelled, model) == got  # what the embedded worker receives


def test_resolve_refuses_unknown_names_listing_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown FIM template 'gpt-17'") as caught:
        templates.resolve("gpt-17", "x")
    assert "'auto'" in str(caught.value) and "'off'" in str(caught.value)
    assert "qwen2.5-coder" in str(caught.value)
