import assert from "node:assert/strict";
import { test } from "node:test";
import {
  ServerStatus,
  routeFromNotification,
  statusReport,
  statusText,
  statusTooltip,
} from "../status";

const LOCAL = {
  uri: "file:///p/calc.py",
  id: "c1",
  route: "local",
  reasons: ["confident-and-valid"],
  confidence: -0.05,
  threshold: -0.7,
  cacheHit: false,
  summary: "synconfroute: local (confident-and-valid, confidence -0.05)",
  card: { kind: "markdown", value: "**synconfroute**: local" },
  range: { start: { line: 1, character: 11 }, end: { line: 1, character: 11 } },
};

test("a local route with its confidence, from the notification's data", () => {
  const r = routeFromNotification(LOCAL);
  assert.deepEqual(r, {
    route: "local",
    reasons: ["confident-and-valid"],
    confidence: -0.05,
    cacheHit: false,
    summary: "synconfroute: local (confident-and-valid, confidence -0.05)",
  });
  assert.equal(statusText(r, false), "$(device-desktop) local -0.05");
});

test("a remote route with several reasons", () => {
  const r = routeFromNotification({
    ...LOCAL,
    route: "remote",
    reasons: ["unconfident", "syntax-invalid"],
    confidence: -1.23,
    summary: "whatever the server words it as", // not parsed: the fields are the data
  });
  assert.equal(r?.route, "remote");
  assert.deepEqual(r?.reasons, ["unconfident", "syntax-invalid"]);
  assert.equal(r?.confidence, -1.23);
  assert.equal(statusText(r, false), "$(cloud-upload) remote -1.23");
});

test("no confidence (cache hit, no completion)", () => {
  const hit = routeFromNotification({ ...LOCAL, confidence: null, cacheHit: true });
  assert.equal(hit?.confidence, undefined);
  assert.equal(statusText(hit, false), "$(device-desktop) local");
  assert.match(statusTooltip(hit, false), /from the cache/);
  const none = routeFromNotification({ ...LOCAL, route: "none", confidence: null });
  assert.equal(none?.route, "none");
  assert.equal(statusText(none, true), "$(lock) $(circle-slash) none");
});

test("anything else is not a route", () => {
  assert.equal(routeFromNotification(undefined), undefined);
  assert.equal(routeFromNotification(null), undefined);
  assert.equal(routeFromNotification("synconfroute: local (x)"), undefined);
  assert.equal(routeFromNotification({ ...LOCAL, route: "sideways" }), undefined);
  assert.equal(routeFromNotification({ ...LOCAL, summary: 3 }), undefined);
  const odd = routeFromNotification({ ...LOCAL, reasons: ["a", 1], confidence: "high" });
  assert.deepEqual(odd?.reasons, ["a"]);
  assert.equal(odd?.confidence, undefined);
});

test("status bar while the server starts, and when it is not running", () => {
  assert.equal(statusText(undefined, false, "starting"), "$(loading~spin) SynConfRoute");
  assert.match(statusTooltip(undefined, false, "starting"), /^SynConfRoute: starting the server/);
  const r = routeFromNotification(LOCAL);
  assert.equal(statusText(r, true, "stopped"), "$(lock) $(error) SynConfRoute");
  assert.match(statusTooltip(r, false, "stopped"), /the server is not running/);
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

test("the embedded worker's prompt reuse and prefills end the report", () => {
  const st: ServerStatus = {
    local_only: false,
    local: "embedded SmolLM2",
    remote: "none",
    policy: "synconf",
    threshold: -0.5,
    completions: 1,
    routes: { local: 1, remote: 0, none: 0 },
    accepted: 0,
    last: null,
    local_worker: { prompt_tokens: 300, cached_tokens: 290, prefills: 2 },
  };
  assert.match(
    statusReport(st),
    /\nlocal worker: 300 prompt tokens, 290 of them from the cache; 2 prefills$/,
  );
  assert.doesNotMatch(statusReport({ ...st, local_worker: null }), /local worker/);
});
