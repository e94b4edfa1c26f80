// Identifiers shared by the extension and its tests (no `vscode` import).

/** The extension's own commands (the server's synconfroute.* commands are registered by
 * the language client, so these use another prefix). */
export const COMMANDS = {
  toggleLocalOnly: "synconfroute.client.toggleLocalOnly",
  showStatus: "synconfroute.client.showStatus",
  restartServer: "synconfroute.client.restartServer",
  suggestNextEdit: "synconfroute.client.suggestNextEdit",
};

/** The command of a next-edit piece's item (run by VS Code when it is accepted; not in
 * the command palette). */
export const NEXT_EDIT_STEP = "synconfroute.client.nextEditStep";

/** The languages the server completes (VS Code language ids). */
export const LANGUAGES = [
  "python",
  "java",
  "c",
  "cpp",
  "javascript",
  "javascriptreact",
  "typescript",
  "typescriptreact",
  "go",
  "rust",
];
