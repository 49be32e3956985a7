"""The Pygments lexer for .kvspec: every spec highlights without errors, tokens get their kinds."""

from __future__ import annotations

import configparser
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("pygments")

from pygments.token import Comment, Error, Keyword, Name, Number, Operator, String  # noqa: E402

from kvdsl.lexer import CONSTANTS, KEYWORDS, WORD_OPERATORS, KvspecLexer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted(p for d in ["specs", "kvdsl/prelude", "tests/specs", "tests/engine_tests", "docs/examples"]
               for p in (ROOT / d).rglob("*.kvspec"))


def grammar_keywords() -> set:
    """Every word the grammar spells out in quotes: the language's keywords."""
    grammar = (ROOT / "kvdsl" / "kvspec.lark").read_text(encoding="utf-8")
    return set(re.findall(r'"([A-Za-z_]+)"', grammar))


@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_spec_highlights_without_error_tokens(path):
    text = path.read_text(encoding="utf-8")
    tokens = list(KvspecLexer().get_tokens(text))
    assert [v for t, v in tokens if t is Error] == []
    assert "".join(v for _, v in tokens) == (text if text.endswith("\n") else text + "\n")


def test_specs_are_found():
    assert len(SPECS) > 60


def kinds(text):
    return [(t, v) for t, v in KvspecLexer().get_tokens(text) if v.strip()]


def test_token_kinds():
    text = ('import "../hardware/h200.kvspec"\n'
            'model llama "Llama" extends base {\n'
            '    ## a doc comment\n'
            '    let window = 32K tokens   # a comment\n'
            '    memory = 80 GiB\n'
            '    bandwidth: bytes/s\n'
            '    vllm.block_size = 16\n'
            '    layer_kinds = [sliding(128, kv_heads = 4), full] * 2\n'
            '    ok = if not true and window >= 1.5e3 then "yes" else max(2 B/element, 1 B/element) or false\n'
            '    require window > 0\n'
            '}\n'
            'defaults deployment, engine {\n'
            '    x = -1\n'
            '}\n')
    tokens = kinds(text)
    expect = [
        (Keyword, "import"), (String.Double, '"../hardware/h200.kvspec"'),
        (Keyword.Declaration, "model"), (Name.Class, "llama"), (String.Double, '"Llama"'), (Keyword, "extends"),
        (Comment.Special, "## a doc comment"),
        (Keyword, "let"), (Name.Attribute, "window"), (Number, "32K"), (Keyword.Type, "tokens"),
        (Comment.Single, "# a comment"),
        (Number, "80"), (Keyword.Type, "GiB"),
        (Name.Attribute, "bandwidth"), (Keyword.Type, "bytes/s"),
        (Name.Attribute, "vllm.block_size"),
        (Name.Function, "sliding"), (Name.Attribute, "kv_heads"),
        (Keyword, "if"), (Operator.Word, "not"), (Keyword.Constant, "true"), (Operator.Word, "and"),
        (Operator, ">="), (Number, "1.5e3"), (Keyword, "then"), (Keyword, "else"), (Name.Function, "max"),
        (Keyword.Type, "B/element"), (Operator.Word, "or"), (Keyword.Constant, "false"),
        (Keyword, "require"),
        (Keyword, "defaults"), (Keyword.Declaration, "deployment"), (Keyword.Declaration, "engine"),
    ]
    for pair in expect:
        assert pair in tokens, pair
    assert (Name, "window") in tokens  # a reference, not a definition
    # the cells of a defaults block are cells, not more kinds
    assert (Name.Attribute, "x") in tokens and (Keyword.Declaration, "x") not in tokens
    # `name then "text"` inside a rule is no block header
    assert (Keyword.Declaration, "window") not in kinds('x = if window then "a" else "b"\n')


def test_the_lexer_knows_every_keyword_of_the_grammar():
    known = set(KEYWORDS) | set(WORD_OPERATORS) | set(CONSTANTS)
    assert grammar_keywords() <= known, grammar_keywords() - known
    for word in grammar_keywords():
        assert [t for t, _ in kinds(f"x = {word}")][-1] in (Keyword, Operator.Word, Keyword.Constant), word


def test_the_entry_point_in_setup_cfg_registers_the_lexer(tmp_path, monkeypatch):
    """Install the entry points setup.cfg declares (as pip would) and let Pygments find the lexer by them."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    entry_points = config["options.entry_points"]
    assert "pygments>=2.10" in config["options.extras_require"]["highlight"]
    assert "pygments>=2.10" in config["options.extras_require"]["test"]
    info = tmp_path / "kvdsl_highlight_probe-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kvdsl-highlight-probe\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "".join(f"[{group}]\n{entry_points[group].strip()}\n" for group in entry_points))
    monkeypatch.setattr(sys, "path", [str(tmp_path)] + sys.path)
    from pygments.lexers import find_lexer_class_for_filename, get_lexer_by_name

    assert type(get_lexer_by_name("kvspec")) is KvspecLexer
    assert find_lexer_class_for_filename("x.kvspec") is KvspecLexer
