// Next-edit suggestions for VS Code: the server's `textDocument/copilotInlineEdit` answer
// cut into the pieces VS Code's stable inline-completion API can show. No `vscode` import:
// unit-tested under plain node (nextEditView.ts is the VS Code side).
//
// VS Code (1.100) shows a stable-API InlineCompletionItem only as ghost text: a replacing
// range on the cursor's line whose new text only adds characters to the old. The server
// sends one edit, the smallest range covering every change (a rename on two lines is one
// range over both), so the edit is offered one line at a time: each line's change is an
// item whose range replaces that line's changed span, the cursor is put at its start, and
// accepting it moves on to the next; accepting the last one accepts the suggestion.

/** The server's request and notification (server/protocol/lsp.py). */
export const INLINE_EDIT_REQUEST = "textDocument/copilotInlineEdit";
export const DID_SHOW_INLINE_EDIT = "textDocument/didShowInlineEdit";

export interface Position {
  line: number;
  character: number;
}

export interface Range {
  start: Position;
  end: Position;
}

export interface ServerCommand {
  title?: string;
  command: string;
  arguments?: unknown[];
}

/** One entry of the response's `edits`. */
export interface InlineEdit {
  text: string;
  range: Range;
  textDocument: { uri: string; version: number };
  command?: ServerCommand;
}

/** A part of the edit: `oldText` at `range` becomes `newText`. `span` is the text
 * around it that the edit covers (its line's part of the edit's range, or the whole
 * range), before and after: what tells whether the piece is still to do. */
export interface Piece {
  range: Range;
  oldText: string;
  newText: string;
  span: { start: Position; oldText: string; newText: string };
}

function isPosition(p: unknown): p is Position {
  const q = p as Position | null;
  return (
    typeof q === "object" &&
    q !== null &&
    Number.isInteger(q.line) &&
    Number.isInteger(q.character) &&
    q.line >= 0 &&
    q.character >= 0
  );
}

/** The first edit of a `copilotInlineEdit` result, or undefined (none, or malformed). */
export function firstEdit(result: unknown): InlineEdit | undefined {
  const edits = (result as { edits?: unknown } | null)?.edits;
  const e = Array.isArray(edits) ? (edits[0] as InlineEdit | undefined) : undefined;
  if (
    e === undefined ||
    typeof e !== "object" ||
    typeof e.text !== "string" ||
    !isPosition(e.range?.start) ||
    !isPosition(e.range?.end) ||
    typeof e.textDocument?.uri !== "string" ||
    !Number.isInteger(e.textDocument?.version)
  ) {
    return undefined;
  }
  return e;
}

/** Where `text` ends when it is written from `start`. */
export function advance(start: Position, text: string): Position {
  const lines = text.split("\n");
  return lines.length === 1
    ? { line: start.line, character: start.character + text.length }
    : { line: start.line + lines.length - 1, character: lines[lines.length - 1].length };
}

function commonPrefix(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) {
    i++;
  }
  return i;
}

function commonSuffix(a: string, b: string, max: number): number {
  let i = 0;
  while (i < max && a[a.length - 1 - i] === b[b.length - 1 - i]) {
    i++;
  }
  return i;
}

/** `oldText` at `start` replaced by `newText`, trimmed to what differs. */
function trimmed(start: Position, oldText: string, newText: string): Piece {
  const p = commonPrefix(oldText, newText);
  const s = commonSuffix(oldText, newText, Math.min(oldText.length, newText.length) - p);
  const head = oldText.slice(0, p);
  return {
    span: { start, oldText, newText },
    range: {
      start: advance(start, head),
      end: advance(start, oldText.slice(0, oldText.length - s)),
    },
    oldText: oldText.slice(p, oldText.length - s),
    newText: newText.slice(p, newText.length - s),
  };
}

/** The edit widened to the whole lines it touches (`lineAt(n)`: line n's text), so
 * that each piece's span is a whole line. */
