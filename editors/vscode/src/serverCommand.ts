// Where `synconfroute serve` is: the path setting, else a configured virtual environment,
// else PATH. No `vscode` import: unit-tested under plain node.
import * as path from "path";

export interface Lookup {
  /** synconfroute.server.path: the program itself. */
  serverPath: string;
  /** synconfroute.server.venv: a virtual environment holding synconfroute. */
  venv: string;
  platform: NodeJS.Platform;
  /** The PATH environment variable. */
  pathEnv: string;
  home: string;
  isFile: (p: string) => boolean;
}

export type Resolved = { command: string; args: string[] } | { error: string };

function expandHome(p: string, home: string, paths: typeof path.posix): string {
  return p === "~" || p.startsWith("~/") ? paths.join(home, p.slice(1)) : p;
}

/** The program and arguments that start the server, or an error saying what to set. */
export function resolveServerCommand(o: Lookup): Resolved {
  const win = o.platform === "win32";
  const paths = win ? path.win32 : path.posix;
  const names = win ? ["synconfroute.exe", "synconfroute.cmd", "synconfroute"] : ["synconfroute"];
  const args = ["serve"];
  if (o.serverPath.trim() !== "") {
    const p = expandHome(o.serverPath.trim(), o.home, paths);
    if (o.isFile(p)) {
      return { command: p, args };
    }
    return {
      error:
        `synconfroute.server.path is "${o.serverPath}", which does not exist. ` +
        "Point it at the synconfroute program (e.g. ~/synconfroute/.venv/bin/synconfroute).",
    };
  }
  if (o.venv.trim() !== "") {
    const venv = expandHome(o.venv.trim(), o.home, paths);
    const dir = paths.join(venv, win ? "Scripts" : "bin");
    for (const n of names) {
      const p = paths.join(dir, n);
      if (o.isFile(p)) {
        return { command: p, args };
      }
    }
    return {
      error:
        `No synconfroute in the virtual environment "${o.venv}" (looked in ${dir}). ` +
        `Install it there (${paths.join(dir, "pip")} install -e /path/to/synconfroute) ` +
        "or fix synconfroute.server.venv.",
    };
  }
  const sep = win ? ";" : ":";
  for (const dir of o.pathEnv.split(sep).filter((d) => d !== "")) {
    for (const n of names) {
      const p = paths.join(dir, n);
      if (o.isFile(p)) {
        return { command: p, args };
      }
    }
  }
  return {
    error:
      "synconfroute is not on PATH. Install it (bash scripts/setup.sh in its repository) and " +
      "set synconfroute.server.venv to its .venv, or synconfroute.server.path to the program.",
  };
}
