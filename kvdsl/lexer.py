"""A Pygments lexer for .kvspec, so docs and READMEs highlight kvspec code blocks.

Registered through the `pygments.lexers` entry point (`pip install 'kvdsl[highlight]'`),
so `pygmentize -l kvspec` and Markdown's ```kvspec blocks find it.  Numbers,
units, names and strings use the grammar's own patterns (kvdsl/kvspec.lark).
"""

from __future__ import annotations

import re
from pathlib import Path

from pygments.lexer import RegexLexer, bygroups, default, words
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text, Whitespace

__all__ = ["KvspecLexer", "KEYWORDS"]

GRAMMAR = Path(__file__).with_name("kvspec.lark")

from .words import CONSTANTS, KEYWORDS, WORD_OPERATORS  # noqa: E402 (the language's words, in one place)


def _terminal(name: str) -> str:
    """The regular expression of one of the grammar's terminals, e.g. NUMBER."""
    text = GRAMMAR.read_text(encoding="utf-8")
    found = re.search(rf"^{name}(?:\.\d+)?:\s*/(.*)/\s*$", text, re.MULTILINE)
    if found is None:
        raise LookupError(f"no terminal {name} in {GRAMMAR}")
    # hazard: a terminal's own groups would shift the groups `bygroups` counts
    return re.sub(r"(?<!\\)\((?!\?)", "(?:", found.group(1))


NUMBER = _terminal("NUMBER")
UNIT = _terminal("UNIT")
NAME = _terminal("NAME")
STRING = _terminal("STRING")


class KvspecLexer(RegexLexer):
    """kvspec: blocks of cells that plan GPU memory for LLM serving."""

    name = "kvspec"
    aliases = ["kvspec"]
    filenames = ["*.kvspec"]
    mimetypes = ["text/x-kvspec"]

    tokens = {
        "root": [
            (r"[ \t\f\r]+", Whitespace),
            (r"\n", Whitespace),
            (r"\\\r?\n", Text),
            (r"##[^\n]*", Comment.Special),
            (r"#[^\n]*", Comment.Single),
            (STRING, String.Double),
            # a block, at the start of a line: `model llama "Llama 3" {`, `engine vllm "vLLM" {`
            (rf"^({NAME})([ \t]+)({NAME})(?=[ \t]+\")", bygroups(Keyword.Declaration, Whitespace, Name.Class)),
            # the kinds after `defaults`: `defaults deployment, engine {`
            (rf"(defaults)([ \t]+)", bygroups(Keyword, Whitespace), "kinds"),
            # a function's definition: `fn split_or_replicated(a, b) = ...`
            (rf"(fn)([ \t]+)({NAME})", bygroups(Keyword.Declaration, Whitespace, Name.Function)),
            (words(KEYWORDS, suffix=r"\b"), Keyword),
            (words(WORD_OPERATORS, suffix=r"\b"), Operator.Word),
            (words(CONSTANTS, suffix=r"\b"), Keyword.Constant),
            # a number and its unit: 32K tokens, 80 GiB, 2 B/element
            (rf"({NUMBER})([ \t]*)({UNIT})", bygroups(Number, Whitespace, Keyword.Type)),
            (NUMBER, Number),
            # a declared cell: `bandwidth: bytes/s`, `model: model`
            (rf"({NAME})([ \t]*)(:)([ \t]*)({NAME}(?:/{NAME})?)",
             bygroups(Name.Attribute, Whitespace, Punctuation, Whitespace, Keyword.Type)),
            # a cell's definition: `kv_heads = 8`, `vllm.block_size = 16`, `kv_heads = 16` in sliding(...)
            (rf"({NAME}(?:\.{NAME})?)([ \t]*)(=)(?!=)", bygroups(Name.Attribute, Whitespace, Operator)),
            # a family or one of its members: `stage_start[s in 1..8] = ...`, `stage_start[3] = ...`
            (rf"({NAME}(?:\.{NAME})?)(?=\[[^\]\n]*\][ \t]*=(?!=))", Name.Attribute),
            (rf"({NAME})(?=[ \t]*\()", Name.Function),
            (NAME, Name),
            (r"<=|>=|==|!=|[-+*/^&=<>?]", Operator),
            (r"\.\.", Operator),  # a range: `s in 1..8`
            (r"[{}()\[\],.:;]", Punctuation),
        ],
        "kinds": [
            (NAME, Keyword.Declaration),
            (r"[ \t]*,[ \t]*", Punctuation),
            default("#pop"),
        ],
    }
