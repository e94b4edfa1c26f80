import assert from "node:assert/strict";
import { test } from "node:test";
import { ServerStatus, parseSummary, statusReport, statusText, statusTooltip } from "../status";

test("a local summary with its confidence", () => {
  const r = parseSummary("synconfroute: local (confident-and-valid, confidence -0.05)");
  assert.deepEqual(r, {
    route: "local",
    reasons: ["confident-and-valid"],
    confidence: -0.05,
    summary: "synconfroute: local (confident-and-valid, confidence -0.05)",
  });
  assert.equal(statusText(r, false), "$(device-desktop) local -0.05");
});

test("a remote summary with several reasons", () => {
  const r = parseSummary("synconfroute: remote (unconfident, syntax-invalid, confidence -1.23)");
  assert.equal(r?.route, "remote");
  assert.deepEqual(r?.reasons, ["unconfident", "syntax-invalid"]);
  assert.equal(r?.confidence, -1.23);
  assert.equal(statusText(r, false), "$(cloud-upload) remote -1.23");
});

test("no confidence (cache hit, no completion)", () => {
  const hit = parseSummary("synconfroute: local (cache-hit, confident-and-valid)");
  assert.equal(hit?.confidence, undefined);
  assert.equal(statusText(hit, false), "$(device-desktop) local");
  assert.match(statusTooltip(hit, false), /from the cache/);
  const none = parseSummary("synconfroute: none (local-error)");
  assert.equal(none?.route, "none");
  assert.equal(statusText(none, true), "$(lock) $(circle-slash) none");
});

test("anything else is not a route", () => {
  assert.equal(parseSummary(undefined), undefined);
  assert.equal(parseSummary(""), undefined);
  assert.equal(parseSummary("Accept"), undefined);
  assert.equal(parseSummary("synconfroute: sideways (x)"), undefined);
});

test("status bar before any completion, and local-only", () => {
  assert.equal(statusText(undefined, false), "$(sparkle) SynConfRoute");
  assert.equal(statusText(undefined, true), "$(lock) $(sparkle) SynConfRoute");
  assert.match(statusTooltip(undefined, true), /Local-only is ON: no code leaves this machine/);
  assert.match(statusTooltip(undefined, false), /no completion yet/);
});

test("the status report lists tiers, privacy and routes", () => {
  const st: ServerStatus = {
    local_only: false,
    local: "ollama at http://127.0.0.1:11434",
    remote: "http://gpu:8000/v1",
    policy: "synconf",
    threshold: -0.5,
    completions: 3,
    routes: { local: 2, remote: 1, none: 0 },
    accepted: 2,
    last: "synconfroute: remote (unconfident, confidence -1.20)",
  };
  assert.equal(
    statusReport(st),
    [
      "local tier: ollama at http://127.0.0.1:11434",
      "remote tier: http://gpu:8000/v1",
      "local-only: off",
      "policy: synconf, threshold -0.5",
      "completions: 3 (2 local, 1 remote, 0 none), 2 accepted",
      "last: synconfroute: remote (unconfident, confidence -1.20)",
    ].join("\n"),
  );
  assert.match(statusReport({ ...st, last: null, local_only: true }), /local-only: on .*\nlast: -$/s);
});
