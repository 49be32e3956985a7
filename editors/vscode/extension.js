// The kvspec extension: starts `kvdsl lsp` over stdio for .kvspec files.
"use strict";

const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const settings = vscode.workspace.getConfiguration("kvspec.server");
  const server = {
    command: settings.get("command", "kvdsl"),
    args: settings.get("args", ["lsp"]),
    transport: TransportKind.stdio,
  };
  client = new LanguageClient("kvspec", "kvspec (kvdsl lsp)", server, {
    documentSelector: [{ scheme: "file", language: "kvspec" }],
  });
  context.subscriptions.push({ dispose: () => client && client.stop() });
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
