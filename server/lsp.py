"""Protocol glue: LSP messages in, Session calls, LSP messages out. Nothing else."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from lsprotocol import types as t
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

from . import __version__, config
from .card import route_card, summary
from .ledger import Ledger
from .positions import Encoding, PositionOutOfRange, advance
from .session import Completed, Edit, Session

log = logging.getLogger(__name__)

SECTION = "synconfroute"
CMD_ACCEPT = "synconfroute.accept"
CMD_TOGGLE_LOCAL_ONLY = "synconfroute.toggleLocalOnly"
CMD_STATUS = "synconfroute.status"
ROUTE_NOTIFICATION = "synconfroute/route"

_ENCODINGS: dict[str, Encoding] = {
    t.PositionEncodingKind.Utf8: "utf-8",
    t.PositionEncodingKind.Utf16: "utf-16",
    t.PositionEncodingKind.Utf32: "utf-32",
}
_LEVELS = {
    "error": t.MessageType.Error,
    "warning": t.MessageType.Warning,
    "info": t.MessageType.Info,
}


class _Protocol(LanguageServerProtocol):
    """pygls drops a request whose params do not deserialize, without a response;
    every request must get one, so answer it with InvalidParams here."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if "id" not in data or "method" not in data:
                raise
            cause = exc.__cause__ or exc
            text = f"synconfroute: invalid {data['method']} request: {cause}"
            self._send_response(data["id"], error=JsonRpcInvalidParams(text).to_response_error())
            return SimpleNamespace(jsonrpc="answered")  # handle_message ignores it


class SynConfRouteServer(LanguageServer):
    session: Session


class _ClientLogHandler(logging.Handler):
    """Forwards warnings and errors to the editor's log (window/logMessage)."""

    def __init__(self, server: LanguageServer) -> None:
        super().__init__(logging.WARNING)
        self.server = server

    def emit(self, record: logging.LogRecord) -> None:
        try:
            kind = t.MessageType.Error if record.levelno >= logging.ERROR else t.MessageType.Warning
            self.server.window_log_message(t.LogMessageParams(kind, self.format(record)))
        except Exception:  # the connection may be gone; logging must never raise
            pass


def _show(server: LanguageServer, level: str, text: str) -> None:
    server.window_show_message(t.ShowMessageParams(_LEVELS.get(level, t.MessageType.Info), text))


def _report_issues(server: LanguageServer, issues: list[config.SettingsIssue]) -> None:
    if issues:
        text = "synconfroute settings: " + "; ".join(str(i) for i in issues)
        _show(server, "warning", text)


def _options(value: Any) -> dict[str, Any] | None:
    """The synconfroute part of initializationOptions / configuration payloads."""
    if not isinstance(value, dict):
        return None
    inner = value.get(SECTION, value)
    return inner if isinstance(inner, dict) else None


