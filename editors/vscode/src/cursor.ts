// Where the cursor rests, for the server (`synconfroute/cursor`): it evaluates the local
// model's prompt for that position in the background, so the next completion there starts
// warm. No `vscode` import: unit-tested under plain node.

/** The method of the client's notification (server/protocol/lsp.py `cursor`). */
export const CURSOR_NOTIFICATION = "synconfroute/cursor";

/** How long the cursor must rest before it is reported: moving through a file (arrow
 * keys, scrolling, typing) reports nothing on the way. */
export const CURSOR_REST_MS = 150;

export interface Position {
  line: number;
  character: number;
}

/** The notification's parameters. */
export interface CursorParams {
  textDocument: { uri: string };
  position: Position;
}

/** setTimeout / clearTimeout, injectable for tests. */
export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const REAL_TIMERS: Timers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** Debounces cursor moves into one report once the cursor rests; the same place in the
 * same version of a document is reported once. */
export class CursorReporter {
  private pending: { params: CursorParams; key: string } | undefined;
  private handle: unknown;
  private lastKey: string | undefined;

  constructor(
    private readonly send: (params: CursorParams) => void,
    private readonly restMs: number = CURSOR_REST_MS,
    private readonly timers: Timers = REAL_TIMERS,
  ) {}

  /** The cursor of the focused editor is at `position` of `uri` (its `version`). */
  moved(uri: string, version: number, position: Position): void {
    const key = `${uri}\n${version}\n${position.line}:${position.character}`;
    this.cancel();
    if (key === this.lastKey) {
      return;
    }
    this.pending = { params: { textDocument: { uri }, position }, key };
    this.handle = this.timers.set(() => this.fire(), this.restMs);
  }

  /** Nothing to report (the server stopped). */
  cancel(): void {
    if (this.handle !== undefined) {
      this.timers.clear(this.handle);
      this.handle = undefined;
    }
    this.pending = undefined;
  }

  /** A new server knows nothing: report the next position even if it is the same. */
  reset(): void {
    this.cancel();
    this.lastKey = undefined;
  }

  private fire(): void {
    const p = this.pending;
    this.handle = undefined;
    this.pending = undefined;
    if (p !== undefined) {
      this.lastKey = p.key;
      this.send(p.params);
    }
  }
}
