"""Protocol glue: LSP messages in, Session calls, LSP messages out. Nothing else."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from lsprotocol import types as t
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest
from pygls.lsp.server import LanguageServer
from pygls.protocol.language_server import lsp_method

from .. import __version__
from ..learning import later
from ..learning.ledger import Ledger
from ..session.session import Completed, DocumentNotOpen, Edit, Session, path_of
from ..settings import config
from ..syntax.languages import LANGUAGES
from ..vocab.card import route_card, summary
from ..vocab.positions import Encoding, PositionOutOfRange, advance
from .outgoing import DETAILS, without_traceback
from .transport import ANSWERED, TransportProtocol

log = logging.getLogger(__name__)

SECTION = "synconfroute"
CMD_ACCEPT = "synconfroute.accept"
CMD_TOGGLE_LOCAL_ONLY = "synconfroute.toggleLocalOnly"
CMD_STATUS = "synconfroute.status"
ROUTE_NOTIFICATION = "synconfroute/route"
# Client -> server: where the cursor rests ({textDocument: {uri}, position}), sent by our
# editor plugins when a document gains focus and when the cursor pauses; the server
# prefills the local model's prompt there (server/session/prefill.py).
CURSOR_NOTIFICATION = "synconfroute/cursor"
# Next-edit suggestions, as Copilot's language server speaks them (copilot-lsp,
# sidekick.nvim, copilot.el, Zed): no LSP method exists for them.
INLINE_EDIT = "textDocument/copilotInlineEdit"
DID_SHOW_INLINE_EDIT = "textDocument/didShowInlineEdit"
CMD_ACCEPT_EDIT = "synconfroute.acceptNextEdit"

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


# Finished handlers' futures are dropped once more than this many are kept (a few
# finished ones may wait there meanwhile: nothing reads them).
_FUTURES_SWEPT_AT = 16
_FORWARDED = frozenset(
    {t.TEXT_DOCUMENT_DID_OPEN, t.TEXT_DOCUMENT_DID_CHANGE, t.TEXT_DOCUMENT_DID_CLOSE}
)


class _Protocol(TransportProtocol):
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
            log.info("answered request %s with error -32602: %s", data["id"], text)
            self._send_response(data["id"], error=JsonRpcInvalidParams(text).to_response_error())
            return ANSWERED  # handle_message drops it

    # The session keeps the one copy of each open document (LSP line rule, see
    # server/vocab/positions.py). pygls' workspace copy breaks lines with str.splitlines, and
    # an error in it would stop our handler: keep none, just pass the notification on.
    def _get_handler(self, feature_name: str) -> Any:
        # Our handler itself, not the builtin that forwards to it: a generator, a Future
        # and a uuid less per keystroke (the builtins below stand in when there is none).
        if feature_name in _FORWARDED and (handler := self.fm.features.get(feature_name)):
            return handler
        return super()._get_handler(feature_name)

    def _forward(self, method: str, params: Any) -> Generator[Any, Any, None]:
        if (handler := self.fm.features.get(method)) is not None:
            yield handler, (params,), None

    @lsp_method(t.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(
        self, params: t.DidOpenTextDocumentParams
    ) -> Generator[Any, Any, None]:
        yield from self._forward(t.TEXT_DOCUMENT_DID_OPEN, params)

    @lsp_method(t.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(
        self, params: t.DidChangeTextDocumentParams
    ) -> Generator[Any, Any, None]:
        yield from self._forward(t.TEXT_DOCUMENT_DID_CHANGE, params)

    @lsp_method(t.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(
        self, params: t.DidCloseTextDocumentParams
    ) -> Generator[Any, Any, None]:
        yield from self._forward(t.TEXT_DOCUMENT_DID_CLOSE, params)

    def _execute_handler(
        self,
        msg_id: str | int,
        handler: Callable[..., Any],
        callback: Callable[[Future[Any]], None],
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        """pygls files each handler's future under its message id (a fresh one for a
        notification) and takes it out only when it answers a request: every didOpen,
        didChange and didClose left a Future behind for the life of the server. Drop the
        finished ones here (not from a done-callback: pygls' shutdown cancels pending
        futures while iterating over that dict, and a Future runs callbacks at once)."""
        futures = self._request_futures
        if len(futures) > _FUTURES_SWEPT_AT:  # (a sweep per message was ~8 µs, cold)
            for done in [k for k, f in futures.items() if f.done()]:
                del futures[done]
        super()._execute_handler(msg_id, handler, callback, args, kwargs)


class SynConfRouteServer(LanguageServer):
    session: Session
    watching: bool = False  # registered for workspace/didChangeWatchedFiles
    # The client manages workspace folders (it sent `workspaceFolders`, or changed them):
    # then only the folders open now are roots, never the initial rootUri.
    folders_managed: bool = False
    # `serve --tcp` with a token: the client must name it in initializationOptions
    # (`tcpToken`), or it is refused and the server ends (its settings are user scope).
    tcp_token: str | None = None


class _ClientLogHandler(logging.Handler):
    """Forwards warnings and errors to the editor's log (window/logMessage)."""

    def __init__(self, server: LanguageServer) -> None:
        super().__init__(logging.WARNING)
        self.server = server

    def format(self, record: logging.LogRecord) -> str:
        # Never a traceback to the client: the message, and the exception's name and text
        # (pygls puts tracebacks, exception groups' too, in the message itself); the
        # server log has the rest.
        message = record.getMessage()
        text = without_traceback(message)
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            text = text.removesuffix(DETAILS) + without_traceback(f": {type(exc).__name__}: {exc}")
        if record.exc_info and not text.endswith(DETAILS):
            text += DETAILS
        return text

    def emit(self, record: logging.LogRecord) -> None:
        try:
            kind = t.MessageType.Error if record.levelno >= logging.ERROR else t.MessageType.Warning
            self.server.window_log_message(t.LogMessageParams(kind, self.format(record)))
        except Exception:  # the connection may be gone; logging must never raise
            pass


