"""Workspace -> program: the resolver's passes in order.

1. merge: functions inlined, families and `for` expanded (`kvdsl/expand.py`);
   then (`kvdsl/merge.py`) blocks with their defaults, parents, patterns and
   `--set`; engine rules run in every deployment; unknown cells refused;
2. names (`kvdsl/names.py`): every name resolved, reference cells checked;
3. dimensions (`kvdsl/dims.py`): every cell's dimension, cycles, order.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Optional

from . import model as m
from .dims import DimensionChecker, DimensionRules
from .errors import raise_all
from .expand import expand_workspace
from .loader import Workspace
from .merge import Merger, Silent
from .names import NameResolver
from .program import BlockInfo, CellRef, Form, Key, Origin, Program, ResolvedCell, walk_refs
from .visitor import map_names
from .units import BOOL, Dim

__all__ = ["build", "merged_blocks", "with_literals", "BlockInfo", "CellRef", "Form", "Key", "Origin", "Program", "ResolvedCell", "map_names", "walk_refs"]


class _Resolver(Merger, NameResolver, DimensionChecker):
    def __init__(self, ws: Workspace, overrides: dict, expand: Optional[set] = None, expanded: list = ()):
        written = [d for d, _ in ws.defaults]
        ws = expand_workspace(ws, expand, expanded)  # families, functions and `for` expanded: plain cells from here on
        self.expanded_defaults = list(zip(written, (d for d, _ in ws.defaults)))
        self.ws = ws
        self.overrides = overrides  # block -> {cell name: Cell}
        self.errors: list = list(ws.errors)
        self.blocks: dict[str, BlockInfo] = {}
        self.cells: dict[Key, ResolvedCell] = {}
        self._defined: dict = {}
        self._scoped: dict = {}
        self._targets: dict[Key, Optional[str]] = {}
        self._targets_busy: set = set()
        self._seen_names: dict = {}  # (block, scope) -> (poisoned count, {name parts: the CellRef resolved})
        self._dims: dict[Key, object] = {}
        self._shared_dims: dict = {}  # id(source cell) -> (the cell, {dimensions of its references: its dimension})
        self._stack: list[Key] = []
        self._on_stack: set = set()
        self._cycles: set = set()
        self.blamed: set = set()  # users' cells already reported as of the wrong kind for the prelude's rules
        self._poisoned: set = set()  # reference cells already reported: names through them fail quietly
        self._broken: set = set()  # blocks whose `extends` failed: their missing cells are not reported
        self.order: list[Key] = []
        self.readers: dict = {}  # block -> the other blocks whose rules read its cells
        self.consulted: dict = {}  # block -> the other blocks its names were looked up in
        self.reads: dict = {}  # key -> the cells its rule names, each once, in order
        self._kept: dict = {}  # key -> a cell taken as it was from the program built before (`rebuild`)
        self.dim_rules = DimensionRules(self)

    def merge(self) -> dict:
        """Pass 1 alone: the blocks, each with every cell it has."""
        self.collect_blocks()
        self.check_user_defaults()
        for info in self.blocks.values():
            self.merge_block(info)
        for info in self.blocks.values():
            self.instantiate(info)
        return self.blocks

    def run_once(self, base: Optional[Program] = None, rebuilt: Optional[set] = None,
                 same_cells: bool = True) -> Optional[Program]:
        """`run` (or `rerun` from `base`), then let go of the resolver's parts.

        hazard: the dimension rules and the resolver refer to each other; a
        long-lived process that freezes what survives (the language server)
        would keep every resolver, and all it holds, for good.
        """
        try:
            return self.run() if base is None else self.rerun(base, rebuilt, same_cells)
        finally:
            self.dim_rules = None

    def run(self) -> Program:
        self.merge()
        self._resolve()
        unique = {(type(e), e.message, e.span): e for e in self.errors if not isinstance(e, Silent)}
        raise_all(list(unique.values()))
        return self._program()

    def _resolve(self) -> None:
        """Passes 2 and 3 over the merged cells (those in `_kept` are resolved already)."""
        kept = self._kept
        todo = [rc for key, rc in self.cells.items() if key not in kept] if kept else list(self.cells.values())
        self._poisoned.update(rc.key for rc in todo if rc.form == Form.DECLARE)
        for rc in todo:
            self.check_slot(rc)
        for rc in todo:
            self.resolve_cell(rc)
        for key in self.cells:
            self.dim_of(key)

    def _program(self) -> Program:
        program = Program(self.blocks, self.cells, self.order, self.readers)
        program.consulted, program.reads = self.consulted, self.reads
        program.expanded_defaults = self.expanded_defaults
        program.sources = (self.ws.leave_out, [(shown, prelude) for _, _, shown, prelude in self.ws.sources], self.ws.texts)
        return program

    def rerun(self, base: Program, rebuilt: set, same_cells: bool = True) -> Optional[Program]:
        """Like `run`, resolving only the blocks in `rebuilt`: the others' cells are taken from `base`.

        With `same_cells`, so are the cells of the blocks in `rebuilt` made
        from the same definitions as in `base` (see `_same_cells`); raises
        _Moved when a cell resolved again has another dimension or target
        than before (the cells taken then may not be what a full build makes).  None when the cells do not match `base`'s or the blocks
        rebuilt have a mistake (the full build then says what `run` would).
        """
        self.collect_blocks()
        self.check_user_defaults()
        merged, engines = {}, {}  # kept block -> the keys `merge_block` gave it, those `instantiate` gave it
        for key, rc in base.cells.items():
            if key[0] not in rebuilt:
                (merged if rc.scope is None else engines).setdefault(key[0], []).append(key)
        kept, targets, cells = self._kept, self._targets, self.cells
        for info in list(self.blocks.values()):  # as built: a kept block's cells are those of its `block`
            if info.name not in rebuilt:
                self.blocks[info.name] = base.blocks[info.name]
        for info in self.blocks.values():  # the order of `merge`, which `dim_of` follows
            if info.name in rebuilt:
                self.merge_block(info)
                continue
            for key in merged.get(info.name, ()):
                kept[key] = cells[key] = base.cells[key]
        for info in self.blocks.values():
            if info.name in rebuilt:
                self.instantiate(info)
            else:
                for key in engines.get(info.name, ()):
                    kept[key] = cells[key] = base.cells[key]
        same = self._same_cells(base, rebuilt) if same_cells else {}
        kept.update(same)
        cells.update(same)
        for key, old in kept.items():
            targets[key] = old.ref_target if old.form == Form.REF else None
        for block, readers in base.readers.items():  # the kept blocks read what they read before
            readers = {b for b in readers if b not in rebuilt}
            if readers:
                self.readers[block] = readers
        self.consulted.update((block, set(others)) for block, others in base.consulted.items() if block not in rebuilt)
        self._read_by_same(same, base)
        self.reads.update((key, base.reads[key]) for key in kept if key in base.reads)
        self._resolve()
        if any(not isinstance(e, Silent) for e in self.errors):
            return None
        if same and any(self._moved(base, key) for key in cells if key[0] in rebuilt and key not in same):
            raise _Moved
        return self._program()

    def _same_cells(self, base: Program, rebuilt: set) -> dict:
        """The cells of the blocks in `rebuilt` made from the same definitions as in `base` (the same source
        cell, origin and scope, shadowing the same cells): key -> `base`'s cell, resolved as it was.  None of
        them when a block in `rebuilt` does not have the same cells as in `base`."""
        keys = [key for key in self.cells if key[0] in rebuilt]
        if len(keys) != sum(len(base.block_keys(block)) for block in rebuilt) or \
                any(key not in base.cells for key in keys):
            return {}
        same = {}
        for key in keys:
            new, old = self.cells[key], base.cells[key]
            if new.origin == old.origin and new.scope == old.scope and _same_source(new.cell, old.cell) and \
                    len(new.shadowed) == len(old.shadowed) and all(map(_same_source, new.shadowed, old.shadowed)):
                same[key] = old
        return same

    def _read_by_same(self, same: dict, base: Program) -> None:
        """What the cells taken by `_same_cells` read, as resolving their names would note it: the blocks
        they read (`readers`), and the blocks their block consulted before (`consulted`, all of them: the
        cells resolved again may no longer consult some)."""
        for block in {key[0] for key in same}:
            read = {other for other, readers in base.readers.items() if block in readers}
            # what a cell resolved again read before may be read by none of those taken
            doubtful = read & _blocks_read([base.cells[k] for k in base.block_keys(block) if k not in same], block)
            if doubtful:
                read -= doubtful - _blocks_read([rc for k, rc in same.items() if k[0] == block], block)
            for other in read:
                self.readers.setdefault(other, set()).add(block)
            self.consulted.setdefault(block, set()).update(base.consulted.get(block, ()))

    def _moved(self, base: Program, key: Key) -> bool:
        """Has the cell `key`, resolved again, another dimension or target than in `base`? (What other
        cells' names and dimensions depend on: a rule that became a number changes neither.)"""
        new, old = self.cells[key], base.cells[key]
        return (new.dim, new.ref_target) != (old.dim, old.ref_target)


class _Moved(Exception):
    """A cell resolved again changed its dimension or target: the cells taken with it must be resolved too."""


def _blocks_read(cells, block: str) -> set:
    """The blocks other than `block` that the rules of `cells` read, directly or through reference cells."""
    return {read[0] for rc in cells for ref in walk_refs(rc.expr) for read in (ref.key, *ref.via) if read[0] != block}


def _same_source(a: m.Cell, b: m.Cell) -> bool:
    return a is b or a == b


def merged_blocks(ws: Workspace) -> dict:
    """The blocks of a workspace after merging (pass 1): which cells each block has.

    A workspace with errors raises every one of them, as `build` does.
    """
    resolver = _Resolver(ws, {})
    blocks = resolver.merge()
    resolver.dim_rules = None  # see `run_once`
    if any(not isinstance(e, Silent) for e in resolver.errors):
        build(ws)
    return blocks


def build(ws: Workspace, overrides: Optional[dict] = None) -> Program:
    """Resolve a workspace into a Program, or raise every error found."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))
    return _Resolver(ws, overrides or {}).run_once()


def rebuild(ws: Workspace, base: Program, rebuilt: set) -> Optional[Program]:
    """The program of `ws`, resolving only the blocks in `rebuilt` and taking the others' cells from `base`,
    or None when only a full build can tell (see `kvdsl/reuse.py`, which says which blocks to rebuild)."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))
    try:  # the blocks taken from `base` are taken as built, and its defaults as expanded, not expanded again
        return _Resolver(ws, {}, rebuilt, base.expanded_defaults).run_once(base, rebuilt)
    except _Moved:
        return _Resolver(ws, {}, rebuilt, base.expanded_defaults).run_once(base, rebuilt, same_cells=False)


def with_literals(program: Program, overrides: dict) -> Optional[Program]:
    """`program` with `--set` numbers and flags in place of cells, or None when only a full build can tell.

    A setting that gives a cell of a model, hardware, workload or deployment
    a literal of the dimension the cell already has changes nothing but that
    cell: no name, dimension or order moves, so the program the full build
    would make is this one with the cell replaced.  Anything else (an engine's
    rule, a name, a new dimension, a bare number the full build would give a
    unit) needs the full build.
    """
    cells = dict(program.cells)
    for block, settings in overrides.items():
        info = program.blocks.get(block)
        if info is None or info.kind in m.INSTANCED:
            return None
        for name, cell in settings.items():
            old = program.cells.get((block, name))
            if old is None or not _same_slot(old, cell):
                return None
            expr = cell.expr
            if isinstance(expr, m.Num) and expr.bare and not old.dim.dimensionless:  # `gpus=8`: the unit the cell has
                expr = dataclasses.replace(expr, dim=old.dim, bare=False)
            cells[(block, name)] = ResolvedCell(block, name, cell, Origin.SET, Form.INPUT, expr=expr, dim=old.dim,
                                                shadowed=(old.cell, *old.shadowed))
    derived = Program(program.blocks, cells, program.order, program.readers)
    derived.own_cells = sum(len(settings) for settings in overrides.values()) + len(cells) // 100  # and the dict
    return derived


def _same_slot(old: ResolvedCell, cell: m.Cell) -> bool:
    """True when the literal `cell` takes `old`'s place with `old`'s dimension, as the full build would."""
    if old.scope is not None or old.origin == Origin.PATTERN or old.form not in (Form.INPUT, Form.RULE, Form.UNKNOWN):
        return False
    if cell.form != "rule":
        return False
    expr = cell.expr
    if isinstance(expr, m.Bool):
        return old.dim == BOOL
    if not isinstance(expr, m.Num) or not isinstance(old.dim, Dim):
        return False
    if expr.bare:
        # the full build gives a bare number the unit of the definition it
        # replaces; a literal's is its own dimension, a rule's is known only to the resolver
        return old.dim.dimensionless or (old.form == Form.INPUT and isinstance(old.expr, m.Num))
    return expr.dim == old.dim
