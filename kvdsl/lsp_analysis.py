"""What the language server knows about one open file, without the protocol.

`analyze` loads a file (with the editor's unsaved buffers in place of the
files on disk), resolves and evaluates it, and keeps every error.  The
functions below answer an editor's questions from an `Analysis`: what is at a
position, its hover text, where it is defined, what may be typed there, and
the file's outline.  Positions here are 1-based lines and columns counted in
characters, as `Span` counts them; `kvdsl/lsp.py` converts to and from LSP.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional

from . import model as m
from .errors import KvdslError, Span, flatten
from .functions import FUNCTIONS
from .labels import describe, is_labelled
from .loader import CATALOG, PRELUDE, display_path, load, overlaid, spec_location

PRELUDE_SHOWN = "kvdsl/prelude/"
TOO_DEEP = ("the spec nests too deeply to evaluate (an expression or a chain of rules "
            "thousands of levels deep)")  # as `kvdsl check` says it


@dataclass
class Analysis:
    """One file's text, its parse, and (when it has no errors) its program and values."""

    path: Path
    shown: str
    text: str
    spec: Optional[m.SpecFile] = None
    program: object = None
    values: Optional[dict] = None
    errors: list = field(default_factory=list)
    files: list = field(default_factory=list)  # display paths of every file loaded
    defaults: list = field(default_factory=list)  # (Defaults, is_prelude) of every file loaded
    blocks: list = field(default_factory=list)  # (Block, is_prelude) of every file loaded
    functions: list = field(default_factory=list)  # (FnDef, is_prelude) of every file loaded
    _by_span: Optional[dict] = None

    @property
    def good(self) -> bool:
        """True when the file evaluated: hover and definitions can use it."""
        return self.program is not None and self.values is not None

    def cell_at(self, cell: m.Cell):
        """The resolved cell that uses this written cell (a user block's first), or None."""
        if self._by_span is None:
            self.index()
        return self._by_span.get(cell.span)

    def index(self) -> None:
        """Find, once, the resolved cell of each cell written in this file."""
        self._by_span = {}
        for rc in self.program.cells.values() if self.program is not None else ():
            if rc.cell.span.path == self.shown:
                previous = self._by_span.get(rc.cell.span)
                if previous is None or (self.program.blocks[previous.block].prelude and not self.program.blocks[rc.block].prelude):
                    self._by_span[rc.cell.span] = rc


def analyze(path: Path, text: str, overlay: dict) -> Analysis:
    """Load, resolve and evaluate `path` as if `text` (and `overlay`: path -> text) were on disk."""
    from .api import solve_unknowns
    from .build import program_of
    from .evaluate import evaluate
    from .parser import parse_cached

    path = path.resolve()
    shown = display_path(path)
    result = Analysis(path, shown, text)
    with overlaid({**overlay, path: text}):
        try:
            result.spec = parse_cached(text, shown)
        except (KvdslError, RecursionError):
            pass  # the loader meets the same errors and reports them
        try:
            workspace = load([str(path)])
            result.files = list(workspace.files)
            result.defaults, result.blocks = list(workspace.defaults), list(workspace.blocks)
            result.functions = list(workspace.functions)
            program = program_of(workspace)  # kept from an earlier analysis of the same texts, or built
            result.program = program
            base = evaluate(program)
            solved = solve_unknowns(program, base)
            result.values = evaluate(program, solved, known=base) if solved else base
            result.index()
        except KvdslError as exc:
            result.errors = flatten(exc)
        except RecursionError:
            result.errors = [KvdslError(TOO_DEEP)]
    return result


def source_file(shown: str) -> Path:
    """The file a display path names: prelude paths name the installed package's files."""
    if shown.startswith(PRELUDE_SHOWN):
        return PRELUDE / shown[len(PRELUDE_SHOWN):]
    if shown.startswith(CATALOG):
        return spec_location(shown, Path())
    return Path(os.path.abspath(shown))


# ---- what is at a position ---------------------------------------------------------


@dataclass
class Target:
    """The thing under the cursor.

    kind: "block" (a block's name), "cell" (a cell's own name), "name" (a
    reference inside a rule; `part` is the index of the dotted part under
    the cursor), "function" (a function's name, where it is defined or
    called), "import", or "inside" (elsewhere in a block or defaults).
    """

    kind: str
    block: Optional[m.Block] = None
    defaults: Optional[m.Defaults] = None
    cell: Optional[m.Cell] = None
    name: Optional[str] = None
    node: Optional[m.Name] = None
    part: int = 0
    path: Optional[Path] = None


