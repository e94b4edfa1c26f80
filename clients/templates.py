"""Fill-in-the-middle prompt templates and their stop lists, per model family.

A FIM model is trained on one exact layout of sentinel tokens; any other layout
makes it write nonsense. `detect(model_name)` picks the family from the model's
name (Ollama tag or Hugging Face id); settings may name a family explicitly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import attrs


@attrs.frozen(kw_only=True)
class FimTemplate:
    name: str
    prefix_token: str
    suffix_token: str
    middle_token: str
    stop: tuple[str, ...]
    suffix_first: bool = False  # Codestral puts the suffix before the prefix
    # CodeLlama separates its sentinels from the code with single spaces.
    pad_prefix: str = ""
    pad_middle: str = ""
    repo_name_token: str | None = None  # repo-level prompts (Qwen2.5-Coder, StarCoder2)
    file_sep_token: str | None = None
    # StarCoder2 writes no newline after the repo name and puts the current file's path
    # after <fim_prefix>; Qwen2.5-Coder ends the repo name with a newline, its path before.
    repo_name_newline: bool = True
    path_in_fim: bool = False

    @property
    def sentinels(self) -> tuple[str, ...]:
        """The special tokens the model's vocabulary must have for this template."""
        return tuple(t for t in (self.prefix_token, self.suffix_token, self.middle_token) if t)

    def render(
        self,
        prefix: str,
        suffix: str,
        *,
        repo: str | None = None,
        path: str | None = None,
        files: Sequence[tuple[str, str]] = (),
    ) -> str:
        """The prompt text for one hole between `prefix` and `suffix`.

        With `repo` or other `files` as (path, text) pairs (and the current `path`),
        families that support it get a repo-level prompt; the others get the files
        as comment-headed blocks before the prefix (see `commented`).
        """
        repo_level = self.repo_name_token is not None and self.file_sep_token is not None
        if files and not repo_level:
            prefix = commented(prefix, files, path or "")
        if self.suffix_first:
            body = f"{self.suffix_token}{suffix}{self.prefix_token}{prefix}"
        else:
            body = (
                f"{self.prefix_token}{self.pad_prefix}{prefix}"
                f"{self.pad_prefix}{self.suffix_token}{suffix}"
                f"{self.pad_middle}{self.middle_token}"
            )
        if (repo is None and not files) or not repo_level:
            return body
        nl = "\n" if self.repo_name_newline else ""
        parts = [f"{self.repo_name_token}{repo or ''}{nl}"]
        parts += [f"{self.file_sep_token}{p}\n{_ended(text)}" for p, text in files]
        if self.path_in_fim:
            parts.append(f"{self.file_sep_token}{self.prefix_token}{path or 'file'}\n")
            parts.append(body[len(self.prefix_token) :])
        else:
            parts.append(f"{self.file_sep_token}{path or 'file'}\n{body}")
        return "".join(parts)


