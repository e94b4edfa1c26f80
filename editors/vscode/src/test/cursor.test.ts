import assert from "node:assert/strict";
import { test } from "node:test";
import { CursorParams, CursorReporter, Timers } from "../cursor";

/** Timers that run when the test says so. */
class Clock implements Timers {
  now = 0;
  private queue: { at: number; fn: () => void; id: number }[] = [];
  private next = 0;
  set(fn: () => void, ms: number): unknown {
    const id = this.next++;
    this.queue.push({ at: this.now + ms, fn, id });
    return id;
  }
  clear(handle: unknown): void {
    this.queue = this.queue.filter((t) => t.id !== handle);
  }
  advance(ms: number): void {
    this.now += ms;
    const due = this.queue.filter((t) => t.at <= this.now);
    this.queue = this.queue.filter((t) => t.at > this.now);
    due.forEach((t) => t.fn());
  }
}

function reporter(): { clock: Clock; sent: CursorParams[]; r: CursorReporter } {
  const clock = new Clock();
  const sent: CursorParams[] = [];
  return { clock, sent, r: new CursorReporter((p) => sent.push(p), 150, clock) };
}

const URI = "file:///p/calc.py";

test("the cursor is reported once it has rested, not on the way", () => {
  const { clock, sent, r } = reporter();
  for (let line = 0; line < 10; line++) {
    r.moved(URI, 1, { line, character: 0 }); // arrow keys: 50 ms apart
    clock.advance(50);
  }
  assert.equal(sent.length, 0);
  clock.advance(100);
  assert.deepEqual(sent, [{ textDocument: { uri: URI }, position: { line: 9, character: 0 } }]);
});

test("the same place in the same version is reported once; an edit there again", () => {
  const { clock, sent, r } = reporter();
  r.moved(URI, 1, { line: 3, character: 4 });
  clock.advance(150);
  r.moved(URI, 1, { line: 3, character: 4 }); // focus back to the same editor
  clock.advance(150);
  assert.equal(sent.length, 1);
  r.moved(URI, 2, { line: 3, character: 4 }); // the text changed
  clock.advance(150);
  assert.equal(sent.length, 2);
});

test("cancel drops a pending report; reset forgets what the old server was told", () => {
  const { clock, sent, r } = reporter();
  r.moved(URI, 1, { line: 1, character: 0 });
  r.cancel(); // e.g. the server stopped
  clock.advance(500);
  assert.equal(sent.length, 0);
  r.moved(URI, 1, { line: 1, character: 0 });
  clock.advance(150);
  r.reset(); // the server restarted
  r.moved(URI, 1, { line: 1, character: 0 });
  clock.advance(150);
  assert.equal(sent.length, 2);
});
