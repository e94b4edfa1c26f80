import assert from "node:assert/strict";
import { test } from "node:test";
import { Lookup, resolveServerCommand } from "../serverCommand";

function lookup(files: string[], over: Partial<Lookup> = {}): Lookup {
  return {
    serverPath: "",
    venv: "",
    platform: "linux",
    pathEnv: "/usr/local/bin:/usr/bin",
    home: "/home/dev",
    isFile: (p) => files.includes(p),
    ...over,
  };
}

test("the path setting wins, with ~ expanded", () => {
  const r = resolveServerCommand(
    lookup(["/home/dev/sr/.venv/bin/synconfroute", "/usr/bin/synconfroute"], {
      serverPath: "~/sr/.venv/bin/synconfroute",
    }),
  );
  assert.deepEqual(r, { command: "/home/dev/sr/.venv/bin/synconfroute", args: ["serve"] });
});

test("a path setting that does not exist is an error naming it", () => {
  const r = resolveServerCommand(lookup(["/usr/bin/synconfroute"], { serverPath: "/nope/x" }));
  assert.ok("error" in r && r.error.includes('"/nope/x"') && r.error.includes("synconfroute.server.path"));
});

test("a virtual environment: its bin/synconfroute", () => {
  const r = resolveServerCommand(lookup(["/home/dev/sr/.venv/bin/synconfroute"], { venv: "~/sr/.venv" }));
  assert.deepEqual(r, { command: "/home/dev/sr/.venv/bin/synconfroute", args: ["serve"] });
  const missing = resolveServerCommand(lookup([], { venv: "/opt/venv" }));
  assert.ok("error" in missing && missing.error.includes("/opt/venv/bin"));
});

test("Windows virtual environments use Scripts\\synconfroute.exe", () => {
  const r = resolveServerCommand(
    lookup(["C:\\sr\\.venv\\Scripts\\synconfroute.exe"], { platform: "win32", venv: "C:\\sr\\.venv" }),
  );
  assert.deepEqual(r, { command: "C:\\sr\\.venv\\Scripts\\synconfroute.exe", args: ["serve"] });
});

test("else the first synconfroute on PATH", () => {
  const r = resolveServerCommand(lookup(["/usr/bin/synconfroute"]));
  assert.deepEqual(r, { command: "/usr/bin/synconfroute", args: ["serve"] });
});

test("nowhere: an error telling what to set", () => {
  const r = resolveServerCommand(lookup([]));
  assert.ok("error" in r);
  assert.match(r.error, /not on PATH/);
  assert.match(r.error, /synconfroute\.server\.venv/);
});
