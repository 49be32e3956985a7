"""The language's words come from one place, kvdsl/words.py, and every tool that knows them agrees.

The grammar spells the keywords out, the VS Code grammar is written by hand:
these tests check both against the source.  The transformer, the Pygments
lexer and the language server import it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from kvdsl import lexer, lsp_complete, model, words

ROOT = Path(__file__).resolve().parent.parent
GRAMMAR = ROOT / "kvdsl" / "kvspec.lark"
TEXTMATE = ROOT / "editors" / "vscode" / "syntaxes" / "kvspec.tmLanguage.json"


def test_the_grammar_spells_out_exactly_the_reserved_words():
    quoted = set(re.findall(r'"([A-Za-z_]+)"', GRAMMAR.read_text(encoding="utf-8")))
    assert quoted == set(words.reserved())


def test_the_spec_model_the_lexer_and_the_language_server_read_the_source():
    assert model.BLOCK_KINDS is words.BLOCK_KINDS
    assert (lexer.KEYWORDS, lexer.WORD_OPERATORS, lexer.CONSTANTS) == (words.KEYWORDS, words.WORD_OPERATORS, words.CONSTANTS)
    assert set(lsp_complete.HEADER.pattern.split("(?:(", 1)[1].split(")", 1)[0].split("|")) == set(words.BLOCK_KINDS)
    labels = {c.label for c in lsp_complete.complete(None, "", 1, 1)}
    assert labels == set(words.TOP_LEVEL)


def test_the_vscode_grammar_knows_every_word():
    grammar = json.loads(TEXTMATE.read_text(encoding="utf-8"))
    repository = grammar["repository"]
    keyword_matches = [p["match"] for p in repository["keywords"]["patterns"]]
    for word in words.reserved():
        assert any(re.fullmatch(m, word) for m in keyword_matches), word
    not_a_block = re.search(r"\(\?!\(\?:([^)]*)\)", repository["block"]["match"]).group(1).split("|")
    assert set(not_a_block) == set(words.reserved())


def test_no_prelude_cell_or_function_takes_a_reserved_word():
    from kvdsl.loader import load

    ws = load([])
    names = {c.name for d, _ in ws.defaults for c in d.cells} | {fn.name for fn, _ in ws.functions}
    names |= {b.name for b, _ in ws.blocks}
    assert not names & set(words.reserved())
