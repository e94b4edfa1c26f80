// Next-edit suggestions in the editor: the command asks the server for the edit after this
// one (`textDocument/copilotInlineEdit`), and the inline completions of our documents offer
// it, piece by piece, as InlineCompletionItems with a replacing range (nextEdit.ts says why
// pieces). Accepting the last piece runs the edit's command: the server's ledger records
// the acceptance.
import * as vscode from "vscode";
import { ExecuteCommandRequest, LanguageClient, State } from "vscode-languageclient/node";
import { NEXT_EDIT_STEP } from "./ids";
import {
  DID_SHOW_INLINE_EDIT,
  INLINE_EDIT_REQUEST,
  NextEditOffer,
  Piece,
  Range,
  firstEdit,
  showsAsGhostText,
  splitEdit,
  wholeLines,
} from "./nextEdit";

type Next = (
  document: vscode.TextDocument,
  position: vscode.Position,
  context: vscode.InlineCompletionContext,
  token: vscode.CancellationToken,
) => vscode.ProviderResult<vscode.InlineCompletionItem[] | vscode.InlineCompletionList>;

function toRange(r: Range): vscode.Range {
  return new vscode.Range(r.start.line, r.start.character, r.end.line, r.end.character);
}

function textAt(document: vscode.TextDocument): (r: Range) => string {
  return (r) => document.getText(toRange(r)).replace(/\r\n/g, "\n");
}

export class NextEditView {
  private offer: NextEditOffer | undefined;
  private ids = 0;
  // The lines of the pieces after the one shown, with the text they will read, in the
  // ghost text's colour: the whole suggestion is in view while one piece is offered.
  private laterType: vscode.TextEditorDecorationType | undefined;

  constructor(
    private readonly client: () => LanguageClient | undefined,
    private readonly log: (line: string) => void,
  ) {}

  /** SynConfRoute: Suggest Next Edit, at the cursor of the focused editor. */
  async suggest(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const c = this.client();
    if (editor === undefined) {
      return;
    }
    if (c === undefined || c.state !== State.Running) {
      void vscode.window.showWarningMessage("SynConfRoute: the server is not running.");
      return;
    }
    this.drop();
    const doc = editor.document;
    const version = doc.version;
    const c2p = c.code2ProtocolConverter;
    let result: unknown;
    try {
      result = await c.sendRequest(INLINE_EDIT_REQUEST, {
        textDocument: { uri: c2p.asUri(doc.uri), version },
        position: c2p.asPosition(editor.selection.active),
      });
    } catch (err) {
      this.log(`next edit: the server answered an error: ${String(err)}`);
      void vscode.window.showWarningMessage(`SynConfRoute: no next edit (${String(err)}).`);
      return;
    }
    const edit = firstEdit(result);
    if (edit === undefined || doc.version !== version || doc.isClosed) {
      vscode.window.setStatusBarMessage("SynConfRoute: no next edit here", 4000);
      return;
    }
    const whole = wholeLines(edit, (n) => doc.lineAt(n).text);
    const pieces = splitEdit(whole.range, whole.oldText, whole.newText);
    if (pieces.length === 0) {
      vscode.window.setStatusBarMessage("SynConfRoute: no next edit here", 4000);
      return;
    }
    this.offer = new NextEditOffer(++this.ids, doc.uri.toString(), edit, pieces);
    this.log(
      `next edit: lines ${edit.range.start.line + 1}-${edit.range.end.line + 1}, ` +
        `${pieces.length} piece(s)`,
    );
    await this.showNext(this.offer.id);
  }

  /** A piece was accepted (its item's command), or the suggestion starts: put the cursor
   * at the next piece and ask VS Code for inline completions there; after the last
   * piece, accept the suggestion. */
  async showNext(id: number): Promise<void> {
    const offer = this.offer;
    const editor = vscode.window.activeTextEditor;
    if (offer === undefined || offer.id !== id || editor?.document.uri.toString() !== offer.uri) {
      return;
    }
    const step = offer.step(textAt(editor.document));
    if (step.kind === "stale") {
      this.drop();
      return;
    }
    if (step.kind === "done") {
      this.drop();
      await this.accept(offer);
      return;
    }
    if (!showsAsGhostText(step.piece)) {
      this.drop(offer); // the message shows the rest
      await this.askToReplace(editor, offer, step.piece);
      return;
    }
    this.showLater(editor, offer.pieces.slice(step.index + 1));
    const at = toRange(step.piece.range).start;
    editor.selection = new vscode.Selection(at, at);
    const where = vscode.TextEditorRevealType.InCenterIfOutsideViewport;
    editor.revealRange(toRange(step.piece.range), where);
    await vscode.commands.executeCommand("editor.action.inlineSuggest.trigger");
  }