def create_server(
    loaded: config.Loaded | None = None, ledger_path: Path | None = None
) -> SynConfRouteServer:
    """A fresh server (one per editor connection); no module-level state."""
    server = SynConfRouteServer("synconfroute", __version__, protocol_cls=_Protocol)
    server.session = Session(
        loaded or config.load(),
        show_message=lambda level, text: _show(server, level, text),
        ledger=Ledger(ledger_path),
    )
    session = server.session
    logging.getLogger().addHandler(_ClientLogHandler(server))

    @server.feature(t.INITIALIZE)
    def initialize(ls: SynConfRouteServer, params: t.InitializeParams) -> None:
        enc = ls.workspace.position_encoding or t.PositionEncodingKind.Utf16
        session.encoding = _ENCODINGS.get(str(enc), "utf-16")
        issues = session.apply_overrides(init=_options(params.initialization_options) or {})
        _report_issues(ls, session.load_issues + issues)
        caps = params.capabilities.text_document
        if caps is None or caps.inline_completion is None:
            # Emacs/eglot, Helix, Neovim < 0.12: offer the same completion through
            # the classic completion request (registered before capabilities are built).
            ls.feature(t.TEXT_DOCUMENT_COMPLETION, t.CompletionOptions())(completion)

    @server.feature(t.INITIALIZED)
    async def initialized(ls: SynConfRouteServer, params: t.InitializedParams) -> None:
        await _pull_configuration(ls)
        await session.pipeline()  # choose and build the tiers now, not on the first keystroke

    @server.feature(t.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: SynConfRouteServer, params: t.DidChangeConfigurationParams
    ) -> None:
        pushed = _options(params.settings)
        if pushed is not None:
            _report_issues(ls, session.apply_overrides(workspace=pushed))
        else:
            await _pull_configuration(ls)

    @server.feature(t.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: SynConfRouteServer, params: t.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        session.open(doc.uri, doc.text, doc.language_id, doc.uri)

    @server.feature(t.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: SynConfRouteServer, params: t.DidChangeTextDocumentParams) -> None:
        edits = []
        for ch in params.content_changes:
            if isinstance(ch, t.TextDocumentContentChangePartial):
                r = ch.range
                edits.append(
                    Edit(ch.text, (r.start.line, r.start.character), (r.end.line, r.end.character))
                )
            else:
                edits.append(Edit(ch.text))
        if session.change(params.text_document.uri, edits):
            ls.text_document_publish_diagnostics(
                t.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
            )

    @server.feature(t.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: SynConfRouteServer, params: t.DidCloseTextDocumentParams) -> None:
        session.close(params.text_document.uri)

    async def _complete(
        ls: SynConfRouteServer, uri: str, pos: t.Position, invoked: bool
    ) -> Completed | None:
        if uri not in ls.workspace.text_documents:
            # pygls would read the file from disk; a completion needs the live buffer.
            raise JsonRpcInvalidParams(f"synconfroute: {uri} is not open (send didOpen first)")
        text = ls.workspace.get_text_document(uri).source
        try:
            done = await session.complete(uri, text, pos.line, pos.character, invoked=invoked)
        except PositionOutOfRange as exc:
            raise JsonRpcInvalidParams(f"synconfroute: {exc}") from exc
        if done is not None:
            _notify_route(ls, uri, done)
            if session.settings.editor.diagnostics:
                _publish_route(ls, uri, done)
        return done

    @server.feature(t.TEXT_DOCUMENT_INLINE_COMPLETION, t.InlineCompletionOptions())
    async def inline_completion(
        ls: SynConfRouteServer, params: t.InlineCompletionParams
    ) -> t.InlineCompletionList | None:
        invoked = params.context.trigger_kind == t.InlineCompletionTriggerKind.Invoked
        done = await _complete(ls, params.text_document.uri, params.position, invoked)
        if done is None or not done.insert_text:
            return t.InlineCompletionList(items=[])
        pos = t.Position(*done.start)
        item = t.InlineCompletionItem(
            insert_text=done.insert_text,
            range=t.Range(pos, t.Position(*done.end)),
            command=t.Command(
                title=summary(done.decision), command=CMD_ACCEPT, arguments=[done.id]
            ),
        )
        return t.InlineCompletionList(items=[item])

    async def completion(ls: SynConfRouteServer, params: t.CompletionParams) -> t.CompletionList:
        invoked = (
            params.context is None or params.context.trigger_kind == t.CompletionTriggerKind.Invoked
        )
        done = await _complete(ls, params.text_document.uri, params.position, invoked)
        if done is None or not done.insert_text:
            return t.CompletionList(is_incomplete=True, items=[])
        rec = done.decision
        line, col = done.start
        word_start = t.Position(line, col - advance(0, 0, done.word, session.encoding)[1])
        new_text = done.word + done.insert_text
        first = done.insert_text.strip().split("\n", 1)[0]
        item = t.CompletionItem(
            label=f"{first[:60]}",
            label_details=t.CompletionItemLabelDetails(description=f"synconfroute {rec.route}"),
            kind=t.CompletionItemKind.Text,
            detail=summary(rec),
            documentation=_markup(route_card(rec), _doc_formats(ls)),
            # The word before the cursor is part of the edit, so the editor's
            # filtering (by that word) keeps the item.
            filter_text=new_text,
            sort_text="0",
            preselect=True,
            text_edit=t.TextEdit(t.Range(word_start, t.Position(*done.end)), new_text),
            insert_text_format=t.InsertTextFormat.PlainText,
            command=t.Command(title=summary(rec), command=CMD_ACCEPT, arguments=[done.id]),
        )
        return t.CompletionList(is_incomplete=True, items=[item])

    @server.feature(t.TEXT_DOCUMENT_HOVER)
    def hover(ls: SynConfRouteServer, params: t.HoverParams) -> t.Hover | None:
        card = session.hover(params.text_document.uri, params.position.line)
        if card is None:
            return None
        return t.Hover(contents=_markup(card, _hover_formats(ls)))

    @server.command(CMD_ACCEPT)
    def accept(ls: SynConfRouteServer, did: Any = None, *_: Any) -> bool:
        # pygls passes the command's arguments as positional parameters
        return isinstance(did, str) and session.accept(did)

    @server.command(CMD_TOGGLE_LOCAL_ONLY)
    def toggle_local_only(ls: SynConfRouteServer, *_: Any) -> bool:
        on = session.toggle_local_only()
        _show(
            ls,
            "info",
            f"synconfroute: local-only {'ON: nothing leaves this machine' if on else 'off'}",
        )
        return on

    @server.command(CMD_STATUS)
    def status(ls: SynConfRouteServer, *_: Any) -> dict[str, Any]:
        st = session.status()
        routes = st["routes"]
        _show(
            ls,
            "info",
            f"synconfroute: local {st['local']}; remote {st['remote']}; "
            f"local-only {'on' if st['local_only'] else 'off'}; "
            f"{st['completions']} completions ({routes['local']} local, "
            f"{routes['remote']} remote, {routes['none']} none)",
        )
        return st

    @server.feature(t.SHUTDOWN)
    async def shutdown(ls: SynConfRouteServer, params: None) -> None:
        await session.shutdown()

    return server


async def _pull_configuration(ls: SynConfRouteServer) -> None:
    caps = ls.client_capabilities.workspace
    if caps is None or not caps.configuration:
        return
    try:
        result = await ls.workspace_configuration_async(
            t.ConfigurationParams(items=[t.ConfigurationItem(section=SECTION)])
        )
    except Exception as exc:  # a client that fails the request must not stop us
        log.warning("workspace/configuration failed: %s", exc)
        return
    pulled = _options(result[0]) if result else None
    _report_issues(ls, ls.session.apply_overrides(workspace=pulled or {}))


def _doc_formats(ls: LanguageServer) -> Any:
    caps = ls.client_capabilities.text_document
    item = caps.completion.completion_item if caps and caps.completion else None
    return item.documentation_format if item else None


def _markup(markdown: str, formats: Any) -> t.MarkupContent | str:
    """Markdown where the client says it renders it; else the same text, plain (as
    MarkupContent if the client names plaintext, as a bare string if it names nothing)."""
    if formats and t.MarkupKind.Markdown in formats:
        return t.MarkupContent(t.MarkupKind.Markdown, markdown)
    plain = markdown.replace("**", "").replace("`", "")
    if formats and t.MarkupKind.PlainText in formats:
        return t.MarkupContent(t.MarkupKind.PlainText, plain)
    return plain


def _notify_route(ls: SynConfRouteServer, uri: str, done: Completed) -> None:
    """The route of a completion as data (status bars, accept commands): sent before the
    response, so a client has it when the completion arrives."""
    rec = done.decision
    card: Any = _markup(route_card(rec), _hover_formats(ls))
    if not isinstance(card, str):
        card = {"kind": card.kind.value, "value": card.value}
    ls.protocol.notify(
        ROUTE_NOTIFICATION,
        {
            "uri": uri,
            "id": done.id,  # the argument of synconfroute.accept
            "route": rec.route,
            "reasons": list(rec.reasons),
            "confidence": rec.confidence,
            "threshold": rec.threshold,
            "cacheHit": rec.cache_hit,
            "summary": summary(rec),
            "card": card,  # as the hover shows it: Markdown or plain text
            "range": {
                "start": {"line": done.start[0], "character": done.start[1]},
                "end": {"line": done.end[0], "character": done.end[1]},
            },
        },
    )


def _hover_formats(ls: LanguageServer) -> Any:
    caps = ls.client_capabilities.text_document
    return caps.hover.content_format if caps and caps.hover else None


def _publish_route(ls: SynConfRouteServer, uri: str, done: Completed) -> None:
    line, col = done.start
    diag = t.Diagnostic(
        range=t.Range(t.Position(line, col), t.Position(line, col)),
        message=summary(done.decision),
        severity=t.DiagnosticSeverity.Information,
        source="synconfroute",
    )
    ls.text_document_publish_diagnostics(t.PublishDiagnosticsParams(uri=uri, diagnostics=[diag]))
    st = ls.session.documents.get(uri)
    if st is not None:
        st.diagnostics_shown = True
