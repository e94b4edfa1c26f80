// VS Code settings -> the server's settings (docs/settings.md). No `vscode` import: unit-tested
// under plain node.

/** The configuration section, in VS Code and on the wire (workspace/configuration). */
export const SECTION = "synconfroute";

/** The server's setting sections; other keys under "synconfroute." belong to the extension. */
export const SERVER_SECTIONS = ["local", "remote", "routing", "privacy", "completion", "next_edit", "editor"];

/** What `WorkspaceConfiguration.inspect()` tells about one key (the parts we use). */
export interface Inspected {
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

export type ServerSettings = Record<string, Record<string, unknown>>;

/** The server keys ("local.backend", ...) among the contributed properties of package.json. */
export function serverKeys(properties: Record<string, unknown>): string[] {
  const keys: string[] = [];
  for (const name of Object.keys(properties)) {
    const parts = name.split(".");
    if (parts.length === 3 && parts[0] === SECTION && SERVER_SECTIONS.includes(parts[1])) {
      keys.push(`${parts[1]}.${parts[2]}`);
    }
  }
  return keys;
}

/** The value the user set (folder over workspace over user settings), or undefined. */
export function explicitValue(inspected: Inspected | undefined): unknown {
  if (inspected === undefined) {
    return undefined;
  }
  for (const v of [
    inspected.workspaceFolderValue,
    inspected.workspaceValue,
    inspected.globalValue,
  ]) {
    if (v !== undefined && v !== null) {
      return v;
    }
  }
  return undefined;
}

/** The value set in the user's own settings only (what initializationOptions carry). */
export function userValue(inspected: Inspected | undefined): unknown {
  const v = inspected?.globalValue;
  return v === null ? undefined : v;
}

/**
 * The server keys a workspace may not set (contributed with scope `machine`): changing them
 * in user settings needs a server restart, since the server takes them from
 * initializationOptions only.
 */
export function userOnlyKeys(properties: Record<string, unknown>): string[] {
  return serverKeys(properties).filter(
    (key) => (properties[`${SECTION}.${key}`] as { scope?: string }).scope === "machine",
  );
}

/**
 * Nested server settings ({local: {backend: ...}}) from the values the user set in VS Code.
 *
 * Defaults are not sent: the server's own settings file and environment keep their say for
 * everything the user did not set here. `pick` chooses the level: `explicitValue` (folder
 * over workspace over user: the workspace/configuration answer, which the server treats as
 * workspace scope) or `userValue` (user settings only: initializationOptions, user scope).
 */
export function toServerSettings(
  keys: readonly string[],
  inspect: (key: string) => Inspected | undefined,
  pick: (inspected: Inspected | undefined) => unknown = explicitValue,
): ServerSettings {
  const out: ServerSettings = {};
  for (const key of keys) {
    const value = pick(inspect(key));
    if (value === undefined) {
      continue;
    }
    const [section, name] = key.split(".", 2);
    (out[section] ??= {})[name] = value;
  }
  return out;
}
