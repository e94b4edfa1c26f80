import assert from "node:assert/strict";
import { test } from "node:test";
import {
  InlineEdit,
  NextEditOffer,
  Piece,
  Range,
  advance,
  firstEdit,
  pieceState,
  wholeLines,
  showsAsGhostText,
  splitEdit,
} from "../nextEdit";

const BEFORE = [
  "def price(items):",
  "    subtotal = 0",
  "    for item in items:",
  "        total += item.cost",
  "    return total",
];

/** A document of `lines`, as `textAt` reads it. */
class Doc {
  constructor(public lines: string[]) {}
  offset(p: { line: number; character: number }): number {
    let o = 0;
    for (let i = 0; i < p.line; i++) {
      o += this.lines[i].length + 1;
    }
    return o + p.character;
  }
  textAt = (r: Range): string =>
    this.lines.join("\n").slice(this.offset(r.start), this.offset(r.end));
  apply(r: Range, text: string): void {
    const all = this.lines.join("\n");
    const [a, b] = [this.offset(r.start), this.offset(r.end)];
    this.lines = (all.slice(0, a) + text + all.slice(b)).split("\n");
  }
}

/** The pieces without their spans. */
function bare(pieces: Piece[]): Omit<Piece, "span">[] {
  return pieces.map(({ range, oldText, newText }) => ({ range, oldText, newText }));
}

// The server's edit for the rename: the smallest range covering both changes (from the
// first insertion to the second).
const EDIT: InlineEdit = {
  text: "subtotal += item.cost\n    return sub",
  range: { start: { line: 3, character: 8 }, end: { line: 4, character: 11 } },
  textDocument: { uri: "file:///p/shop.py", version: 7 },
  command: { title: "t", command: "synconfroute.acceptNextEdit", arguments: ["n1"] },
};

/** The pieces of EDIT in `doc`, as the extension cuts them (whole lines first). */
function piecesOf(doc: Doc): Piece[] {
  const whole = wholeLines(EDIT, (n) => doc.lines[n]);
  return splitEdit(whole.range, whole.oldText, whole.newText);
}

test("the edit widened to whole lines", () => {
  assert.deepEqual(
    wholeLines(EDIT, (n) => BEFORE[n]),
    {
      range: { start: { line: 3, character: 0 }, end: { line: 4, character: 16 } },
      oldText: "        total += item.cost\n    return total",
      newText: "        subtotal += item.cost\n    return subtotal",
    },
  );
});

test("a two-line rename becomes one insertion per line, each shown as ghost text", () => {
  const doc = new Doc([...BEFORE]);
  const pieces = piecesOf(doc);
  assert.deepEqual(bare(pieces), [
    {
      range: { start: { line: 3, character: 8 }, end: { line: 3, character: 8 } },
      oldText: "",
      newText: "sub",
    },
    {
      range: { start: { line: 4, character: 11 }, end: { line: 4, character: 11 } },
      oldText: "",
      newText: "sub",
    },
  ]);
  assert.ok(pieces.every(showsAsGhostText));
  // Each piece knows its line's part of the edit, before and after.
  assert.deepEqual(pieces[1].span, {
    start: { line: 4, character: 0 },
    oldText: "    return total",
    newText: "    return subtotal",
  });
});

test("the offer walks the pieces as they are applied, then is done", () => {
  const doc = new Doc([...BEFORE]);
  const offer = new NextEditOffer(1, EDIT.textDocument.uri, EDIT, piecesOf(doc));
  let step = offer.step(doc.textAt);
  assert.equal(step.kind === "piece" && step.index, 0);
  doc.apply(offer.pieces[0].range, "sub");
  step = offer.step(doc.textAt);
  assert.equal(step.kind === "piece" && step.index, 1);
  doc.apply(offer.pieces[1].range, "sub");
  assert.deepEqual(offer.step(doc.textAt), { kind: "done" });
  assert.deepEqual(doc.lines.slice(3), ["        subtotal += item.cost", "    return subtotal"]);
});

test("an offer whose text was changed otherwise is stale", () => {
  const doc = new Doc([...BEFORE]);
  const offer = new NextEditOffer(1, "u", EDIT, piecesOf(doc));
  doc.apply(offer.pieces[0].range, "sub");
  doc.lines[4] = "    return 0"; // the user rewrote the line of the next piece
  assert.deepEqual(offer.step(doc.textAt), { kind: "stale" });
});

test("a replacement that deletes characters is not ghost text; one that only adds is", () => {
  const [sum] = splitEdit(
    { start: { line: 0, character: 4 }, end: { line: 0, character: 9 } },
    "total",
    "sum",
  );
  assert.deepEqual(bare([sum])[0], {
    range: { start: { line: 0, character: 4 }, end: { line: 0, character: 9 } },
    oldText: "total",
    newText: "sum",
  });
  assert.equal(showsAsGhostText(sum), false);
  const [spaced] = splitEdit(
    { start: { line: 2, character: 0 }, end: { line: 2, character: 5 } },
    "a+b+c",
    "a + b + c",
  );
  assert.equal(spaced.oldText, "+b+");
  assert.ok(showsAsGhostText(spaced));
});

test("an edit that adds lines is one piece; an insertion of lines is ghost text", () => {
  const pieces = splitEdit(
    { start: { line: 1, character: 0 }, end: { line: 1, character: 4 } },
    "    ",
    "    x = 1\n    ",
  );
  assert.deepEqual(bare(pieces), [
    {
      range: { start: { line: 1, character: 4 }, end: { line: 1, character: 4 } },
      oldText: "",
      newText: "x = 1\n    ",
    },
  ]);
  assert.ok(showsAsGhostText(pieces[0]));
  const [joined] = splitEdit(
    { start: { line: 0, character: 0 }, end: { line: 1, character: 3 } },
    "ab\ncd",
    "abXcd",
  );
  assert.equal(showsAsGhostText(joined), false); // a line break deleted
});

test("an answer that changes nothing gives no piece", () => {
  assert.deepEqual(splitEdit(EDIT.range, "x\ny", "x\ny"), []);
});

test("a deletion is pending until its text is gone", () => {
  const doc = new Doc(["a = 1  # old", "b = 2"]);
  const [del] = splitEdit(
    { start: { line: 0, character: 5 }, end: { line: 0, character: 12 } },
    "  # old",
    "",
  );
  assert.equal(pieceState(del, doc.textAt), "pending");
  doc.apply(del.range, "");
  assert.equal(pieceState(del, doc.textAt), "applied");
});

test("firstEdit takes the first well-formed edit and refuses malformed answers", () => {
  assert.deepEqual(firstEdit({ edits: [EDIT] }), EDIT);
  assert.equal(firstEdit({ edits: [] }), undefined);
  assert.equal(firstEdit(null), undefined);
  assert.equal(firstEdit({ edits: [{ ...EDIT, range: { start: { line: -1 } } }] }), undefined);
  assert.equal(firstEdit({ edits: [{ ...EDIT, text: 3 }] }), undefined);
  assert.equal(firstEdit({ edits: [{ ...EDIT, textDocument: { uri: "u" } }] }), undefined);
});

test("advance follows the lines of a text", () => {
  assert.deepEqual(advance({ line: 2, character: 3 }, "ab"), { line: 2, character: 5 });
  assert.deepEqual(advance({ line: 2, character: 3 }, "ab\ncde\nf"), { line: 4, character: 1 });
});
