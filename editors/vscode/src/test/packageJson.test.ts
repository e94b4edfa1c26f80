import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { COMMANDS, LANGUAGES } from "../ids";

const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf-8"));

test("every command the extension registers is contributed, with a title", () => {
  const contributed = new Map<string, string>(
    pkg.contributes.commands.map((c: { command: string; title: string }) => [c.command, c.title]),
  );
  for (const id of Object.values(COMMANDS)) {
    assert.ok(contributed.get(id), id);
  }
  // The server's own commands (synconfroute.accept, .status...) are the language client's.
  for (const id of contributed.keys()) {
    assert.ok(id.startsWith("synconfroute.client."), id);
  }
});

test("the extension activates for every language it serves", () => {
  assert.deepEqual(
    [...pkg.activationEvents].sort(),
    LANGUAGES.map((l) => `onLanguage:${l}`).sort(),
  );
});

test("the entry point is the compiled extension", () => {
  assert.equal(pkg.main, "./out/extension.js");
  assert.ok(fs.existsSync(path.join(__dirname, "..", "extension.js")));
});

test("settings carry a type, a default and documentation", () => {
  for (const [key, prop] of Object.entries<Record<string, unknown>>(
    pkg.contributes.configuration.properties,
  )) {
    assert.ok(key.startsWith("synconfroute."), key);
    assert.ok(typeof prop.type === "string", key);
    assert.ok("default" in prop, key);
    assert.ok(prop.markdownDescription || prop.description, key);
  }
});
