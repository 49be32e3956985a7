"""The words of the language, in one place.

The grammar (`kvdsl/kvspec.lark`) spells the keywords out; the transformer,
the Pygments lexer (`kvdsl/lexer.py`), the language server and the VS Code
grammar (`editors/vscode/syntaxes/kvspec.tmLanguage.json`) read them here, and
`tests/test_words.py` checks that the grammar and the VS Code grammar say the
same.
"""

from __future__ import annotations

# what a block may be: `model llama "Llama" { ... }`
BLOCK_KINDS = ("model", "hardware", "deployment", "format", "engine", "workload")

# the statements and parts of expressions, as the grammar writes them
KEYWORDS = ("import", "extends", "defaults", "let", "require", "fn", "if", "then", "else", "for", "in")
WORD_OPERATORS = ("and", "or", "not")
CONSTANTS = ("true", "false", "none")

# what may start an item at the top level of a file
TOP_LEVEL = (*BLOCK_KINDS, "defaults", "import", "fn")


def reserved() -> tuple:
    """Every word the grammar spells out: no cell, block or function may take one."""
    return (*KEYWORDS, *WORD_OPERATORS, *CONSTANTS)