def contains(span: Optional[Span], line: int, column: int) -> bool:
    """Whether a position lies in a span (its end included, so a cursor just after a word counts)."""
    if span is None:
        return False
    return (span.line, span.column) <= (line, column) <= (span.end_line, span.end_column)


def locate(analysis: Analysis, line: int, column: int) -> Optional[Target]:
    """What the position points at in the analysed text, or None."""
    spec = analysis.spec
    if spec is None:
        return None
    for item in spec.items:
        if not contains(item.span, line, column):
            continue
        if isinstance(item, m.Import):
            return Target("import", path=spec_location(item.path, analysis.path.parent), name=item.path)
        if isinstance(item, m.Block):
            if contains(item.name_span, line, column):
                return Target("block", block=item, name=item.name)
            if contains(item.extends_span, line, column):
                return Target("block", block=item, name=item.extends)
            return _in_cells(item.cells, line, column, Target("inside", block=item))
        if isinstance(item, m.Defaults):
            return _in_cells(item.cells, line, column, Target("inside", defaults=item))
        if isinstance(item, m.FnDef):
            call = _call_at(item.body, line, column)
            if contains(item.name_span, line, column) or call is not None:
                return Target("function", name=call.func if call is not None else item.name)
    return None


def _in_cells(cells, line: int, column: int, outside: Target) -> Target:
    for cell in cells:
        if not contains(cell.span, line, column):
            continue
        if contains(cell.name_span, line, column):
            return Target("cell", block=outside.block, defaults=outside.defaults, cell=cell, name=cell.name)
        call = _call_at(cell.expr, line, column) if cell.expr is not None else None
        if call is not None:
            return Target("function", block=outside.block, defaults=outside.defaults, cell=cell, name=call.func)
        node = _name_at(cell.expr, line, column) if cell.expr is not None else None
        if node is not None:
            offset = column - node.span.column
            part = node.dotted[:offset].count(".")
            return Target("name", block=outside.block, defaults=outside.defaults, cell=cell, name=node.dotted, node=node,
                          part=min(part, len(node.parts) - 1))
        return Target("inside", block=outside.block, defaults=outside.defaults, cell=cell)
    return outside


def _call_at(expr, line: int, column: int) -> Optional[m.Call]:
    """The call whose function name is under the cursor, or None."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, m.Call) and contains(node.func_span, line, column):
            return node
        if isinstance(node, m.Name) and node.index is not None:
            stack.append(node.index)
        if getattr(node, "_fields", ()):
            stack.extend(node.children())
    return None


def _name_at(expr, line: int, column: int) -> Optional[m.Name]:
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, m.Name):
            if node.index is not None:
                stack.append(node.index)
            if contains(node.span, line, column):
                return node
        elif getattr(node, "_fields", ()):
            stack.extend(node.children())
    return None


# ---- what a target means -------------------------------------------------------------


@dataclass
class Meaning:
    """A target resolved in the program: a cell (`key`), a block, or a file."""

    key: Optional[tuple] = None
    block: Optional[str] = None
    path: Optional[Path] = None
    function: Optional[str] = None


def resolve(analysis: Analysis, target: Target) -> Optional[Meaning]:
    """The cell, block or file a target stands for, per the analysis's program."""
    program = analysis.program
    if target.kind == "import":
        return Meaning(path=target.path.resolve())
    if target.kind == "function":
        return Meaning(function=target.name) if target.name in _functions(analysis) or target.name in FUNCTIONS else None
    if program is None:
        return None
    if target.kind == "block":
        return Meaning(block=target.name) if target.name in program.blocks else None
    if target.kind == "cell":
        rc = analysis.cell_at(target.cell)
        return Meaning(key=rc.key) if rc is not None else None
    if target.kind == "name":
        rc = analysis.cell_at(target.cell)
        if rc is None:
            return Meaning(block=target.name) if target.name in program.blocks else None
        return _reference(analysis, rc, target)
    return None


