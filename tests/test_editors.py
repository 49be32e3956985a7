"""The VS Code extension in editors/vscode: valid JSON, a TextMate grammar that knows the language.

With node and the extension's npm packages installed (`cd editors/vscode && npm
install`), the grammar also runs in VS Code's own engine (vscode-textmate)
over every spec; without them those tests are skipped.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kvdsl.units import unit_names

ROOT = Path(__file__).resolve().parent.parent
VSCODE = ROOT / "editors" / "vscode"
GRAMMAR = VSCODE / "syntaxes" / "kvspec.tmLanguage.json"
SPECS = sorted(p for d in ["specs", "kvdsl/prelude"] for p in (ROOT / d).rglob("*.kvspec"))
# Oniguruma syntax Python's `re` does not read
ONIGURUMA_ONLY = re.compile(r"\\[GhHzK]|\\p\{|\(\?~|\(\?<\w+>|\\k<")


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def rules(node):
    """Every rule (a dict with a match, begin or include) in a TextMate grammar."""
    if isinstance(node, dict):
        if {"match", "begin", "include"} & node.keys():
            yield node
        for value in node.values():
            yield from rules(value)
    elif isinstance(node, list):
        for value in node:
            yield from rules(value)


def regexes(grammar):
    return [r[key] for r in rules(grammar) for key in ("match", "begin", "end") if key in r]


def scope_names(rule) -> list:
    names = [rule.get("name", "")]
    for key in ("captures", "beginCaptures"):
        names += [c.get("name", "") for c in rule.get(key, {}).values()]
    return names


def lark_keywords() -> set:
    """Every word kvspec.lark spells out in quotes: the language's keywords."""
    return set(re.findall(r'"([A-Za-z_]+)"', (ROOT / "kvdsl" / "kvspec.lark").read_text(encoding="utf-8")))


def test_the_json_files_parse():
    for path in [VSCODE / "package.json", VSCODE / "language-configuration.json", GRAMMAR]:
        assert isinstance(load(path), dict), path


def test_the_package_declares_the_language_grammar_and_client():
    package = load(VSCODE / "package.json")
    (language,) = package["contributes"]["languages"]
    assert language["id"] == "kvspec" and language["extensions"] == [".kvspec"]
    assert (VSCODE / language["configuration"]).is_file()
    (grammar,) = package["contributes"]["grammars"]
    assert grammar["language"] == "kvspec"
    assert (VSCODE / grammar["path"]).resolve() == GRAMMAR.resolve()
    assert load(GRAMMAR)["scopeName"] == grammar["scopeName"] == "source.kvspec"
    assert "onLanguage:kvspec" in package["activationEvents"]
    assert "vscode-languageclient" in package["dependencies"]
    assert package["contributes"]["configuration"]["properties"]["kvspec.server.args"]["default"] == ["lsp"]
    client = (VSCODE / package["main"]).read_text(encoding="utf-8")
    assert "TransportKind.stdio" in client and "vscode-languageclient/node" in client


def test_the_language_configuration():
    config = load(VSCODE / "language-configuration.json")
    assert config["comments"]["lineComment"] == "#"
    assert ["{", "}"] in config["brackets"] and ["(", ")"] in config["brackets"] and ["[", "]"] in config["brackets"]
    increase = re.compile(config["indentationRules"]["increaseIndentPattern"])
    assert increase.search('model m "M" {') and not increase.search("    x = 1  # {")


def test_every_textmate_regex_compiles():
    checked = 0
    for pattern in regexes(load(GRAMMAR)):
        if ONIGURUMA_ONLY.search(pattern):
            continue
        re.compile(pattern)
        checked += 1
    assert checked >= 20


def test_the_textmate_grammar_knows_every_keyword_of_the_grammar():
    keyword_rules = [r for r in rules(load(GRAMMAR))
                     if any(n.startswith(("keyword.", "constant.language.")) for n in scope_names(r))]
    words = lark_keywords()
    assert {"import", "extends", "let", "defaults", "require", "if", "then", "else", "and", "or", "not"} <= words
    for word in words | {"true", "false"}:
        assert any(re.fullmatch(r.get("match") or r.get("begin", ""), word) for r in keyword_rules), word


def test_the_textmate_grammar_knows_every_unit():
    grammar = load(GRAMMAR)
    number_with_unit = grammar["repository"]["numbers"]["patterns"][0]["match"]
    for unit in sorted(unit_names()):
        for text in [f"2 {unit}", f"32K {unit}", f"1.5e3 {unit}/s"]:
            if unit in ("s", "ms") and text.endswith("/s"):
                continue
            found = re.fullmatch(number_with_unit, text)
            assert found and found.group(2) == text.split(" ")[1], text
    assert not re.fullmatch(number_with_unit, "2 GiBs")


def tokenize(*paths):
    node = shutil.which("node")
    if node is None or not (VSCODE / "node_modules" / "vscode-textmate").is_dir():
        pytest.skip("needs node and `npm install` in editors/vscode (vscode-textmate)")
    done = subprocess.run([node, str(VSCODE / "test" / "tokenize.js"), *map(str, paths)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_vscode_textmate_scopes_every_token_of_every_spec():
    tokens = tokenize(*SPECS)
    assert len(tokens) == len(SPECS)
    bare = [(file, line, text) for file, found in tokens.items() for line, text, scopes in found
            if text.strip() and scopes == ["source.kvspec"]]
    assert bare == []


def test_vscode_textmate_scopes(tmp_path):
    sample = tmp_path / "sample.kvspec"
    sample.write_text('import "../hardware/h200.kvspec"\n'
                      'model llama "Llama" extends base {\n'
                      '    ## a doc comment\n'
                      '    let window = 32K tokens   # a comment\n'
                      '    bandwidth: bytes/s\n'
                      '    ok = if not true and window >= 1.5e3 then "yes" else max(2 B/element, 1 B/element)\n'
                      '    require window > 0\n'
                      '}\n'
                      'defaults deployment, engine {\n'
                      '    x = ?\n'
                      '}\n', encoding="utf-8")
    (found,) = tokenize(sample).values()
    scoped = {(text, scopes[-1]) for _, text, scopes in found if text.strip()}
    for pair in [("import", "keyword.control.import.kvspec"),
                 ('"', "punctuation.definition.string.begin.kvspec"),
                 ("model", "storage.type.block.kvspec"), ("llama", "entity.name.type.block.kvspec"),
                 ("extends", "keyword.other.kvspec"),
                 (" a doc comment", "comment.line.double-number-sign.documentation.kvspec"),
                 ("let", "keyword.other.kvspec"), ("window", "variable.other.definition.kvspec"),
                 ("32K", "constant.numeric.kvspec"), ("tokens", "keyword.other.unit.kvspec"),
                 (" a comment", "comment.line.number-sign.kvspec"),
                 ("bytes/s", "storage.type.kvspec"),
                 ("if", "keyword.control.conditional.kvspec"), ("not", "keyword.operator.logical.kvspec"),
                 ("true", "constant.language.boolean.kvspec"), (">=", "keyword.operator.comparison.kvspec"),
                 ("1.5e3", "constant.numeric.kvspec"), ("yes", "string.quoted.double.kvspec"),
                 ("max", "entity.name.function.kvspec"), ("B/element", "keyword.other.unit.kvspec"),
                 ("require", "keyword.other.kvspec"), ("defaults", "keyword.other.defaults.kvspec"),
                 ("engine", "storage.type.block.kvspec"), ("?", "constant.language.unknown.kvspec")]:
        assert pair in scoped, pair