def _show(server: LanguageServer, level: str, text: str) -> None:
    server.window_show_message(t.ShowMessageParams(_LEVELS.get(level, t.MessageType.Info), text))


def _report_issues(server: LanguageServer, issues: list[config.SettingsIssue]) -> None:
    closed = [i for i in issues if i.fail_closed]
    if closed:  # one clear error: which privacy value could not be read
        _show(server, "error", "synconfroute: " + "; ".join(str(i) for i in closed))
        issues = [i for i in issues if not i.fail_closed]
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
    loaded: config.Loaded | None = None,
    ledger_path: Path | None = None,
    retention_after: Sequence[float] | None = None,
) -> SynConfRouteServer:
    """A fresh server (one per editor connection); no module-level state."""
    server = SynConfRouteServer("synconfroute", __version__, protocol_cls=_Protocol)
    server.session = Session(
        loaded or config.load(),
        show_message=lambda level, text: _show(server, level, text),
        ledger=Ledger(ledger_path),
        roots=lambda: _workspace_roots(server),
        retention_delays=retention_after,
    )
    logging.getLogger().addHandler(_ClientLogHandler(server))

    server.feature(t.INITIALIZE)(initialize)
    server.feature(t.INITIALIZED)(initialized)
    server.feature(t.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    server.feature(t.TEXT_DOCUMENT_DID_OPEN)(did_open)
    server.feature(t.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    server.feature(t.TEXT_DOCUMENT_DID_SAVE)(did_save)
    server.feature(t.WORKSPACE_DID_CHANGE_WATCHED_FILES)(did_change_watched_files)
    server.feature(t.TEXT_DOCUMENT_DID_CLOSE)(did_close)
    server.feature(t.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)(did_change_workspace_folders)
    every_file = t.FileOperationRegistrationOptions(
        filters=[t.FileOperationFilter(pattern=t.FileOperationPattern(glob="**/*"), scheme="file")]
    )
    server.feature(t.WORKSPACE_DID_RENAME_FILES, every_file)(did_rename_files)
    server.feature(t.WORKSPACE_DID_DELETE_FILES, every_file)(did_delete_files)
    server.feature(CURSOR_NOTIFICATION)(cursor)
    server.feature(t.TEXT_DOCUMENT_INLINE_COMPLETION, t.InlineCompletionOptions())(
        inline_completion
    )
    server.feature(t.TEXT_DOCUMENT_HOVER)(hover)
    server.feature(INLINE_EDIT)(inline_edit)
    server.feature(DID_SHOW_INLINE_EDIT)(did_show_inline_edit)
    server.command(CMD_ACCEPT_EDIT)(accept_edit)
    server.command(CMD_ACCEPT)(accept)
    server.command(CMD_TOGGLE_LOCAL_ONLY)(toggle_local_only)
    server.command(CMD_STATUS)(status)
    server.feature(t.SHUTDOWN)(shutdown)
    return server


# -- handlers: module-level, the session on the server (as jedi-language-server does) --


def initialize(ls: SynConfRouteServer, params: t.InitializeParams) -> None:
    enc = ls.workspace.position_encoding or t.PositionEncodingKind.Utf16
    ls.session.negotiated(_ENCODINGS.get(str(enc), "utf-16"))
    raw = params.initialization_options
    options = dict(raw) if isinstance(raw, dict) else {}
    given = options.pop("tcpToken", None)
    if ls.tcp_token is not None and not (
        isinstance(given, str) and hmac.compare_digest(given.encode(), ls.tcp_token.encode())
    ):
        log.error("synconfroute: a TCP client without the right token was refused")
        ls.protocol.exit_code = 3  # type: ignore[attr-defined]  # end the read loop
        raise JsonRpcInvalidRequest("synconfroute: this server wants its TCP token (tcpToken)")
    issues = ls.session.apply_overrides(init=_options(options) or {})
    _report_issues(ls, ls.session.settings_state.load_issues + issues)
    ls.folders_managed = params.workspace_folders is not None
    ws_caps = params.capabilities.workspace
    if ws_caps is not None and ws_caps.configuration:
        ls.session.expect_workspace_configuration()  # pulled at `initialized`
        if ls.folders_managed:  # each folder's own, asked with its scopeUri
            ls.session.expect_folder_configuration([p for _, p in _folders(ls)])
    caps = params.capabilities.text_document
    if caps is None or caps.inline_completion is None:
        # Emacs/eglot, Helix, Neovim < 0.12: offer the same completion through
        # the classic completion request (registered before capabilities are built).
        ls.feature(t.TEXT_DOCUMENT_COMPLETION, t.CompletionOptions())(completion)


async def initialized(ls: SynConfRouteServer, params: t.InitializedParams) -> None:
    await _pull_configuration(ls)
    ls.session.start_index()  # in the background: completions never wait for it
    await _watch_files(ls)
    await ls.session.pipeline()  # choose and build the tiers now, not on the first keystroke


async def did_change_configuration(
    ls: SynConfRouteServer, params: t.DidChangeConfigurationParams
) -> None:
    pushed = _options(params.settings)
    if pushed is not None:
        _report_issues(ls, ls.session.apply_overrides(workspace=pushed))
    else:
        await _pull_configuration(ls)
    ls.session.start_index()  # when the context setting just became "workspace"
    await _watch_files(ls)


async def did_change_workspace_folders(
    ls: SynConfRouteServer, params: t.DidChangeWorkspaceFoldersParams
) -> None:
    """pygls has updated its folder list: removed folders stop being roots now; added
    ones keep their files local until their configuration has been read."""
    ls.folders_managed = True
    roots = [p for _, p in _folders(ls)]
    ls.session.folders_changed(roots)
    caps = ls.client_capabilities.workspace
    if caps is not None and caps.configuration:
        ls.session.expect_folder_configuration(roots)
        await _pull_configuration(ls)


def did_rename_files(ls: SynConfRouteServer, params: t.RenameFilesParams) -> None:
    ls.session.files_moved([(f.old_uri, f.new_uri) for f in params.files])


def did_delete_files(ls: SynConfRouteServer, params: t.DeleteFilesParams) -> None:
    ls.session.files_deleted([f.uri for f in params.files])


def did_open(ls: SynConfRouteServer, params: t.DidOpenTextDocumentParams) -> None:
    doc = params.text_document
    ls.session.open(doc.uri, doc.text, doc.language_id)
    ls.session.next_edits.version(doc.uri, doc.version)


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
    cleared = ls.session.change(params.text_document.uri, edits)
    ls.session.next_edits.version(params.text_document.uri, params.text_document.version)
    if cleared:
        ls.text_document_publish_diagnostics(
            t.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
        )


def cursor(ls: SynConfRouteServer, params: Any) -> None:
    """`synconfroute/cursor`: a custom notification (pygls hands it over as nested
    namedtuples); a malformed one is ignored, as a notification cannot be answered."""
    try:
        uri = str(params.textDocument.uri)
        line, character = int(params.position.line), int(params.position.character)
    except (AttributeError, TypeError, ValueError):
        log.debug("ignored a malformed %s notification", CURSOR_NOTIFICATION)
        return
    ls.session.cursor(uri, line, character)


def did_save(ls: SynConfRouteServer, params: t.DidSaveTextDocumentParams) -> None:
    ls.session.saved(params.text_document.uri)


async def did_change_watched_files(
    ls: SynConfRouteServer, params: t.DidChangeWatchedFilesParams
) -> None:
    deleted = t.FileChangeType.Deleted
    await ls.session.files_changed([(c.uri, c.type == deleted) for c in params.changes])


def did_close(ls: SynConfRouteServer, params: t.DidCloseTextDocumentParams) -> None:
    ls.session.close(params.text_document.uri)
    ls.session.next_edits.forget(params.text_document.uri)


async def _complete(
    ls: SynConfRouteServer, uri: str, pos: t.Position, invoked: bool
) -> Completed | None:
    try:
        # The session's own text, never pygls' workspace copy (other line rule).
        done = await ls.session.complete(uri, pos.line, pos.character, invoked=invoked)
    except DocumentNotOpen as exc:
        raise JsonRpcInvalidParams(f"synconfroute: {exc.args[0]}") from exc
    except PositionOutOfRange as exc:
        raise JsonRpcInvalidParams(f"synconfroute: {exc}") from exc
    if done is not None:
        # The route as data (editors' status bars), and as a diagnostic if asked for:
        # right after the response, which the user is waiting for.
        later.after_response(lambda: _notify_route(ls, uri, done))
        if ls.session.settings.editor.diagnostics:
            later.after_response(lambda: _publish_route(ls, uri, done))
    return done


async def inline_completion(
    ls: SynConfRouteServer, params: t.InlineCompletionParams
) -> dict[str, Any]:
    invoked = params.context.trigger_kind == t.InlineCompletionTriggerKind.Invoked
    done = await _complete(ls, params.text_document.uri, params.position, invoked)
    return inline_list(done)


def inline_list(done: Completed | None) -> dict[str, Any]:
    """The InlineCompletionList of a completion, as the JSON lsprotocol's converter makes
    of it (built directly: no attrs objects to validate, then take apart, on every
    keystroke; tests/test_protocol_fast_paths.py holds the two together)."""
    if done is None or not done.insert_text:
        return {"items": []}
    (line, character), (end_line, end_character) = done.start, done.end
    item = {
        "insertText": done.insert_text,
        "range": {
            "start": {"line": line, "character": character},
            "end": {"line": end_line, "character": end_character},
        },
        "command": {
            "title": done.title,
            "command": CMD_ACCEPT,
            "arguments": [done.id],
        },
    }
    return {"items": [item]}


async def completion(ls: SynConfRouteServer, params: t.CompletionParams) -> dict[str, Any]:
    invoked = (
        params.context is None or params.context.trigger_kind == t.CompletionTriggerKind.Invoked
    )
    done = await _complete(ls, params.text_document.uri, params.position, invoked)
    return completion_list(done, ls.session.docs.encoding, _doc_formats(ls))


def completion_list(done: Completed | None, encoding: Encoding, formats: Any) -> dict[str, Any]:
    """The CompletionList of a completion, as the JSON lsprotocol's converter makes of it
    (built directly, as `inline_list`: a dozen attrs objects validated, then taken apart
    by the converter, were ~0.2 ms a request with the caches cold; the editors that ask
    for completions this way, Neovim, Emacs, Helix, waited for it).
    tests/test_completion_list.py holds the two together."""
    if done is None or not done.insert_text:
        return {"isIncomplete": True, "items": []}
    rec = done.decision
    line, col = done.start
    word_start = {"line": line, "character": col - advance(0, 0, done.word, encoding)[1]}
    end = {"line": done.end[0], "character": done.end[1]}
    new_text = done.word + done.insert_text
    first = done.insert_text.strip().split("\n", 1)[0]
    kind, card = _markup_parts(route_card(rec), formats)
    item = {
        "label": first[:60],
        "labelDetails": {"description": f"synconfroute {rec.route}"},
        "kind": t.CompletionItemKind.Text.value,
        "detail": done.title,
        "documentation": card if kind is None else {"kind": kind.value, "value": card},
        "preselect": True,
        "sortText": "0",
        # The word before the cursor is part of the edit, so the editor's
        # filtering (by that word) keeps the item.
        "filterText": new_text,
        "insertTextFormat": t.InsertTextFormat.PlainText.value,
        "textEdit": {"range": {"start": word_start, "end": end}, "newText": new_text},
        "command": {"title": done.title, "command": CMD_ACCEPT, "arguments": [done.id]},
    }
    return {"isIncomplete": True, "items": [item]}


def _edit_where(params: Any) -> tuple[str, int, int, int]:
    """(uri, version, line, character) of a copilotInlineEdit request (pygls hands a
    custom method's params over as nested namedtuples); a clear error when malformed."""
    try:
        doc, pos = params.textDocument, params.position
        where = (str(doc.uri), doc.version, pos.line, pos.character)
    except AttributeError as exc:
        raise JsonRpcInvalidParams(
            f"synconfroute: {INLINE_EDIT} wants {{textDocument: {{uri, version}}, position}}"
        ) from exc
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in where[1:]):
        raise JsonRpcInvalidParams(
            f"synconfroute: {INLINE_EDIT}: version and position are integers"
        )
    return where


async def inline_edit(ls: SynConfRouteServer, params: Any) -> dict[str, Any]:
    """`textDocument/copilotInlineEdit`: the edit after this one, or none (`edits` are
    alternatives: at most one here)."""
    uri, version, line, character = _edit_where(params)
    try:
        shown = await ls.session.next_edits.suggest(uri, version, line, character)
    except DocumentNotOpen as exc:
        raise JsonRpcInvalidParams(f"synconfroute: {exc.args[0]}") from exc
    except PositionOutOfRange as exc:
        raise JsonRpcInvalidParams(f"synconfroute: {exc}") from exc
    if shown is None:
        return {"edits": []}
    rec = shown.decision
    # The route as data, right after the response, as for completions.
    done = Completed(shown.id, rec, shown.text, shown.start, shown.end, "")
    later.after_response(lambda: _notify_route(ls, uri, done, kind="next-edit"))
    item = {
        "text": shown.text,
        "range": {
            "start": {"line": shown.start[0], "character": shown.start[1]},
            "end": {"line": shown.end[0], "character": shown.end[1]},
        },
        "textDocument": {"uri": uri, "version": shown.version},
        "command": {"title": summary(rec), "command": CMD_ACCEPT_EDIT, "arguments": [shown.id]},
    }
    return {"edits": [item]}


def did_show_inline_edit(ls: SynConfRouteServer, params: Any) -> None:
    """`textDocument/didShowInlineEdit {item}`: the ledger's "shown" event (a malformed
    notification is ignored: it cannot be answered)."""
    try:
        did = params.item.command.arguments[0]
    except (AttributeError, IndexError, TypeError):
        log.debug("ignored a malformed %s notification", DID_SHOW_INLINE_EDIT)
        return
    if isinstance(did, str):
        ls.session.next_edits.shown(did)


def accept_edit(ls: SynConfRouteServer, did: Any = None, *_: Any) -> bool:
    return isinstance(did, str) and ls.session.next_edits.accepted(did)


def hover(ls: SynConfRouteServer, params: t.HoverParams) -> t.Hover | None:
    card = ls.session.hover(params.text_document.uri, params.position.line)
    if card is None:
        return None
    caps = ls.client_capabilities.text_document
    formats = caps.hover.content_format if caps and caps.hover else None
    return t.Hover(contents=_markup(card, formats))


def accept(ls: SynConfRouteServer, did: Any = None, *_: Any) -> bool:
    # pygls passes the command's arguments as positional parameters
    return isinstance(did, str) and ls.session.accept(did)


def toggle_local_only(ls: SynConfRouteServer, *_: Any) -> bool:
    on = ls.session.toggle_local_only()
    _show(
        ls,
        "info",
        f"synconfroute: local-only {'ON: nothing leaves this machine' if on else 'off'}",
    )
    return on


def status(ls: SynConfRouteServer, *_: Any) -> dict[str, Any]:
    st = ls.session.status()
    deploy = ls.session.deployment_status()
    routes = st.routes
    _show(
        ls,
        "info",
        f"synconfroute: local {st.local}; remote {st.remote}; "
        f"local-only {'on' if st.local_only else 'off'}; "
        f"{st.completions} completions ({routes['local']} local, "
        f"{routes['remote']} remote, {routes['none']} none); "
        f"threshold {st.threshold:.2f}"
        + (f" (adaptive: {st.adaptive['why']})" if st.adaptive else "")
        + _index_words(st.workspace)
        + "".join(f"; {line}" for line in deploy["lines"]),
    )
    return {**st.to_json(), **{k: v for k, v in deploy.items() if k != "lines"}}


def _index_words(figures: dict[str, object] | None) -> str:
    if figures is None:
        return ""
    words = f"; workspace index {figures['files']} files"
    if figures.get("special"):
        words += f", {figures['special']} special files skipped unread (FIFOs, devices)"
    return words


async def shutdown(ls: SynConfRouteServer, params: None) -> None:
    await ls.session.shutdown()


def _workspace_roots(ls: LanguageServer) -> list[str]:
    """The URIs of the workspace folders open now (pygls keeps them current through
    didChangeWorkspaceFolders); the root URI only for clients that never sent folders
    (once the client manages folders, the initial root is not a root)."""
    try:
        ws = ls.workspace
    except RuntimeError:  # before initialize
        return []
    uris = [f.uri for f in ws.folders.values()]
    if not getattr(ls, "folders_managed", False) and ws.root_uri and ws.root_uri not in uris:
        uris.append(ws.root_uri)
    return uris


def _folders(ls: SynConfRouteServer) -> list[tuple[str, str]]:
    """(URI, path) of each workspace folder open now (file URIs only)."""
    return [(u, path_of(u)) for u in _workspace_roots(ls) if u.startswith("file:")]


async def _watch_files(ls: SynConfRouteServer) -> None:
    """Ask the client for file change events (for the workspace index: only with
    completion.context = "workspace"), where it supports registering them dynamically."""
    if ls.watching or ls.session.settings.completion.context != "workspace":
        return
    caps = ls.client_capabilities.workspace
    watched = caps.did_change_watched_files if caps is not None else None
    if watched is None or not watched.dynamic_registration:
        return
    ls.watching = True
    exts = sorted({e.lstrip(".") for s in LANGUAGES.values() for e in s.extensions})
    watcher = t.FileSystemWatcher(glob_pattern="**/*.{" + ",".join(exts) + "}")
    try:
        await ls.client_register_capability_async(
            t.RegistrationParams(
                [
                    t.Registration(
                        id="synconfroute-watched-files",
                        method=t.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                        register_options=t.DidChangeWatchedFilesRegistrationOptions([watcher]),
                    )
                ]
            )
        )
    except Exception as exc:  # the index then follows open documents only
        log.info("could not register for file change events: %s", exc)


async def _pull_configuration(ls: SynConfRouteServer) -> None:
    caps = ls.client_capabilities.workspace
    if caps is None or not caps.configuration:
        return
    # The window's scope, then each folder's own (VS Code answers an item without a
    # scopeUri from the window's scope only: a folder's settings need its scopeUri).
    folders = _folders(ls) if ls.folders_managed else []
    items = [t.ConfigurationItem(section=SECTION)]
    items += [t.ConfigurationItem(scope_uri=uri, section=SECTION) for uri, _ in folders]
    try:
        result = await ls.workspace_configuration_async(t.ConfigurationParams(items=items))
    except Exception as exc:  # a client that fails the request must not stop us
        log.warning("workspace/configuration failed: %s; no workspace settings apply", exc)
        ls.session.apply_overrides(workspace={})
        return  # the folders' settings stay unknown: their files stay local
    result = list(result or [])
    pulled = _options(result[0]) if result else None
    issues = ls.session.apply_overrides(workspace=pulled or {})
    for i, (_, path) in enumerate(folders, start=1):
        if i < len(result):
            issues += ls.session.apply_folder_configuration(path, _options(result[i]) or {})
    _report_issues(ls, list({str(i): i for i in issues}.values()))


def _doc_formats(ls: LanguageServer) -> Any:
    caps = ls.client_capabilities.text_document
    item = caps.completion.completion_item if caps and caps.completion else None
    return item.documentation_format if item else None


def _markup(markdown: str, formats: Any) -> t.MarkupContent | str:
    """Markdown where the client says it renders it; else the same text, plain (as
    MarkupContent if the client names plaintext, as a bare string if it names nothing)."""
    kind, text = _markup_parts(markdown, formats)
    return text if kind is None else t.MarkupContent(kind, text)


def _markup_parts(markdown: str, formats: Any) -> tuple[t.MarkupKind | None, str]:
    if formats and t.MarkupKind.Markdown in formats:
        return t.MarkupKind.Markdown, markdown
    plain = markdown.replace("**", "").replace("`", "")
    if formats and t.MarkupKind.PlainText in formats:
        return t.MarkupKind.PlainText, plain
    return None, plain


def _notify_route(
    ls: SynConfRouteServer, uri: str, done: Completed, *, kind: str = "completion"
) -> None:
    """The route of a completion (or, `kind` "next-edit", of a next-edit suggestion) as
    data (status bars, accept commands): sent right after the response (building it,
    the route card above all, is ~150 µs the user need not wait for; clients keep routes
    by `id` until the completion is taken)."""
    rec = done.decision
    kind_of_card, text = _markup_parts(route_card(rec), _hover_formats(ls))
    card = text if kind_of_card is None else {"kind": kind_of_card.value, "value": text}
    params = {
        "uri": uri,
        "id": done.id,  # the argument of synconfroute.accept
        "route": rec.route,
        "reasons": list(rec.reasons),
        "confidence": rec.confidence,
        "threshold": rec.threshold,
        "cacheHit": rec.cache_hit,
        "summary": done.title,
        "card": card,  # as the hover shows it: Markdown or plain text
        "range": {
            "start": {"line": done.start[0], "character": done.start[1]},
            "end": {"line": done.end[0], "character": done.end[1]},
        },
        **({"kind": kind} if kind != "completion" else {}),
    }
    protocol = ls.protocol
    if isinstance(protocol, TransportProtocol):
        protocol.send_notification_data(ROUTE_NOTIFICATION, params)
    else:
        protocol.notify(ROUTE_NOTIFICATION, params)


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
    ls.session.docs.diagnostics_published(uri)
