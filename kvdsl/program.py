"""The resolved program: blocks merged and named, every cell with its resolved
expression, dimension and place in dependency order.  The resolver
(`kvdsl/graph.py`) builds it; evaluation, solving and the printers read it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional

from .compact import pickled_by_fields
from . import model as m
from .errors import Span

Key = tuple  # (block name, cell name)


class Form(str, enum.Enum):
    """What a resolved cell holds."""

    INPUT = "input"  # a literal number or condition
    RULE = "rule"  # an expression over other cells
    TEXT = "text"  # a literal string, or a layer pattern shown as text
    REF = "ref"  # names a block (`model = llama_3_1_8b`)
    UNKNOWN = "unknown"  # `?`: solved against the block's `fits`
    PATTERN = "pattern"  # a layer pattern, before resolution turns it into text
    DECLARE = "declare"  # `name: dimension`, a required input never set
    REQUIRE = "require"  # a condition every value must meet

    def __str__(self) -> str:
        return self.value


class Origin(str, enum.Enum):
    """Where the definition a cell uses was written."""

    OWN = "own"  # in the block itself
    EXTENDS = "extends"  # in a block it extends
    DEFAULTS = "defaults"  # in a `defaults` of its kind
    PATTERN = "pattern"  # derived from a layer pattern
    SET = "set"  # by `--set`
    ENGINE = "engine"  # in an engine block, run by this deployment

    def __str__(self) -> str:
        return self.value


@pickled_by_fields
@dataclass(frozen=True)
class CellRef:
    """A resolved name in an expression: the cell it means and the reference
    cells it went through (`model.layers` in a deployment goes through its
    `model` cell)."""

    key: Key
    via: tuple
    span: Span
    text: str

    _fields = ()

    def children(self) -> tuple:
        return ()


@pickled_by_fields
@dataclass(eq=False)
class ResolvedCell:
    """One cell of one block, after merging, with its resolved expression.

    `scope` is the engine whose rules the cell runs (`vllm` for the cell
    `vllm.num_blocks` of a deployment): names in it are read in that engine
    first, then in the deployment.
    """

    block: str
    name: str
    cell: m.Cell
    origin: Origin
    form: Form
    expr: object = None
    dim: object = None
    ref_target: Optional[str] = None
    ref_expr: object = None  # a CellRef, or the block name for a direct reference
    shadowed: tuple = ()
    scope: Optional[str] = None

    @property
    def key(self) -> Key:
        return (self.block, self.name)

    @property
    def span(self) -> Span:
        return self.cell.span

    @property
    def local_name(self) -> str:
        """The name as the rule that defines it writes it (`num_blocks` for `vllm.num_blocks`)."""
        return self.name[len(self.scope) + 1:] if self.scope else self.name


@pickled_by_fields
@dataclass
class BlockInfo:
    """A merged block: its name, kind, title, the block as written, and its cells' names in display order."""

    name: str
    kind: str
    title: str
    block: m.Block
    prelude: bool
    cells: list = field(default_factory=list)  # cell names, display order
    requirements: list = field(default_factory=list)  # names of its `require` conditions
    template: Optional[dict] = None  # an engine's rules: name -> definitions, nearest first


