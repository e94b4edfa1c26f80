// VS Code settings -> the server's settings (docs/settings.md). No `vscode` import: unit-tested
// under plain node.

/** The configuration section, in VS Code and on the wire (workspace/configuration). */
export const SECTION = "synconfroute";

/** The server's setting sections; other keys under "synconfroute." belong to the extension. */
export const SERVER_SECTIONS = ["local", "remote", "routing", "privacy", "completion", "editor"];

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

/**
 * Nested server settings ({local: {backend: ...}}) from the values the user set in VS Code.
 *
 * Defaults are not sent: the server's own settings file and environment keep their say for
 * everything the user did not set here.
 */
export function toServerSettings(
  keys: readonly string[],
  inspect: (key: string) => Inspected | undefined,
): ServerSettings {
  const out: ServerSettings = {};
  for (const key of keys) {
    const value = explicitValue(inspect(key));
    if (value === undefined) {
      continue;
    }
    const [section, name] = key.split(".", 2);
    (out[section] ??= {})[name] = value;
  }
  return out;
}
