"""What may be typed at a position in a kvspec file: the language server's completion.

Reads the text as typed (a block may be half written) and, when the file
evaluated, its program (`kvdsl/lsp_analysis.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from . import model as m
from .functions import FUNCTIONS
from .labels import describe
from .lsp_analysis import Analysis, _functions, _prelude_workspace
from .words import BLOCK_KINDS, TOP_LEVEL


@dataclass(frozen=True)
class Completion:
    """One suggestion: a label, what it is, and a description."""

    label: str
    kind: str  # "cell", "block", "format", "engine", "unit", "keyword", "function"
    detail: str = ""
    doc: str = ""
    first: bool = False  # listed before the others: a block of the kind the cell names


def kind_cells(kind: str, analysis: Optional[Analysis] = None) -> dict:
    """name -> description of the cells every block of `kind` has (the prelude's and the user's `let`)."""
    out: dict = {}
    loaded = analysis.defaults if analysis is not None and analysis.defaults else _prelude_workspace().defaults
    for d, prelude in loaded:
        if kind in d.kinds:
            for cell in d.cells:
                if cell.form != "require" and cell.name not in out and (prelude or cell.new or cell.form == "declare"):
                    out[cell.name] = describe(cell).sentence if cell.label else cell.doc
    return out


def _blocks(analysis: Optional[Analysis]) -> list:
    """(kind, name, title) of every block known: the analysis's program, else the prelude's."""
    if analysis is not None and analysis.program is not None:
        return [(b.kind, b.name, b.title) for b in analysis.program.blocks.values()]
    loaded = analysis.blocks if analysis is not None and analysis.blocks else _prelude_workspace().blocks
    return [(b.kind, b.name, b.title) for b, _ in loaded]


HEADER = re.compile(rf"^\s*(?:({'|'.join(BLOCK_KINDS)})\s+(\w+)|defaults\s+([\w\s,]+?))\b[^#]*\{{")


def enclosing(text: str, line: int) -> Optional[tuple]:
    """(kind, block name or None) of the block around a line (1-based), read from the text as typed."""
    lines = text.split("\n")
    depth = 0
    for number in range(min(line, len(lines)) - 1, -1, -1):
        code = re.sub(r'"[^"]*"|#.*', "", lines[number])
        if number < line - 1:
            depth += code.count("}")
        depth -= code.count("{")
        if depth < 0:
            found = HEADER.match(lines[number])
            if found is None:
                return None
            if found.group(1):
                return found.group(1), found.group(2)
            return found.group(3).split(",")[0].strip(), None
    return None


def complete(analysis: Optional[Analysis], text: str, line: int, column: int) -> list:
    """What may be typed at a position: cell names at the start of a line, values after `=`, units after a number."""
    lines = text.split("\n")
    before = lines[line - 1][: column - 1] if line - 1 < len(lines) else ""
    if re.search(r"\d[\d_.]*(?:e\d+)?\s+\w*$", before):
        return _units()
    place = enclosing(text, line)
    if place is None:
        if re.fullmatch(r"\w*", before):  # a new item at the top level
            return [Completion(word, "keyword", "block kind" if word in BLOCK_KINDS else "") for word in TOP_LEVEL]
        return []
    kind, block = place
    dotted = re.search(r"(\w+)\.\w*$", before)
    if dotted:
        return _members(analysis, kind, block, dotted.group(1))
    if re.fullmatch(r"\s*let\s+\w*", before):  # a name of one's own
        return []
    if re.fullmatch(r"\s*\w*", before):
        return [Completion(name, "cell", f"{kind} cell", doc) for name, doc in sorted(kind_cells(kind, analysis).items())]
    return _values(analysis, kind, block, before)


def _members(analysis: Optional[Analysis], kind: str, block: Optional[str], head: str) -> list:
    """What follows `head.`: an engine's rules, or the cells of the block a cell or name refers to."""
    program = analysis.program if analysis is not None else None
    target_kind = None
    if program is not None:
        info = program.blocks.get(head)
        if info is not None and info.kind == "engine" and info.template is not None:
            return [Completion(name, "cell", f"engine {head} rule", stack[0][0].doc)
                    for name, stack in sorted(info.template.items()) if not name.startswith(m.REQUIRE + " ")]
        rc = program.cells.get((block, head)) if block else None
        if rc is not None and rc.ref_target in program.blocks:
            target_kind = program.blocks[rc.ref_target].kind
        elif info is not None:
            target_kind = info.kind
    if target_kind is None and head in m.BLOCK_KINDS:
        target_kind = head
    if target_kind is None:
        return []
    return [Completion(name, "cell", f"{target_kind} cell", doc) for name, doc in sorted(kind_cells(target_kind, analysis).items())]


def _units() -> list:
    from .units import unit_names

    return [Completion(u, "unit", "unit") for u in unit_names()]


def _values(analysis: Optional[Analysis], kind: str, block: Optional[str], before: str) -> list:
    """After `=`: the block's cells, and every block (those of the kind the cell names first)."""
    expected = None
    lhs = re.match(r"\s*(?:let\s+)?([\w.]+)\s*=", before)
    if lhs and block and analysis is not None and analysis.program is not None:
        rc = analysis.program.cells.get((block, lhs.group(1)))
        if rc is not None and rc.ref_target in analysis.program.blocks:
            expected = analysis.program.blocks[rc.ref_target].kind
    out = [Completion(name, "cell", f"{kind} cell", doc) for name, doc in sorted(kind_cells(kind, analysis).items())]
    out += [Completion(name, "function", f"fn {name}({', '.join(fn.params)})", fn.doc)
            for name, fn in sorted(_functions(analysis).items())]
    out += [Completion(name, "function", f"built-in, {f.arity_text()}", f.summary) for name, f in FUNCTIONS.items()]
    for b_kind, name, title in _blocks(analysis):
        what = b_kind if b_kind in ("format", "engine") else "block"
        out.append(Completion(name, what, f"{b_kind}: {title}", first=b_kind == expected))
    return out
