// Tokenize .kvspec files with VS Code's own TextMate engine (vscode-textmate,
// vscode-oniguruma: `npm install` here) and print, as JSON, each file's tokens
// as [line, text, scopes].  Usage: node test/tokenize.js FILE...
"use strict";

const fs = require("fs");
const path = require("path");
const vsctm = require("vscode-textmate");
const oniguruma = require("vscode-oniguruma");

const wasm = fs.readFileSync(require.resolve("vscode-oniguruma/release/onig.wasm"));
const onigLib = oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength)).then(() => ({
  createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
  createOnigString: (text) => new oniguruma.OnigString(text),
}));

const grammarPath = path.join(__dirname, "..", "syntaxes", "kvspec.tmLanguage.json");
const registry = new vsctm.Registry({
  onigLib,
  loadGrammar: async (scopeName) =>
    scopeName === "source.kvspec"
      ? vsctm.parseRawGrammar(fs.readFileSync(grammarPath, "utf8"), grammarPath)
      : null,
});

async function main(files) {
  const grammar = await registry.loadGrammar("source.kvspec");
  const out = {};
  for (const file of files) {
    const tokens = [];
    let state = vsctm.INITIAL;
    fs.readFileSync(file, "utf8").split(/\r?\n/).forEach((line, number) => {
      const result = grammar.tokenizeLine(line, state);
      for (const token of result.tokens) {
        tokens.push([number + 1, line.slice(token.startIndex, token.endIndex), token.scopes]);
      }
      state = result.ruleStack;
    });
    out[file] = tokens;
  }
  process.stdout.write(JSON.stringify(out));
}

main(process.argv.slice(2)).catch((error) => {
  console.error(error);
  process.exit(1);
});
