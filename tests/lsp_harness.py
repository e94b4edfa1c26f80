"""Start `synconfroute serve` in a subprocess with a pytest-lsp client, against fakes.

Shared by the LSP end-to-end tests and the LSP latency benchmark.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from tests import files

ROOT = Path(__file__).resolve().parent.parent
# The default workspace folder: its files exist (the egress gate sends only files that
# exist now, inside a folder open now), and it lies in no git repository.
WORKSPACE = Path(files.BASE) / "ws"


def workspace_file(rel: str, text: str = "") -> Path:
    """A file of the default workspace folder, created (empty) if missing."""
    return Path(files.existing(f"ws/{rel}", text))


def write_config(
    folder: Path,
    *,
    local_url: str | None = None,
    remote_url: str | None = None,
    local_backend: str = "ollama",
    extra: str = "",
    remote_extra: str = "",
    local_extra: str = "",
) -> Path:
    """A settings file pointing the tiers at the given (fake) servers (`local_extra`,
    `remote_extra`: more lines of the [local] and [remote] tables)."""
    lines = ["[local]", f'backend = "{local_backend}"', local_extra]
    if local_url:
        lines += [f'url = "{local_url}"', 'model = "qwen2.5-coder:3b"', "timeout = 5"]
    if remote_url:
        lines += [
            "[remote]",
            f'url = "{remote_url}"',
            'model = "Qwen/Qwen2.5-Coder-32B-Instruct"',
            'api_key_env = ""',
            "timeout = 5",
            remote_extra,
        ]
    lines += ["[editor]", "debounce_ms = 0", "adaptive_debounce = false", extra]
    path = folder / "config.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def capabilities(profile: str, *, inline: bool, encodings: list[str] | None = None) -> Any:
    """A recorded client's capabilities, with inline completion added or not."""
    caps = client_capabilities(profile)
    if inline:
        if caps.text_document is None:
            caps.text_document = t.TextDocumentClientCapabilities()
        caps.text_document.inline_completion = t.InlineCompletionClientCapabilities(
            dynamic_registration=False
        )
    elif caps.text_document is not None:
        caps.text_document.inline_completion = None
    if encodings is not None:
        if caps.general is None:
            caps.general = t.GeneralClientCapabilities()
        caps.general.position_encodings = [t.PositionEncodingKind(e) for e in encodings]
    return caps


async def start(
    config_path: Path,
    caps: Any,
    *,
    init_options: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    configuration: Any = None,
    root: Path | None = WORKSPACE,
    server_args: Sequence[str] = (),
    configuration_delay_s: float = 0.0,
    folders: Sequence[Path] | None = None,
    scoped_configuration: Mapping[str, Any] | None = None,
) -> tuple[LanguageClient, t.InitializeResult]:
    """`configuration` is what the client answers workspace/configuration with, from the
    server's first pull (at `initialized`) on; `scoped_configuration` (scopeUri: answer)
    what it answers an item with that scopeUri (a folder's own settings). `root` is the
    workspace folder (`folders`: several workspace folders instead)."""
    server_env = dict(os.environ)
    server_env.update({"SYNCONFROUTE_CONFIG": str(config_path), "PYTHONPATH": str(ROOT)})
    server_env.update(env or {})
    cfg = ClientServerConfig(
        server_command=[
            sys.executable,
            "-m",
            "synconfroute",
            "serve",
            "--ledger",  # never the user's own ledger
            str(config_path.parent / "ledger.jsonl"),
            *server_args,
        ],
        server_env=server_env,
    )
    client = await cfg.start()
    assert isinstance(client, LanguageClient)
    registrations: list[t.Registration] = []
    client.registrations = registrations  # type: ignore[attr-defined]

    @client.feature(t.CLIENT_REGISTER_CAPABILITY)
    def register(params: t.RegistrationParams) -> None:
        # The recorded clients claim dynamic registration: accept, as they would.
        registrations.extend(params.registrations)

    if configuration is not None:
        client.set_configuration(configuration)
    for scope, answer in (scoped_configuration or {}).items():
        client.set_configuration(answer, scope_uri=scope)
    if configuration_delay_s:
        # A slow editor: it answers workspace/configuration this much later.
        async def slow_configuration(params: t.ConfigurationParams) -> list[Any]:
            await asyncio.sleep(configuration_delay_s)
            return [
                client.get_configuration(section=i.section, scope_uri=i.scope_uri)
                for i in params.items
            ]

        client.protocol.fm.features[t.WORKSPACE_CONFIGURATION] = slow_configuration
    result = await client.initialize_session(
        t.InitializeParams(
            capabilities=caps,
            initialization_options=dict(init_options) if init_options else None,
            root_uri=root.as_uri() if root is not None else None,
            workspace_folders=(
                None
                if folders is None
                else [t.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders]
            ),
        )
    )
    return client, result


async def stop(client: LanguageClient) -> None:
    await client.shutdown_session()
    await client.stop()


def open_doc(client: LanguageClient, uri: str, text: str, language: str = "python") -> None:
    client.text_document_did_open(
        t.DidOpenTextDocumentParams(
            text_document=t.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
        )
    )


def inline_request(uri: str, pos: t.Position, *, invoked: bool = True) -> t.InlineCompletionParams:
    """An inlineCompletion request as an editor sends it (Invoked: no debounce)."""
    kind = (
        t.InlineCompletionTriggerKind.Invoked
        if invoked
        else t.InlineCompletionTriggerKind.Automatic
    )
    return t.InlineCompletionParams(
        text_document=t.TextDocumentIdentifier(uri),
        position=pos,
        context=t.InlineCompletionContext(trigger_kind=kind),
    )