def _ended(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


# Line comments by file extension; everything else gets `//`.
_HASH = (".py", ".pyi", ".pyw", ".rb", ".sh", ".bash", ".pl", ".r", ".yaml", ".yml", ".toml")
_DASH = (".sql", ".lua", ".hs")


def comment_marker(path: str) -> str:
    """The line-comment marker of the language of `path`."""
    p = path.lower()
    if p.endswith(_HASH):
        return "#"
    if p.endswith(_DASH):
        return "--"
    return "//"


def context_args(request: Any) -> dict[str, Any]:
    """`render` keywords for a `CompletionRequest`'s cross-file context ({} without it)."""
    if not request.context_files:
        return {}
    return {"repo": request.repo, "path": request.repo_path, "files": request.context_files}


def with_context(request: Any) -> str:
    """The request's prefix with its cross-file context as comment-headed blocks (native
    FIM servers and prefix-only prompts, which have no repo-level tokens)."""
    return commented(request.prefix, request.context_files, request.repo_path)


def commented(prefix: str, files: Sequence[tuple[str, str]], path: str) -> str:
    """`prefix` preceded by other files' code, each under a `<comment> Path: p` header
    in the current file's comment syntax, then the current file's own header: the
    cross-file layout for templates without repo-level tokens and for prefix-only
    prompts. Without files, `prefix` unchanged."""
    if not files:
        return prefix
    mark = comment_marker(path or (files[-1][0] if files else ""))
    parts = [f"{mark} Path: {p}\n{_ended(text)}\n" for p, text in files]
    parts.append(f"{mark} Path: {path or 'file'}\n")
    return "".join(parts) + prefix


QWEN_CODER = FimTemplate(
    name="qwen2.5-coder",
    prefix_token="<|fim_prefix|>",
    suffix_token="<|fim_suffix|>",
    middle_token="<|fim_middle|>",
    repo_name_token="<|repo_name|>",
    file_sep_token="<|file_sep|>",
    stop=(
        "<|endoftext|>",
        "<|fim_prefix|>",
        "<|fim_suffix|>",
        "<|fim_middle|>",
        "<|fim_pad|>",
        "<|repo_name|>",
        "<|file_sep|>",
        "<|im_start|>",
        "<|im_end|>",
    ),
)

STARCODER = FimTemplate(
    name="starcoder",
    prefix_token="<fim_prefix>",
    suffix_token="<fim_suffix>",
    middle_token="<fim_middle>",
    stop=(
        "<fim_prefix>",
        "<fim_suffix>",
        "<fim_middle>",
        "<fim_pad>",
        "<file_sep>",
        "<|endoftext|>",
    ),
)

# StarCoder2 has repo-level tokens; StarCoder (1) and stable-code do not.
STARCODER2 = FimTemplate(
    name="starcoder2",
    prefix_token="<fim_prefix>",
    suffix_token="<fim_suffix>",
    middle_token="<fim_middle>",
    repo_name_token="<repo_name>",
    file_sep_token="<file_sep>",
    repo_name_newline=False,
    path_in_fim=True,
    stop=(
        "<fim_prefix>",
        "<fim_suffix>",
        "<fim_middle>",
        "<fim_pad>",
        "<file_sep>",
        "<repo_name>",
        "<|endoftext|>",
    ),
)

DEEPSEEK_CODER = FimTemplate(
    name="deepseek-coder",
    prefix_token="<｜fim▁begin｜>",
    suffix_token="<｜fim▁hole｜>",
    middle_token="<｜fim▁end｜>",
    stop=("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>", "<｜end▁of▁sentence｜>"),
)

CODELLAMA = FimTemplate(
    name="codellama",
    prefix_token="<PRE>",
    suffix_token="<SUF>",
    middle_token="<MID>",
    pad_prefix=" ",
    pad_middle=" ",
    stop=("<EOT>", "<PRE>", "<SUF>", "<MID>"),
)

CODESTRAL = FimTemplate(
    name="codestral",
    prefix_token="[PREFIX]",
    suffix_token="[SUFFIX]",
    middle_token="",
    suffix_first=True,
    stop=("[PREFIX]", "[SUFFIX]", "</s>"),
)

CODEGEMMA = FimTemplate(
    name="codegemma",
    prefix_token="<|fim_prefix|>",
    suffix_token="<|fim_suffix|>",
    middle_token="<|fim_middle|>",
    stop=("<|file_separator|>", "<end_of_turn>", "<eos>"),
)

TEMPLATES: dict[str, FimTemplate] = {
    t.name: t
    for t in (QWEN_CODER, STARCODER, STARCODER2, DEEPSEEK_CODER, CODELLAMA, CODESTRAL, CODEGEMMA)
}
# Names users may write in settings besides the canonical ones.
ALIASES: dict[str, str] = {
    "qwen": "qwen2.5-coder",
    "qwen-coder": "qwen2.5-coder",
    "stable-code": "starcoder",
    "deepseek": "deepseek-coder",
    "code-llama": "codellama",
}


def get(name: str) -> FimTemplate:
    """The template called `name` (or an alias); KeyError lists the known names."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    try:
        return TEMPLATES[key]
    except KeyError:
        known = ", ".join(sorted(TEMPLATES))
        raise KeyError(f"unknown FIM template {name!r}; known: {known}") from None


def detect(model_name: str) -> FimTemplate | None:
    """Guess the FIM family from a model name; None when no rule matches.

    Order matters: a plain "qwen2.5" chat model is NOT a FIM model (a known trap
    in other tools matched it to StarCoder), and "codegemma" must win over a
    generic "gemma".
    """
    n = model_name.lower().replace("_", "-")
    if "codestral" in n:
        return CODESTRAL
    if "codegemma" in n:
        return CODEGEMMA
    if "deepseek" in n and "coder" in n:
        return DEEPSEEK_CODER
    if "codellama" in n or "code-llama" in n:
        return CODELLAMA
    if "starcoder2" in n:
        return STARCODER2
    if "starcoder" in n or "stable-code" in n:
        return STARCODER
    if "qwen" in n and "coder" in n:
        return QWEN_CODER
    return None


@attrs.frozen
class TemplateSetting:
    """What a backend's `template` setting asks for (see `resolve`)."""

    mode: Literal["auto", "off", "fixed"]
    # fixed: that family; auto: the guess from the model's name (None: no guess); off: None
    template: FimTemplate | None

    @property
    def spelled(self) -> str:
        """The setting written back: "auto", "off" or the family's canonical name."""
        if self.mode == "fixed" and self.template is not None:
            return self.template.name
        return self.mode


def resolve(setting: str | None, model: str) -> TemplateSetting:
    """The one meaning of the `template` setting, for every backend.

    - "" (or None) and "auto": detect. The guess from the model's name (`detect`) comes
      first; a backend that can see more completes it: Ollama reads the model's own
      template from /api/show when the name says nothing, the embedded backend keeps a
      family only if the GGUF's vocabulary has its sentinels as special tokens (the
      guessed one first, then every known family).
    - "off": no FIM template, ever: the model sees only the text before the cursor
      (prefix-only; Ollama does not use its native FIM either).
    - a family name or alias (`get`): that template, whatever the model is called.

    Anything else is a ValueError that lists the choices.
    """
    key = (setting or "").strip().lower()
    if key in ("", "auto"):
        return TemplateSetting("auto", detect(model))
    if key == "off":
        return TemplateSetting("off", None)
    try:
        return TemplateSetting("fixed", get(key))
    except KeyError as exc:
        raise ValueError(
            f"{exc.args[0]}; or 'auto' (detect from the model) or 'off' (prefix only)"
        ) from None


__all__ = [
    "CODEGEMMA",
    "CODELLAMA",
    "CODESTRAL",
    "DEEPSEEK_CODER",
    "QWEN_CODER",
    "STARCODER",
    "STARCODER2",
    "TEMPLATES",
    "FimTemplate",
    "TemplateSetting",
    "comment_marker",
    "commented",
    "context_args",
    "detect",
    "get",
    "resolve",
    "with_context",
]
