"""Workspace -> program: blocks merged with their defaults and parents, names
resolved across blocks and imports, dimensions checked, cycles found, cells
put in dependency order.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Optional

from . import model as m
from .errors import (
    CycleError,
    DimensionError,
    DuplicateError,
    KvdslError,
    MissingCellError,
    ReferenceKindError,
    Span,
    UnknownNameError,
    did_you_mean,
    raise_all,
)
from .loader import Workspace
from .units import BOOL, DECLARED_DIMS, NUMBER, TOKENS, Dim

FUNCTIONS = {"min": (1, None), "max": (1, None), "floor": (1, 1), "ceil": (1, 1), "abs": (1, 1)}

Key = tuple  # (block name, cell name)


@dataclass(frozen=True)
class CellRef:
    """A resolved name in an expression: the cell it means and the reference
    cells it went through (`model.layers` in a deployment goes through its
    `model` cell)."""

    key: Key
    via: tuple
    span: Span
    text: str


@dataclass(eq=False)
class ResolvedCell:
    """One cell of one block, after merging, with its resolved expression.

    `form`: input (a literal), rule (an expression), text, ref (names a
    block), unknown (`?`), pattern (a layer pattern, shown as text).
    """

    block: str
    name: str
    cell: m.Cell
    origin: str  # own, extends, defaults, pattern, set
    form: str
    expr: object = None
    dim: object = None
    ref_target: Optional[str] = None
    ref_expr: object = None  # a CellRef, or the block name for a direct reference
    shadowed: tuple = ()

    @property
    def key(self) -> Key:
        return (self.block, self.name)

    @property
    def span(self) -> Span:
        return self.cell.span


@dataclass
class BlockInfo:
    name: str
    kind: str
    title: str
    block: m.Block
    prelude: bool
    cells: list = field(default_factory=list)  # cell names, display order
    requirements: list = field(default_factory=list)  # names of its `require` conditions


class _Zero:
    """The dimension of a bare `0`, which matches any other."""


ZERO = _Zero()
_ERROR = object()  # the dimension of a cell that already failed: matches anything, reports nothing


class Program:
    """A resolved set of blocks: `blocks`, `cells` and `order` (dependencies first)."""

    def __init__(self, blocks: dict, cells: dict, order: list):
        self.blocks = blocks
        self.cells = cells
        self.order = order

    def cell(self, block: str, name: str) -> ResolvedCell:
        return self.cells[(block, name)]

    def user_blocks(self) -> list:
        """Blocks a user wrote (not the prelude's), of the three reported kinds."""
        return [b for b in self.blocks.values() if not b.prelude and b.kind != "format"]

    def dependencies(self, key: Key) -> list:
        return [ref.key for ref in walk_refs(self.cells[key].expr)]


def walk_refs(expr):
    """Every CellRef in a resolved expression."""
    if expr is None:
        return
    if isinstance(expr, CellRef):
        yield expr
    elif isinstance(expr, m.Unary):
        yield from walk_refs(expr.operand)
    elif isinstance(expr, m.Binary):
        yield from walk_refs(expr.left)
        yield from walk_refs(expr.right)
    elif isinstance(expr, m.Call):
        for arg in expr.args:
            yield from walk_refs(arg)
    elif isinstance(expr, m.If):
        yield from walk_refs(expr.cond)
        yield from walk_refs(expr.then)
        yield from walk_refs(expr.otherwise)


def map_names(expr, fn):
    """A copy of `expr` with every Name replaced by fn(name)."""
    if isinstance(expr, m.Name):
        return fn(expr)
    if isinstance(expr, m.Unary):
        return dataclasses.replace(expr, operand=map_names(expr.operand, fn))
    if isinstance(expr, m.Binary):
        return dataclasses.replace(expr, left=map_names(expr.left, fn), right=map_names(expr.right, fn))
    if isinstance(expr, m.Call):
        return dataclasses.replace(expr, args=tuple(map_names(a, fn) for a in expr.args))
    if isinstance(expr, m.If):
        return dataclasses.replace(
            expr, cond=map_names(expr.cond, fn), then=map_names(expr.then, fn), otherwise=map_names(expr.otherwise, fn)
        )
    return expr


class _Resolver:
    def __init__(self, ws: Workspace, overrides: dict):
        self.ws = ws
        self.overrides = overrides  # block -> {cell name: Cell}
        self.errors: list[KvdslError] = list(ws.errors)
        self.blocks: dict[str, BlockInfo] = {}
        self.cells: dict[Key, ResolvedCell] = {}
        self._targets: dict[Key, Optional[str]] = {}
        self._targets_busy: set = set()
        self._dims: dict[Key, object] = {}
        self._stack: list[Key] = []
        self._cycles: set = set()
        self._poisoned: set = set()  # reference cells already reported: names through them fail quietly
        self._broken: set = set()  # blocks whose `extends` failed: their missing cells are not reported
        self.order: list[Key] = []

    # ---- merging -------------------------------------------------------

    def collect_blocks(self) -> None:
        for block, prelude in self.ws.blocks:
            if block.name in self.blocks:
                first = self.blocks[block.name].block
                self.errors.append(
                    DuplicateError(f"block `{block.name}` is defined twice", block.name_span, hint=f"first defined at {first.name_span}")
                )
                continue
            self.blocks[block.name] = BlockInfo(block.name, block.kind, block.title, block, prelude)

    def _own_cells(self, cells, where: str) -> dict:
        out: dict[str, m.Cell] = {}
        for cell in cells:
            if cell.name in out:
                self.errors.append(
                    DuplicateError(f"cell `{cell.name}` is defined twice in {where}", cell.name_span, hint=f"first defined at {out[cell.name].name_span}")
                )
                continue
            out[cell.name] = cell
        return out

    def _defaults(self, kind: str) -> dict:
        merged: dict[str, list] = {}
        for d in self.ws.defaults:
            if d.kind == kind:
                for name, cell in self._own_cells(d.cells, f"defaults for {kind}").items():
                    merged.setdefault(name, []).insert(0, (cell, "defaults"))
        return merged

    def _chain(self, info: BlockInfo) -> list:
        """The block and its parents, nearest first."""
        chain, seen = [info], {info.name}
        while chain[-1].block.extends:
            b = chain[-1].block
            parent = self.blocks.get(b.extends)
            if parent is None:
                self.errors.append(
                    UnknownNameError(f"`{b.name}` extends `{b.extends}`, which is not defined", b.extends_span,
                                     hint=did_you_mean(b.extends, [n for n, i in self.blocks.items() if i.kind == b.kind]))
                )
                break
            if parent.kind != b.kind:
                self.errors.append(ReferenceKindError(f"a {b.kind} cannot extend the {parent.kind} `{parent.name}`", b.extends_span))
                break
            if parent.name in seen:
                loop = [c.name for c in chain][[c.name for c in chain].index(parent.name):]
                if info.name == min(loop):
                    names = " -> ".join(loop + [parent.name])
                    self.errors.append(CycleError(f"blocks extend each other in a cycle: {names}", b.extends_span))
                else:
                    self.errors.append(_Silent())
                break
            seen.add(parent.name)
            chain.append(parent)
        return chain

    def merge_block(self, info: BlockInfo) -> None:
        """A block's cells: its kind's defaults, under its parents' cells, under its own, under `--set`."""
        stacks: dict[str, list] = self._defaults(info.kind)  # name -> definitions, nearest first
        default_order = list(stacks)
        before = len(self.errors)
        chain = self._chain(info)
        if len(self.errors) > before:
            self._broken.add(info.name)
        for parent in reversed(chain):
            own = parent is info
            origin = "own" if own else "extends"
            cells = self._own_cells(parent.block.cells, f"`{parent.name}`")
            derived = self._pattern_cells(parent, cells, set(default_order))
            if derived:  # a block's own pattern replaces what its parent's pattern said
                for stack in stacks.values():
                    stack[:] = [entry for entry in stack if entry[1] != "pattern"]
            for name, cell in derived.items():
                stacks.setdefault(name, []).insert(0, (cell, "pattern"))
            for name, cell in cells.items():
                stacks.setdefault(name, []).insert(0, (cell, origin))
        for name, cell in self.overrides.get(info.name, {}).items():
            stacks.setdefault(name, []).insert(0, (cell, "set"))
        written = [c.name for c in info.block.cells]
        names = written + [n for n in default_order if n not in written]
        names += [n for n in stacks if n not in names]
        names = [n for n in names if stacks[n]]
        info.cells = [n for n in names if not n.startswith(m.REQUIRE + " ")]
        info.requirements = [n for n in names if n.startswith(m.REQUIRE + " ")]
        for name in names:
            cell, origin = stacks[name][0]
            self.cells[(info.name, name)] = self._classify(info, cell, origin, tuple(c for c, _ in stacks[name][1:]))

    def _pattern_cells(self, info: BlockInfo, cells: dict, known: set) -> dict:
        """`layer_kinds = [sliding(128), full] * 12` -> sliding_layers, full_layers, window, layers."""
        out: dict[str, m.Cell] = {}
        kinds = sorted(n[: -len("_layers")] for n in known if n.endswith("_layers"))
        for cell in cells.values():
            if cell.form != "pattern":
                continue
            if out:
                self.errors.append(DuplicateError("a block has one layer pattern", cell.name_span))
                continue
            counts: dict[str, int] = {}
            window = None
            for layer in cell.layers:
                if f"{layer.kind}_layers" not in known:
                    self.errors.append(UnknownNameError(
                        f"unknown layer kind `{layer.kind}`", layer.span,
                        hint=did_you_mean(layer.kind, kinds) or "layer kinds: " + ", ".join(kinds)))
                    continue
                counts[layer.kind] = counts.get(layer.kind, 0) + 1
                if layer.argument is not None and layer.kind != "sliding":
                    self.errors.append(DimensionError(
                        f"only `sliding` layers take an argument (the window), not `{layer.kind}`", layer.span))
                elif layer.argument is not None:
                    arg = layer.argument
                    if window is not None and window.value != arg.value:
                        self.errors.append(DimensionError("every layer of a pattern must have the same window", arg.span))
                    window = arg
            derived = {f"{kind}_layers": count for kind, count in counts.items()}
            derived.setdefault("layers", len(cell.layers))
            for name, count in derived.items():
                out[name] = dataclasses.replace(cell, name=name, form="rule", expr=m.Num(Fraction(count), NUMBER, cell.span), layers=())
            if window is not None:
                wnum = window if not window.bare else dataclasses.replace(window, dim=TOKENS, bare=False)
                out["window"] = dataclasses.replace(cell, name="window", form="rule", expr=wnum, layers=())
        for name, cell in list(out.items()):
            explicit = cells.get(name)
            if explicit is None:
                continue
            del out[name]
            if name == "layers" and not isinstance(explicit.expr, m.Num):
                self.errors.append(DimensionError(
                    "with a layer pattern, `layers` must be a plain number (or left out)", explicit.expr.span if explicit.expr else explicit.span))
            elif name == "layers" and explicit.expr.value != cell.expr.value:
                self.errors.append(
                    DimensionError(f"the layer pattern has {cell.expr.value} layers but `layers` is {explicit.expr.value}", cell.span)
                )
            elif name != "layers":
                self.errors.append(DuplicateError(f"`{name}` is set both by the layer pattern and explicitly", explicit.name_span, hint=f"the pattern is at {cell.span}"))
        return out

    def _classify(self, info: BlockInfo, cell: m.Cell, origin: str, shadowed: tuple) -> ResolvedCell:
        form = {"text": "text", "unknown": "unknown", "pattern": "pattern", "declare": "declare",
                "require": "require"}.get(cell.form, "rule")
        rc = ResolvedCell(info.name, cell.name, cell, origin, form, shadowed=shadowed)
        if form == "rule" and isinstance(cell.expr, (m.Num, m.Bool)):
            rc.form = "input"
            rc.expr = cell.expr
        return rc

    def _inherited_dim(self, rc: ResolvedCell):
        """The dimension the cell would have without its own value (for `?` and bare numbers)."""
        return self._static_dim(rc.block, rc.shadowed, frozenset())

    def _static_dim(self, block: str, stack: tuple, seen: frozenset):
        """The dimension a definition has by itself: declared, written, or read from the one cell it names.

        It never infers other expressions, so it cannot run into a cycle.
        """
        if not stack:
            return None
        cell = stack[0]
        if cell.form == "declare":
            return DECLARED_DIMS.get(cell.declared)
        if cell.form != "rule":
            return None
        expr = cell.expr
        if isinstance(expr, m.Bool):
            return BOOL
        if isinstance(expr, m.Num):
            if not expr.bare:
                return expr.dim
            below = self._static_dim(block, stack[1:], seen)
            return below if below is not None else NUMBER
        if isinstance(expr, m.Name):
            found = self.resolve_name(block, expr, quiet=True)
            if isinstance(found, CellRef) and found.key not in seen:
                target = self.cells[found.key]
                return self._static_dim(found.key[0], (target.cell,) + target.shadowed, seen | {found.key})
        return None

    # ---- names ---------------------------------------------------------

    def ref_target(self, key: Key) -> Optional[str]:
        """The block a reference cell names, or None for any other cell."""
        if key in self._targets:
            return self._targets[key]
        rc = self.cells.get(key)
        if rc is None or rc.form != "rule" or not isinstance(rc.cell.expr, m.Name) or key in self._targets_busy:
            return None
        self._targets_busy.add(key)
        try:
            found = self.resolve_name(key[0], rc.cell.expr, quiet=True)
            target = None
            if isinstance(found, str):
                target = found
                rc.ref_expr = found
            elif isinstance(found, CellRef):
                target = self.ref_target(found.key)
                if target is not None:
                    rc.ref_expr = found
        finally:
            self._targets_busy.discard(key)
        self._targets[key] = target
        return target

    def resolve_name(self, block: str, name: m.Name, quiet: bool = False):
        """A Name in `block` -> a CellRef, a block name (str), or None after an error."""
        parts = name.parts
        first = parts[0]
        if (block, first) in self.cells:
            if len(parts) == 1:
                return CellRef((block, first), (), name.span, name.dotted)
            if (block, first) in self._poisoned:
                return None
            current = self.ref_target((block, first))
            if (block, first) in self._poisoned:
                return None
            if current is None:
                return self._fail(quiet, UnknownNameError(f"`{first}` is a value, not a block: `{name.dotted}` means nothing", name.span))
            via = [(block, first)]
        elif first in self.blocks:
            if len(parts) == 1:
                return first
            current, via = first, []
        else:
            candidates = [n for (b, n) in self.cells if b == block] + list(self.blocks)
            return self._fail(quiet, UnknownNameError(f"unknown name `{first}`", name.span, hint=did_you_mean(first, candidates)))
        for i, part in enumerate(parts[1:], start=1):
            key = (current, part)
            if key not in self.cells:
                own = [n for (b, n) in self.cells if b == current]
                return self._fail(quiet, UnknownNameError(
                    f"{self.blocks[current].kind} `{current}` has no cell `{part}`", name.span, hint=did_you_mean(part, own)))
            if i == len(parts) - 1:
                return CellRef(key, tuple(via), name.span, name.dotted)
            nxt = self.ref_target(key)
            if key in self._poisoned:
                return None
            if nxt is None:
                return self._fail(quiet, UnknownNameError(f"`{'.'.join(parts[: i + 1])}` is a value, not a block", name.span))
            via.append(key)
            current = nxt
        return None

    def _fail(self, quiet: bool, error: KvdslError):
        if not quiet:
            self.errors.append(error)
        return None

    def resolve_cell(self, rc: ResolvedCell) -> None:
        if rc.form == "declare":
            decl = rc.cell
            rc.dim = _ERROR
            self._poisoned.add(rc.key)
            if rc.block in self._broken:
                return
            self.errors.append(MissingCellError(
                f"{self.blocks[rc.block].kind} `{rc.block}` does not set `{rc.name}` ({decl.declared})",
                self.blocks[rc.block].block.name_span, hint=f"`{rc.name}` is required by {decl.span}"))
            return
        if rc.form == "pattern":
            rc.form = "text"
            return
        if rc.key in self._poisoned and rc.form != "ref":
            rc.dim = _ERROR
            return
        if rc.form not in ("rule", "require"):
            return
        target = self.ref_target(rc.key) if rc.form == "rule" else None
        if target is not None:
            rc.form, rc.ref_target = "ref", target
            return
        ok = True

        def resolve(name: m.Name):
            nonlocal ok
            found = self.resolve_name(rc.block, name)
            if isinstance(found, CellRef):
                return found
            if isinstance(found, str):
                self.errors.append(ReferenceKindError(f"`{name.dotted}` is a {self.blocks[found].kind}, not a number", name.span))
            ok = False
            return name

        rc.expr = map_names(rc.cell.expr, resolve)
        if not ok:
            rc.dim = _ERROR

    def _expected_kind(self, rc: ResolvedCell) -> Optional[str]:
        for cell in rc.shadowed:
            if cell.form == "declare" and cell.declared in m.BLOCK_KINDS:
                return cell.declared
            if cell.form == "rule" and isinstance(cell.expr, m.Name):
                found = self.resolve_name(rc.block, cell.expr, quiet=True)
                if isinstance(found, str):
                    return self.blocks[found].kind
                if isinstance(found, CellRef):
                    target = self.ref_target(found.key)
                    if target:
                        return self.blocks[target].kind
            if cell.form in ("rule", "declare"):
                return None
        return None

    def check_slot(self, rc: ResolvedCell) -> None:
        """A cell that must name a block (`model`, `kv_dtype`) does so, with the right kind.

        A cell that fails here is poisoned: names read through it fail quietly
        instead of repeating the mistake at every use.
        """
        if rc.form in ("unknown", "text", "pattern"):
            expected = self._expected_kind(rc)
            if expected:
                self._poisoned.add(rc.key)
                what = {"unknown": "`?`", "text": "a quoted string", "pattern": "a layer pattern"}[rc.form]
                self.errors.append(ReferenceKindError(
                    f"`{rc.name}` must name a {expected}, not {what}", rc.cell.span, hint=self._choices(expected)))
            return
        if rc.form not in ("rule", "input"):
            return
        expr = rc.cell.expr
        if isinstance(expr, m.Name) and len(expr.parts) > 1 and (rc.block, expr.parts[0]) in self._poisoned:
            self._poisoned.add(rc.key)  # read through a reference already reported
            return
        target = self.ref_target(rc.key)
        if target is not None:
            rc.form, rc.ref_target = "ref", target
            self._check_ref_kind(rc)
            return
        expected = self._expected_kind(rc)
        if not expected:
            return
        self._poisoned.add(rc.key)
        if isinstance(expr, m.Name) and len(expr.parts) == 1 and (rc.block, expr.parts[0]) not in self.cells:
            self.errors.append(UnknownNameError(
                f"unknown {expected} `{expr.dotted}`", expr.span, hint=self._choices(expected, expr.dotted)))
        else:
            self.errors.append(ReferenceKindError(
                f"`{rc.name}` must name a {expected}", expr.span, hint=self._choices(expected)))

    def _check_ref_kind(self, rc: ResolvedCell) -> None:
        expected = self._expected_kind(rc)
        actual = self.blocks[rc.ref_target].kind
        if expected and expected != actual:
            self._poisoned.add(rc.key)
            self.errors.append(ReferenceKindError(
                f"`{rc.name}` must name a {expected}, but `{rc.ref_target}` is a {actual}", rc.cell.expr.span,
                hint=self._choices(expected, rc.ref_target)))

    def _choices(self, kind: str, near: Optional[str] = None) -> str:
        names = sorted(n for n, b in self.blocks.items() if b.kind == kind)
        if not names:
            return f"no {kind} block is defined: import one"
        return (did_you_mean(near, names) if near else None) or f"{kind} blocks: " + ", ".join(names[:12]) + (" ..." if len(names) > 12 else "")

    # ---- dimensions and order -----------------------------------------

    def dim_of(self, key: Key):
        if key in self._dims:
            return self._dims[key]
        if key in self._stack:
            cycle = self._stack[self._stack.index(key) :]
            if frozenset(cycle) not in self._cycles:
                self._cycles.add(frozenset(cycle))
                names = " -> ".join(f"{b}.{c}" for b, c in cycle + [key])
                first = self.cells[cycle[0]]
                self.errors.append(CycleError(f"cells depend on each other in a cycle: {names}", first.cell.name_span))
            return _ERROR
        rc = self.cells[key]
        self._stack.append(key)
        try:
            dim = self._cell_dim(rc)
        finally:
            self._stack.pop()
        self._dims[key] = dim
        rc.dim = dim
        self.order.append(key)
        return dim

    def _cell_dim(self, rc: ResolvedCell):
        if rc.dim is _ERROR:
            return _ERROR
        if rc.form in ("text", "ref"):
            return rc.form
        if rc.form == "unknown":
            inherited = self._inherited_dim(rc)
            return inherited if isinstance(inherited, Dim) or inherited == BOOL else NUMBER
        inherited = self._inherited_dim(rc) if rc.form != "require" else None
        if rc.form == "input" and isinstance(rc.expr, m.Num) and rc.expr.bare:
            if isinstance(inherited, Dim) and not inherited.dimensionless:
                rc.expr = dataclasses.replace(rc.expr, dim=inherited, bare=False)
        dim = self._infer(rc.expr)
        dim = NUMBER if dim is ZERO else dim
        if rc.form == "require":
            if dim not in (BOOL, _ERROR):
                self.errors.append(DimensionError(f"`require` needs a condition, not {_describe(dim)}", rc.cell.expr.span))
            return dim
        if dim is not _ERROR and inherited is not None and inherited != dim:
            where = rc.cell.expr.span if rc.cell.expr is not None else rc.cell.span
            self.errors.append(DimensionError(
                f"`{rc.name}` is {_describe(inherited)}, but this is {_describe(dim)}", where,
                hint=f"`{rc.name}` is defined at {rc.shadowed[0].span}"))
            return _ERROR
        return dim

    def _infer(self, e):
        if isinstance(e, m.Num):
            return ZERO if (e.bare and e.value == 0) else e.dim
        if isinstance(e, m.Bool):
            return BOOL
        if isinstance(e, CellRef):
            dim = self.dim_of(e.key)
            if dim in ("text", "ref"):
                what = "text" if dim == "text" else "a reference to a block"
                self.errors.append(DimensionError(f"`{e.text}` is {what}, not a number", e.span))
                return _ERROR
            return dim
        if isinstance(e, m.Name):
            return _ERROR
        if isinstance(e, m.Unary):
            inner = self._infer(e.operand)
            want = BOOL if e.op == "not" else "number"
            return self._expect(inner, want, e.operand.span, e.op)
        if isinstance(e, m.Binary):
            return self._infer_binary(e)
        if isinstance(e, m.If):
            self._expect(self._infer(e.cond), BOOL, e.cond.span, "if")
            return self._same([e.then, e.otherwise], e.span, "the two branches of `if`")
        if isinstance(e, m.Call):
            return self._infer_call(e)
        return _ERROR

    def _expect(self, dim, want, span: Span, op: str):
        if dim is _ERROR:
            return _ERROR
        if want == BOOL and dim != BOOL:
            self.errors.append(DimensionError(f"`{op}` needs a condition (true or false), not {_describe(dim)}", span))
            return _ERROR
        if want == "number" and dim == BOOL:
            self.errors.append(DimensionError(f"`{op}` needs a number, not a condition", span))
            return _ERROR
        return dim

    def _same(self, exprs, span: Span, what: str):
        dims = [self._infer(x) for x in exprs]
        if any(d is _ERROR for d in dims):
            return _ERROR
        real = [d for d in dims if d is not ZERO]
        if not real:
            return ZERO
        if any(d != real[0] for d in real):
            described = " and ".join(dict.fromkeys(_describe(d) for d in real))
            self.errors.append(DimensionError(f"{what} mix {described}", span))
            return _ERROR
        return real[0]

    def _infer_binary(self, e: m.Binary):
        op = e.op
        if op in ("and", "or"):
            left = self._expect(self._infer(e.left), BOOL, e.left.span, op)
            right = self._expect(self._infer(e.right), BOOL, e.right.span, op)
            return _ERROR if _ERROR in (left, right) else BOOL
        if op in ("+", "-"):
            word = "adds" if op == "+" else "subtracts"
            dim = self._same([e.left, e.right], e.span, f"`{op}` {word} values that")
            if dim == BOOL:
                self.errors.append(DimensionError(f"`{op}` needs numbers, not conditions", e.span))
                return _ERROR
            return dim
        if op in ("<", "<=", ">", ">=", "==", "!="):
            dim = self._same([e.left, e.right], e.span, "the comparison's two sides")
            if dim == BOOL and op not in ("==", "!="):
                self.errors.append(DimensionError(f"`{op}` compares numbers, not conditions", e.span))
            return _ERROR if dim is _ERROR else BOOL
        left = self._expect(self._infer(e.left), "number", e.left.span, op)
        right = self._expect(self._infer(e.right), "number", e.right.span, op)
        if _ERROR in (left, right):
            return _ERROR
        left = NUMBER if left is ZERO else left
        right = NUMBER if right is ZERO else right
        if op == "*":
            return left * right
        if op == "/":
            return left / right
        # ^
        if not right.dimensionless:
            self.errors.append(DimensionError(f"an exponent must be a plain number, not {_describe(right)}", e.right.span))
            return _ERROR
        if left.dimensionless:
            return NUMBER
        if isinstance(e.right, m.Num) and e.right.value.denominator == 1:
            return left ** int(e.right.value)
        self.errors.append(DimensionError(f"{_describe(left)} can only be raised to a whole number written out", e.right.span))
        return _ERROR

    def _infer_call(self, e: m.Call):
        if e.func not in FUNCTIONS:
            self.errors.append(UnknownNameError(f"unknown function `{e.func}`", e.func_span, hint=did_you_mean(e.func, FUNCTIONS) or "functions: " + ", ".join(FUNCTIONS)))
            return _ERROR
        low, high = FUNCTIONS[e.func]
        if len(e.args) < low or (high is not None and len(e.args) > high):
            count = f"{low}" if low == high else f"at least {low}"
            self.errors.append(DimensionError(f"`{e.func}` takes {count} argument{'s' if low != 1 or high != 1 else ''}, not {len(e.args)}", e.span))
            return _ERROR
        dim = self._same(list(e.args), e.span, f"the arguments of `{e.func}`")
        if dim == BOOL:
            self.errors.append(DimensionError(f"`{e.func}` needs numbers, not conditions", e.span))
            return _ERROR
        return dim

    # ---- driver ----------------------------------------------------------

    def run(self) -> Program:
        self.collect_blocks()
        for info in self.blocks.values():
            self.merge_block(info)
        self._poisoned.update(key for key, rc in self.cells.items() if rc.form == "declare")
        for rc in self.cells.values():
            self.check_slot(rc)
        for rc in self.cells.values():
            self.resolve_cell(rc)
        for key in self.cells:
            self.dim_of(key)
        unique = {(type(e), e.message, e.span): e for e in self.errors if not isinstance(e, _Silent)}
        raise_all(list(unique.values()))
        return Program(self.blocks, self.cells, self.order)


class _Silent(KvdslError):
    """A mistake already reported from elsewhere: marks a block broken, prints nothing."""

    def __init__(self):
        super().__init__("")


def _describe(dim) -> str:
    if dim == BOOL:
        return "conditions"
    if isinstance(dim, Dim):
        return str(dim)
    return str(dim)


def build(ws: Workspace, overrides: Optional[dict] = None) -> Program:
    """Resolve a workspace into a Program, or raise every error found."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))
    return _Resolver(ws, overrides or {}).run()