def _reference(analysis: Analysis, rc, target: Target) -> Optional[Meaning]:
    from .program import CellRef, walk_refs

    program = analysis.program
    refs = list(walk_refs(rc.expr))
    if isinstance(rc.ref_expr, CellRef):
        refs.append(rc.ref_expr)
    matching = [ref for ref in refs if ref.span == target.node.span]
    last = len(target.node.parts) - 1
    if len(matching) > 1:  # `engine.x`: the deployment's `engine` cell, then the chosen engine's `x`
        chooser = matching[0].key
        if target.part == 0:
            return Meaning(key=chooser)
        chosen = (chooser[0], f"{(analysis.values or {}).get(chooser)}.{'.'.join(target.node.parts[1:])}")
        return Meaning(key=chosen if chosen in program.cells else matching[-1].key)
    for ref in matching:
        through = list(ref.via) + [ref.key]
        if target.part == last:
            return Meaning(key=ref.key)
        if len(through) == len(target.node.parts):
            return Meaning(key=through[target.part])
        head = target.node.parts[0]
        return Meaning(block=head) if target.part == 0 and head in program.blocks else Meaning(key=ref.key)
    if isinstance(rc.ref_expr, str) and rc.ref_expr == target.name:
        return Meaning(block=rc.ref_expr)
    if target.name in program.blocks:
        return Meaning(block=target.name)
    return None


def definition(analysis: Analysis, target: Target) -> Optional[tuple]:
    """(file, span or None) where the target is defined; a cell's own name leads to the definition it overrides."""
    meaning = resolve(analysis, target)
    if meaning is None:
        return None
    if meaning.path is not None:
        return meaning.path, None
    if meaning.function is not None:
        fn = _functions(analysis).get(meaning.function)
        return (source_file(fn.name_span.path), fn.name_span) if fn is not None else None
    program = analysis.program
    if meaning.block is not None:
        span = program.blocks[meaning.block].block.name_span
        return source_file(span.path), span
    rc = program.cells[meaning.key]
    cell = rc.cell
    if target.kind == "cell" and rc.shadowed:
        cell = rc.shadowed[-1]
    return source_file(cell.name_span.path), cell.name_span


# ---- hover ------------------------------------------------------------------------------


def hover(analysis: Analysis, target: Target) -> Optional[str]:
    """Markdown for the target: a cell's value as `eval` prints it, its rule and origin; a block's verdict."""
    meaning = resolve(analysis, target)
    if meaning is None and target.kind == "cell":  # a cell no block uses yet: what is written
        return "\n".join([f"**{target.cell.name}**"] + (["", target.cell.doc] if target.cell.doc else [])
                         + ["", "```kvspec", target.cell.source.strip(), "```"])
    if meaning is None:
        return None
    if meaning.function is not None:
        return function_hover(analysis, meaning.function)
    if meaning.path is not None:
        shown = display_path(meaning.path)
        held = [f"{b.kind} `{b.name}`" for b, _ in analysis.blocks if b.span.path == shown]
        return f"import `{shown}`" + (": " + ", ".join(held) if held else "")
    if meaning.block is not None:
        return _block_hover(analysis, meaning.block)
    return _cell_hover(analysis, meaning.key)


@lru_cache(maxsize=1)
def _prelude_workspace():
    return load([])


def _functions(analysis: Optional[Analysis]) -> dict:
    """name -> FnDef of every function the analysis loaded (the prelude's when it loaded none)."""
    loaded = analysis.functions if analysis is not None and analysis.functions else _prelude_workspace().functions
    return {fn.name: fn for fn, _ in loaded}


def function_hover(analysis: Analysis, name: str) -> Optional[str]:
    """Markdown for a function: its definition (the body) and where it is, or a built-in's summary."""
    fn = _functions(analysis).get(name)
    if fn is None:
        builtin = FUNCTIONS.get(name)
        return f"**{name}** (built-in, {builtin.arity_text()}): {builtin.summary}" if builtin else None
    lines = [f"**fn {fn.name}**({', '.join(fn.params)})"]
    if fn.doc:
        lines += ["", fn.doc]
    lines += ["", "```kvspec", fn.source.strip(), "```", "",
              f"defined {'in the prelude ' if fn.name_span.path.startswith(PRELUDE_SHOWN) else ''}at `{fn.name_span}`; "
              "inlined where it is called"]
    return "\n".join(lines)


def value_text(analysis: Analysis, key: tuple) -> Optional[str]:
    """A cell's value with its unit, exactly as `kvdsl eval` prints it."""
    from .display import format_value

    if analysis.values is None or key not in analysis.values:
        return None
    return format_value(analysis.values[key], analysis.program.cells[key].dim)


