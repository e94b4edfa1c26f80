// The SynConfRoute extension: starts `synconfroute serve`, maps VS Code settings to the
// server's, shows the route of the last completion in the status bar.
import * as fs from "fs";
import * as os from "os";
import * as vscode from "vscode";
import {
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
  TransportKind,
} from "vscode-languageclient/node";
import { CURSOR_NOTIFICATION, CursorReporter } from "./cursor";
import { COMMANDS, LANGUAGES, NEXT_EDIT_STEP } from "./ids";
import { NextEditView } from "./nextEditView";
import { resolveServerCommand } from "./serverCommand";
import {
  SECTION,
  ServerSettings,
  serverKeys,
  toServerSettings,
  userOnlyKeys,
  userValue,
} from "./settings";
import {
  ROUTE_NOTIFICATION,
  Route,
  ServerState,
  ServerStatus,
  routeFromNotification,
  statusReport,
  statusText,
  statusTooltip,
} from "./status";

let client: LanguageClient | undefined;
let output: vscode.LogOutputChannel;
let statusItem: vscode.StatusBarItem;
let keys: string[] = [];
let userOnly: string[] = [];
let lastRoute: Route | undefined;
let localOnly = false;
let serverState: ServerState = "starting";
// Where the cursor rests goes to the server, which prefills the local prompt there.
const cursor = new CursorReporter((params) => {
  if (client !== undefined && client.state === State.Running) {
    void client.sendNotification(CURSOR_NOTIFICATION, params).catch(() => undefined);
  }
});
// Next-edit suggestions, offered through the inline completions (nextEditView.ts).
const nextEdits = new NextEditView(() => client, (line) => output.appendLine(line));
const DOCUMENTS: { scheme: string; language: string }[] = LANGUAGES.flatMap((language) => [
  { scheme: "file", language },
  { scheme: "untitled", language },
]);

// The focused editor's cursor, if the server has its document (our languages, running).
// Focus going elsewhere (a panel, another language) keeps a pending report: the cursor
// still rests there, and the user comes back to it.
function cursorMoved(editor: vscode.TextEditor | undefined): void {
  const c = client;
  if (c === undefined || c.state !== State.Running) {
    cursor.cancel();
    return;
  }
  if (editor === undefined || vscode.languages.match(DOCUMENTS, editor.document) === 0) {
    return;
  }
  const c2p = c.code2ProtocolConverter;
  cursor.moved(
    c2p.asUri(editor.document.uri),
    editor.document.version,
    c2p.asPosition(editor.selection.active),
  );
}

function settingsFor(scope?: vscode.Uri): ServerSettings {
  const cfg = vscode.workspace.getConfiguration(SECTION, scope);
  return toServerSettings(keys, (key) => cfg.inspect(key));
}

// initializationOptions: the user's own settings only (the server treats them as user scope;
// workspace values reach it through workspace/configuration, where it lets them only tighten).
function userSettings(): ServerSettings {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  return toServerSettings(keys, (key) => cfg.inspect(key), userValue);
}

function refreshStatusBar(): void {
  statusItem.text = statusText(lastRoute, localOnly, serverState);
  statusItem.tooltip = statusTooltip(lastRoute, localOnly, serverState);
  statusItem.show();
}