  /** The language client's inline-completion middleware: while a suggestion is offered
   * in this document, its piece on the cursor's line is the only item (no completion
   * request competes with it); otherwise the completion path, unchanged. */
  provide(
    document: vscode.TextDocument,
    position: vscode.Position,
    context: vscode.InlineCompletionContext,
    token: vscode.CancellationToken,
    next: Next,
  ): vscode.ProviderResult<vscode.InlineCompletionItem[] | vscode.InlineCompletionList> {
    const offer = this.offer;
    if (offer === undefined || offer.uri !== document.uri.toString()) {
      return next(document, position, context, token);
    }
    const step = offer.step(textAt(document));
    if (step.kind !== "piece") {
      if (step.kind === "stale") {
        this.drop();
        return next(document, position, context, token);
      }
      return []; // done: the step command accepts it
    }
    const p = step.piece;
    if (position.line !== p.range.start.line) {
      return [];
    }
    const item = new vscode.InlineCompletionItem(p.newText, toRange(p.range), {
      title: "SynConfRoute: next edit, accepted",
      command: NEXT_EDIT_STEP,
      arguments: [offer.id],
    });
    this.tellShown(offer);
    return [item];
  }

  /** The user moved the cursor (keys, mouse) off the piece's line: the suggestion goes. */
  selectionChanged(e: vscode.TextEditorSelectionChangeEvent): void {
    const offer = this.offer;
    const user =
      e.kind === vscode.TextEditorSelectionChangeKind.Keyboard ||
      e.kind === vscode.TextEditorSelectionChangeKind.Mouse;
    if (offer === undefined || !user || e.textEditor.document.uri.toString() !== offer.uri) {
      return;
    }
    const step = offer.step(textAt(e.textEditor.document));
    if (step.kind !== "piece" || e.selections[0].active.line !== step.piece.range.start.line) {
      this.drop();
    }
  }

  /** The suggestion goes (all of it, or only its decorations when `keep` stays). */
  drop(keep?: NextEditOffer): void {
    this.offer = keep;
    if (this.laterType !== undefined) {
      for (const e of vscode.window.visibleTextEditors) {
        e.setDecorations(this.laterType, []);
      }
    }
  }

  dispose(): void {
    this.drop();
    this.laterType?.dispose();
  }

  private showLater(editor: vscode.TextEditor, pieces: Piece[]): void {
    this.laterType ??= vscode.window.createTextEditorDecorationType({
      after: {
        color: new vscode.ThemeColor("editorGhostText.foreground"),
        fontStyle: "italic",
        margin: "0 0 0 2em",
      },
    });
    const marks = pieces.map((p) => {
      const end = editor.document.lineAt(p.range.start.line).range.end;
      return {
        range: new vscode.Range(end, end), // its span: the whole line, as it will read
        renderOptions: { after: { contentText: `→ ${p.span.newText.trim()}` } },
      };
    });
    editor.setDecorations(this.laterType, marks);
  }

  /** VS Code's stable API tells an extension nothing when it shows an item: the
   * suggestion counts as shown when its first piece is handed to VS Code to show. */
  private tellShown(offer: NextEditOffer): void {
    const c = this.client();
    if (offer.shown || c === undefined || c.state !== State.Running) {
      return;
    }
    offer.shown = true;
    void c.sendNotification(DID_SHOW_INLINE_EDIT, { item: offer.edit }).catch(() => undefined);
  }

  private async accept(offer: NextEditOffer): Promise<void> {
    const c = this.client();
    const cmd = offer.edit.command;
    if (offer.accepted || cmd === undefined || c === undefined || c.state !== State.Running) {
      return;
    }
    offer.accepted = true;
    try {
      await c.sendRequest(ExecuteCommandRequest.type, {
        command: cmd.command,
        arguments: cmd.arguments ?? [],
      });
    } catch (err) {
      this.log(`next edit: the server did not take the acceptance: ${String(err)}`);
    }
  }

  /** A piece VS Code's ghost text cannot draw (it deletes characters): say it in a
   * message; Apply makes the rest of the edit at once. */
  private async askToReplace(
    editor: vscode.TextEditor,
    offer: NextEditOffer,
    piece: Piece,
  ): Promise<void> {
    this.tellShown(offer);
    const line = piece.range.start.line + 1;
    const choice = await vscode.window.showInformationMessage(
      `SynConfRoute next edit, line ${line}: "${piece.oldText}" → "${piece.newText}"`,
      "Apply",
      "Dismiss",
    );
    if (choice !== "Apply" || this.offer !== offer) {
      if (this.offer === offer) {
        this.drop();
      }
      return;
    }
    const step = offer.step(textAt(editor.document));
    if (step.kind !== "piece") {
      this.drop();
      return;
    }
    const rest = offer.pieces.slice(step.index);
    const done = await editor.edit((b) => {
      for (const p of rest) {
        b.replace(toRange(p.range), p.newText);
      }
    });
    this.drop();
    if (done) {
      await this.accept(offer);
    }
  }
}