def _cell_hover(analysis: Analysis, key: tuple) -> str:
    program = analysis.program
    rc = program.cells[key]
    info = program.blocks[rc.block]
    value = value_text(analysis, key)
    head = f"**{rc.name}** = `{value}`" if value is not None else f"**{rc.name}**"
    lines = [f"{head}  ({info.kind} `{rc.block}`)"]
    doc = describe(rc).sentence if is_labelled(rc) else describe(rc).description
    if doc:
        lines += ["", doc]
    if rc.cell.member:
        lines += ["", _family_values(analysis, rc)]
    source = rc.cell.source.strip()
    if source:
        lines += ["", "```kvspec", source, "```"]
    lines += ["", origin_text(program, rc)]
    if rc.shadowed:
        lines[-1] += f"; overrides `{rc.shadowed[0].name_span}`"
    return "\n".join(lines)


def _family_values(analysis: Analysis, rc) -> str:
    """`stage_start[1] = 40, stage_start[2] = 80, ...`: every member of the family `rc` belongs to."""
    family = rc.name.rpartition("[")[0]
    members = [key for key in analysis.program.block_keys(rc.block)
               if key[1].startswith(family + "[") and analysis.program.cells[key].cell.span == rc.cell.span]
    shown = ", ".join(f"`{key[1]}` = {value_text(analysis, key)}" for key in members)
    return f"a member of the family `{family}` ({rc.cell.member[0]} = {rc.cell.member[1]}): {shown}"


def origin_text(program, rc) -> str:
    """Where the definition a cell uses was written: its own block, a parent, defaults, an engine, the prelude."""
    from .program import Origin

    where = f"`{rc.cell.name_span}`"
    prelude = rc.cell.span.path.startswith(PRELUDE_SHOWN)
    if rc.origin == Origin.OWN:
        return f"defined in this block at {where}"
    if rc.origin == Origin.EXTENDS:
        parent = next((b.name for b in program.blocks.values() if any(c is rc.cell for c in b.block.cells)), "a parent")
        return f"inherited from `{parent}` (extends) at {where}"
    if rc.origin == Origin.ENGINE:
        return f"rule of engine `{rc.scope}`, {'in the prelude ' if prelude else ''}at {where}"
    if rc.origin == Origin.PATTERN:
        return "derived from the block's layer pattern (`layer_kinds`)"
    kind = program.blocks[rc.block].kind
    return f"{'prelude' if prelude else 'user'} defaults for every {kind}, at {where}"


def _block_hover(analysis: Analysis, name: str) -> str:
    from .report import deployment_verdict, engine_verdict

    info = analysis.program.blocks[name]
    lines = [f"{info.kind} **{name}** \"{info.title}\"", "", f"defined at `{info.block.name_span}`"
             + (" (prelude)" if info.prelude else "")]
    if info.block.extends:
        lines[-1] += f", extends `{info.block.extends}`"
    values = analysis.values
    if info.kind == "deployment" and values is not None:
        lines += ["", deployment_verdict(name, values)]
        if values.get((name, "engine"), "ideal") != "ideal":
            lines += ["", engine_verdict(analysis.program, name, values)]
    return "\n".join(lines)


# ---- outline ----------------------------------------------------------------------------------------


@dataclass
class Symbol:
    """A block (or `defaults`) and its cells, for the outline."""

    name: str
    detail: str
    kind: str  # "block", "defaults", "cell", "import", "function"
    span: Span
    name_span: Span
    children: list = field(default_factory=list)


def symbols(spec: Optional[m.SpecFile]) -> list:
    """The outline of a parsed file: imports, blocks and defaults with their cells."""
    out = []
    for item in spec.items if spec is not None else ():
        if isinstance(item, m.Import):
            out.append(Symbol(item.path, "import", "import", item.span, item.span))
        elif isinstance(item, m.Block):
            cells = [_cell_symbol(c) for c in item.cells]
            out.append(Symbol(item.name, f"{item.kind} \"{item.title}\"", "block", item.span, item.name_span, cells))
        elif isinstance(item, m.Defaults):
            cells = [_cell_symbol(c) for c in item.cells]
            out.append(Symbol("defaults " + ", ".join(item.kinds), "defaults", "defaults", item.span, item.span, cells))
        elif isinstance(item, m.FnDef):
            out.append(Symbol(item.name, f"fn {item.name}({', '.join(item.params)})", "function", item.span, item.name_span))
    return out


def _cell_symbol(cell: m.Cell) -> Symbol:
    if cell.family is not None:
        name = f"{cell.name}[{cell.source.partition('[')[2].partition(']')[0]}]"
        return Symbol(name, "family", "cell", cell.span, cell.name_span)
    return Symbol(cell.name, cell.source.partition("=")[2].strip()[:60] if cell.form == "rule" else cell.form, "cell",
                  cell.span, cell.name_span)