class Program:
    """A resolved set of blocks: `blocks`, `cells` and `order` (dependencies first)."""

    def __init__(self, blocks: dict, cells: dict, order: list, readers: Optional[dict] = None):
        self.blocks = blocks
        self.cells = cells
        self.order = order
        self.readers = readers or {}
        self._by_block: Optional[dict] = None
        # hazard: caches of what reads what; a Program is not changed once built
        self._dependencies: dict = {}
        self._users: dict = {}
        self._dependents: dict = {}
        self._position: Optional[dict] = None
        self.evaluated: tuple = ()  # (values, errors) of `evaluate` without solved cells, once done
        self.solved: Optional[dict] = None  # the `?` cells' values against `evaluated`, once found (`solve_unknowns`)
        self.own_cells: Optional[int] = None  # the cells not shared with the program it was made from
        # what a later build may take from this one (`kvdsl/reuse.py`): block -> the other blocks
        # its names were looked up in; (kinds left out, [(display path, is prelude)], the files' `texts`);
        # hazard: `reads` is kept here, not on each ResolvedCell, whose one more attribute costs the
        # export 11 MiB of peak memory
        self.consulted: dict = {}
        self.reads: dict = {}  # key -> the cells its rule names, each once, in order (from the dimension pass)
        self.sources: Optional[tuple] = None
        self.expanded_defaults: list = []  # (defaults as written, as expanded): a rebuild expands them no more
        self.kept_answers: dict = {}  # `?` answers of the blocks taken from the program it was rebuilt from
        # what a workbook derived from the program alone (a closed form printed through SymPy, the GPU counts an
        # engine runs), by what it is: made once and kept with it (`WorkbookWriter.derived`)
        self.derived: dict = {}

    def __getstate__(self) -> dict:
        """What is pickled: the program and its plain evaluation, not the caches of what reads what."""
        state = dict(self.__dict__)
        state.update(_by_block=None, _dependencies={}, _users={}, _dependents={}, _position=None)
        return state

    def block_keys(self, block: str) -> list:
        """The keys of every cell of `block` (its requirements and engine cells included)."""
        if self._by_block is None:
            self._by_block = {}
            for key in self.cells:
                self._by_block.setdefault(key[0], []).append(key)
        return self._by_block.get(block, [])

    def in_order(self, keys) -> list:
        """`keys` in dependency order (as `order`), in time proportional to their number."""
        if self._position is None:
            self._position = {key: i for i, key in enumerate(self.order)}
        position = self._position
        return sorted((k for k in keys if k in position), key=position.__getitem__)

    def reading_blocks(self, block: str) -> set:
        """`block` and every block whose rules read its cells, directly or through others."""
        out, todo = {block}, [block]
        while todo:
            for reader in self.readers.get(todo.pop(), ()):
                if reader not in out:
                    out.add(reader)
                    todo.append(reader)
        return out

    def cell(self, block: str, name: str) -> ResolvedCell:
        return self.cells[(block, name)]

    def user_blocks(self) -> list:
        """Blocks a user wrote (not the prelude's), except formats."""
        return [b for b in self.blocks.values() if not b.prelude and b.kind != "format"]

    def engines(self) -> list:
        """Every engine block, in load order."""
        return [b for b in self.blocks.values() if b.kind == "engine"]

    def dependencies(self, key: Key):
        """The keys a cell's rule names, in order (each once where the dimension pass noted them in `reads`)."""
        found = self.reads.get(key)
        if found is None:
            found = self._dependencies.get(key)
            if found is None:
                found = self._dependencies[key] = [ref.key for ref in walk_refs(self.cells[key].expr)]
        return found

    def users(self, block: str) -> dict:
        """key -> the cells of `block` whose rules name it (computed once per block)."""
        found = self._users.get(block)
        if found is None:
            found = self._users[block] = {}
            for key in self.block_keys(block):
                rc = self.cells[key]
                if rc.expr is not None and rc.form in ("rule", "require"):
                    for dep in self.dependencies(key):
                        found.setdefault(dep, []).append(key)
        return found

    def dependents(self, target: Key) -> frozenset:
        """Every cell whose value depends on `target`, `target` included (computed once per cell)."""
        found = self._dependents.get(target)
        if found is None:
            users = [self.users(block) for block in self.reading_blocks(target[0])]
            out, todo = {target}, [target]
            while todo:
                key = todo.pop()
                for by_block in users:
                    for user in by_block.get(key, ()):
                        if user not in out:
                            out.add(user)
                            todo.append(user)
            found = self._dependents[target] = frozenset(out)
        return found


def walk_refs(expr):
    """Every CellRef in a resolved expression, in source order."""
    if expr is None:
        return
    stack = [expr]
    binary = m.Binary
    while stack:
        node = stack.pop()
        cls = node.__class__
        if cls is CellRef:
            yield node
        elif cls is binary:
            stack.append(node.right)
            stack.append(node.left)
        elif node._fields:
            stack.extend(reversed(node.children()))


def static_text(program: Program, expr) -> Optional[str]:
    """The text an expression always has in this program (a literal, a text cell, the block a reference cell names)."""
    if isinstance(expr, m.Str):
        return expr.value
    if isinstance(expr, CellRef):
        rc = program.cells[expr.key]
        if rc.form == Form.REF:
            return rc.ref_target
        if rc.form == Form.TEXT and rc.cell.form == "text":
            return rc.cell.text
    return None


def decided_text(program: Program, cond) -> Optional[bool]:
    """The value of a text comparison that is fixed in this program (`engine == "vllm"`), else None."""
    if isinstance(cond, m.Binary) and cond.op in ("==", "!="):
        left, right = static_text(program, cond.left), static_text(program, cond.right)
        if left is not None and right is not None:
            return (left == right) == (cond.op == "==")
    return None