function isFile(p: string): boolean {
  try {
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

async function startClient(): Promise<void> {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  const resolved = resolveServerCommand({
    serverPath: cfg.get<string>("server.path", ""),
    venv: cfg.get<string>("server.venv", ""),
    platform: process.platform,
    pathEnv: process.env.PATH ?? "",
    home: os.homedir(),
    isFile,
  });
  if ("error" in resolved) {
    serverState = "stopped";
    refreshStatusBar();
    output.appendLine(resolved.error);
    const choice = await vscode.window.showErrorMessage(resolved.error, "Open Settings");
    if (choice !== undefined) {
      await vscode.commands.executeCommand("workbench.action.openSettings", "synconfroute.server");
    }
    return;
  }
  output.appendLine(`starting ${resolved.command} ${resolved.args.join(" ")}`);
  const serverOptions: ServerOptions = {
    command: resolved.command,
    args: resolved.args,
    transport: TransportKind.stdio,
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: DOCUMENTS,
    initializationOptions: userSettings(),
    outputChannel: output,
    synchronize: { configurationSection: SECTION },
    middleware: {
      provideInlineCompletionItems: (document, position, context, token, next) =>
        nextEdits.provide(document, position, context, token, next),
      workspace: {
        // Answer section "synconfroute" with the settings the user set (no defaults, no
        // extension-only keys): the server's settings file keeps its say for the rest.
        configuration: async (params, token, next) => {
          const answers = await next(params, token);
          return params.items.map((item, i) =>
            item.section === SECTION
              ? settingsFor(item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined)
              : Array.isArray(answers)
                ? answers[i]
                : null,
          );
        },
        // Send `settings: null`: the server then pulls them through the handler above.
        didChangeConfiguration: (_sections, next) => next(undefined),
      },
    },
  };
  client = new LanguageClient("synconfroute", "SynConfRoute", serverOptions, clientOptions);
  // The status bar says when the server is up: completions work from then on. While
  // start() runs, "running" waits for it (the providers are registered after the state
  // turns Running); after a crash, the client restarts the server on its own.
  let starting = true;
  client.onDidChangeState((e) => {
    if (e.newState === State.Running && starting) {
      return;
    }
    serverState =
      e.newState === State.Running
        ? "running"
        : e.newState === State.Starting
          ? "starting"
          : "stopped";
    refreshStatusBar();
  });
  // The server sends each completion's route as data, just before the completion itself.
  client.onNotification(ROUTE_NOTIFICATION, (params: unknown) => {
    const route = routeFromNotification(params);
    if (route !== undefined) {
      lastRoute = route;
      refreshStatusBar();
    }
  });
  try {
    await client.start();
    starting = false;
    serverState = "running";
    refreshStatusBar();
    cursor.reset(); // a new server: tell it where the cursor is
    cursorMoved(vscode.window.activeTextEditor);
  } catch (err) {
    starting = false;
    serverState = "stopped";
    refreshStatusBar();
    output.appendLine(`the server did not start: ${String(err)}`);
    void vscode.window.showErrorMessage(
      `SynConfRoute: the server did not start (${String(err)}). ` +
        "See Output › SynConfRoute; `synconfroute doctor` checks the tiers.",
    );
  }
}

async function serverCommand<T>(command: string): Promise<T | undefined> {
  if (client === undefined || client.state !== State.Running) {
    const choice = await vscode.window.showWarningMessage(
      "SynConfRoute: the server is not running (see Output › SynConfRoute).",
      "Restart Server",
    );
    if (choice !== undefined) {
      await restart();
    }
    return undefined;
  }
  return (await client.sendRequest(ExecuteCommandRequest.type, {
    command,
    arguments: [],
  })) as T;
}

async function showStatus(): Promise<void> {
  const st = await serverCommand<ServerStatus>("synconfroute.status");
  if (st === undefined) {
    return;
  }
  localOnly = st.local_only;
  refreshStatusBar();
  output.appendLine(statusReport(st));
  output.show(true);
}

async function toggleLocalOnly(): Promise<void> {
  const on = await serverCommand<boolean>("synconfroute.toggleLocalOnly");
  if (on !== undefined) {
    localOnly = on;
    refreshStatusBar(); // the server itself says what changed
  }
}

async function restart(): Promise<void> {
  if (client !== undefined) {
    const old = client;
    client = undefined;
    await old.stop().catch(() => undefined);
  }
  await startClient();
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("SynConfRoute", { log: true });
  const properties = context.extension.packageJSON.contributes.configuration.properties;
  keys = serverKeys(properties);
  userOnly = userOnlyKeys(properties);
  localOnly = settingsFor().privacy?.local_only === true;
  statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  statusItem.command = COMMANDS.showStatus;
  serverState = "starting";
  refreshStatusBar();
  context.subscriptions.push(
    output,
    statusItem,
    vscode.commands.registerCommand(COMMANDS.toggleLocalOnly, toggleLocalOnly),
    vscode.commands.registerCommand(COMMANDS.showStatus, showStatus),
    vscode.commands.registerCommand(COMMANDS.restartServer, restart),
    vscode.commands.registerCommand(COMMANDS.suggestNextEdit, () => nextEdits.suggest()),
    vscode.commands.registerCommand(NEXT_EDIT_STEP, (id: number) => nextEdits.showNext(id)),
    vscode.window.onDidChangeActiveTextEditor(cursorMoved),
    vscode.window.onDidChangeTextEditorSelection((e) => {
      cursorMoved(e.textEditor);
      nextEdits.selectionChanged(e);
    }),
    { dispose: () => cursor.cancel() },
    { dispose: () => nextEdits.dispose() },
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      const where = userOnly.some((k) => e.affectsConfiguration(`${SECTION}.${k}`));
      if (e.affectsConfiguration(`${SECTION}.server`) || where) {
        const choice = await vscode.window.showInformationMessage(
          where
            ? "SynConfRoute: where completions are sent changed; it applies after a restart."
            : "SynConfRoute: the server program changed.",
          "Restart Server",
        );
        if (choice !== undefined) {
          await restart();
        }
      }
    }),
  );
  await startClient();
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
