import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import {
  Inspected,
  SERVER_SECTIONS,
  explicitValue,
  serverKeys,
  toServerSettings,
  userOnlyKeys,
  userValue,
} from "../settings";

const packageJson = JSON.parse(
  fs.readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf-8"),
);
const properties: Record<string, { default: unknown }> =
  packageJson.contributes.configuration.properties;

test("server keys are the contributed settings of the server's sections", () => {
  const keys = serverKeys(properties);
  assert.ok(keys.includes("local.backend"));
  assert.ok(keys.includes("remote.url"));
  assert.ok(keys.includes("privacy.local_only"));
  assert.ok(keys.includes("editor.debounce_ms"));
  // The extension's own settings never reach the server.
  assert.ok(!keys.some((k) => k.startsWith("server.") || k.startsWith("trace.")));
  for (const key of keys) {
    assert.ok(SERVER_SECTIONS.includes(key.split(".")[0]), key);
  }
  assert.equal(keys.length, Object.keys(properties).length - 3);
});

test("only the values the user set are sent, nested by section", () => {
  const set: Record<string, Inspected> = {
    "local.backend": { globalValue: "ollama" },
    "remote.url": { globalValue: "http://a:8000/v1", workspaceValue: "http://b:8000/v1" },
    "privacy.never_send": { workspaceFolderValue: ["*.env"], globalValue: ["x"] },
    "privacy.local_only": { globalValue: false },
    "routing.thresholds": { globalValue: { "qwen2.5-coder:3b": -0.4 } },
  };
  const settings = toServerSettings(serverKeys(properties), (k) => set[k] ?? {});
  assert.deepEqual(settings, {
    local: { backend: "ollama" },
    remote: { url: "http://b:8000/v1" }, // workspace over user settings
    privacy: { never_send: ["*.env"], local_only: false }, // folder wins; false is a value
    routing: { thresholds: { "qwen2.5-coder:3b": -0.4 } },
  });
});

test("nothing set: nothing sent, so the server's settings file applies", () => {
  assert.deepEqual(toServerSettings(serverKeys(properties), () => undefined), {});
  assert.deepEqual(toServerSettings(serverKeys(properties), () => ({})), {});
});

test("explicitValue ignores null and missing levels", () => {
  assert.equal(explicitValue(undefined), undefined);
  assert.equal(explicitValue({ workspaceFolderValue: null, globalValue: 3 }), 3);
  assert.equal(explicitValue({ workspaceValue: 0 }), 0);
});

test("initializationOptions carry the user's settings only, never a workspace's", () => {
  const set: Record<string, Inspected> = {
    "remote.url": { globalValue: "http://a:8000/v1", workspaceValue: "http://evil/v1" },
    "privacy.local_only": { globalValue: true, workspaceFolderValue: false },
    "routing.policy": { workspaceValue: "remote" },
  };
  const settings = toServerSettings(serverKeys(properties), (k) => set[k] ?? {}, userValue);
  assert.deepEqual(settings, {
    remote: { url: "http://a:8000/v1" },
    privacy: { local_only: true },
  });
});

test("a workspace may set only the tighten-only keys (scope resource); the rest are user-only", () => {
  // The server's one allow-list (TIGHTEN_ONLY in server/settings/config.py).
  const tighten = [
    "completion.context",
    "completion.context_lines",
    "completion.disabled_in",
    "completion.languages",
    "completion.recent_edits",
    "next_edit.context_lines",
    "next_edit.enabled",
    "next_edit.only_in_time",
    "next_edit.region_lines",
    "next_edit.threshold",
    "privacy.local_only",
    "privacy.never_send",
    "privacy.secret_files",
    "remote.backend",
    "remote.context_tokens",
    "remote.max_prompt_chars",
    "remote.model",
    "remote.send_context",
    "routing.adaptive",
    "routing.adaptive_max",
    "routing.adaptive_min",
    "routing.backpressure",
    "routing.escalation_budget",
    "routing.max_lift",
    "routing.missing_logprobs",
    "routing.policy",
    "routing.semantic",
    "routing.syntax_max_bytes",
    "routing.threshold",
    "routing.thresholds",
  ];
  const userOnly = userOnlyKeys(properties).sort();
  assert.deepEqual(
    userOnly,
    serverKeys(properties)
      .filter((k) => !tighten.includes(k))
      .sort(),
  );
  for (const key of ["local.url", "local.model", "local.model_path", "remote.url", "remote.api_key_env"]) {
    assert.ok(userOnly.includes(key), key);
  }
  const scoped = properties as Record<string, { scope?: string }>;
  assert.equal(scoped["synconfroute.privacy.local_only"].scope, "resource");
});