export function wholeLines(
  edit: { range: Range; text: string },
  lineAt: (line: number) => string,
): { range: Range; oldText: string; newText: string } {
  const { start, end } = edit.range;
  const lines: string[] = [];
  for (let n = start.line; n <= end.line; n++) {
    lines.push(lineAt(n));
  }
  const last = lines[lines.length - 1];
  const prefix = lines[0].slice(0, start.character);
  return {
    range: {
      start: { line: start.line, character: 0 },
      end: { line: end.line, character: last.length },
    },
    oldText: lines.join("\n"),
    newText: prefix + edit.text + last.slice(end.character),
  };
}

/** The edit (`range`, whose text in the document is `oldText`, becomes `newText`) as
 * pieces in document order: one per changed line when the edit keeps the number of
 * lines, else one for the whole edit. Nothing when it changes nothing. */
export function splitEdit(range: Range, oldText: string, newText: string): Piece[] {
  const olds = oldText.replace(/\r\n/g, "\n").split("\n");
  const news = newText.replace(/\r\n/g, "\n").split("\n");
  if (olds.length !== news.length) {
    return [trimmed(range.start, olds.join("\n"), news.join("\n"))];
  }
  const pieces: Piece[] = [];
  olds.forEach((old, i) => {
    if (old !== news[i]) {
      const start = { line: range.start.line + i, character: i === 0 ? range.start.character : 0 };
      pieces.push(trimmed(start, old, news[i]));
    }
  });
  return pieces;
}

function isSubsequence(small: string, big: string): boolean {
  let j = 0;
  for (let i = 0; i < big.length && j < small.length; i++) {
    if (big[i] === small[j]) {
      j++;
    }
  }
  return j === small.length;
}

/** Whether VS Code's stable API shows the piece as ghost text with the cursor at its
 * start: one line, and the new text only adds characters to the old (VS Code draws
 * insertions, never deletions), or an insertion (of one or more lines) at one point. */
export function showsAsGhostText(p: Piece): boolean {
  if (p.oldText === "") {
    return true;
  }
  return p.range.start.line === p.range.end.line && isSubsequence(p.oldText, p.newText);
}

/** What to do next with a suggestion, given the document's text now. */
export type Step =
  | { kind: "piece"; index: number; piece: Piece } // offer this piece
  | { kind: "done" } // every piece is in the document: accepted
  | { kind: "stale" }; // the text around the edit changed otherwise: drop it

/** A suggestion being offered, piece by piece. */
export class NextEditOffer {
  /** didShowInlineEdit sent. */
  shown = false;
  /** The server's command run (the suggestion accepted). */
  accepted = false;

  constructor(
    readonly id: number,
    readonly uri: string,
    readonly edit: InlineEdit,
    readonly pieces: Piece[],
  ) {}

  /** The first piece not yet in the document, judged by the text at each piece
   * (`textAt(range)`): the pieces read their new text up to it, their old text from it
   * on. Pieces are on distinct lines that no piece adds or removes (or there is one
   * piece), so applying one moves no other. */
  step(textAt: (r: Range) => string): Step {
    let next = -1;
    for (let i = 0; i < this.pieces.length; i++) {
      const state = pieceState(this.pieces[i], textAt);
      if (state === "pending" && next === -1) {
        next = i;
      } else if (state !== (next === -1 ? "applied" : "pending")) {
        return { kind: "stale" };
      }
    }
    if (next === -1) {
      return { kind: "done" };
    }
    return { kind: "piece", index: next, piece: this.pieces[next] };
  }
}

/** Whether the document reads the piece's span as it was ("pending"), as the edit makes
 * it ("applied"), or neither. When it reads both (one text begins with the other), the
 * longer one decides. */
export function pieceState(
  p: Piece,
  textAt: (r: Range) => string,
): "pending" | "applied" | "other" {
  const { start, oldText, newText } = p.span;
  const reads = (text: string) => textAt({ start, end: advance(start, text) }) === text;
  const pending = reads(oldText);
  const applied = reads(newText);
  if (pending && applied) {
    return newText.length > oldText.length ? "applied" : "pending";
  }
  return pending ? "pending" : applied ? "applied" : "other";
}
