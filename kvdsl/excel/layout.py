"""Where every block and cell of a kind's sheet sits: one row per block, one column per cell.

Row 1 holds the cell's label, row 2 its name and unit; columns A and B the
block name and title.  The columns a reader needs come first; a deployment's
intermediate cells, and the cells of the engines it runs, are grouped and
hidden after them.

A column a reader sees shows its figures as a reader reads them: memory,
rates and prices in GiB, GB/s, TFLOP/s and USD/h, a block named by a cell as
its name (`Qwen3-8B`, not `qwen3_8b`), a figure that may not apply as
"n/a".  Such a column is a twin, just left of the named column it shows;
the named column, in base units (or the id), is grouped and hidden beside
it.  A figure a block types is typed in the twin, and the named column
converts it.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Optional

from ..errors import ExportError
from ..graph import Program
from .validation import HumanUnit, number_format, sheet_unit

HEADER_ROWS = 2
FIRST_COLUMN = 3  # A: block name, B: title
MAX_COLUMNS = 16_384  # Excel's last column, XFD
# the columns a reader of the Deployments sheet needs, in this order; the
# other cells of a deployment are grouped and hidden after them
DEPLOYMENT_COLUMNS = (
    "model", "hardware", "gpus", "replicas", "context", "batch", "kv_dtype", "engine", "workload", "utilization",
    "reserve_bytes", "fits", "max_batch", "max_context", "memory_per_gpu", "weights_bytes_per_gpu",
    "kv_budget_bytes_per_gpu", "kv_bytes_per_gpu", "shortfall_bytes_per_gpu", "ttft_seconds", "tpot_seconds",
    "output_tokens_per_second", "users_served", "meets_targets", "cost_per_month", "cost_per_million_tokens",
    "cost_per_million_output_tokens", "bound", "engine_kv_cache_tokens", "engine_max_concurrency",
)
# a model's figures a reader compares; its other cells are grouped and hidden
MODEL_COLUMNS = ("params", "active_params", "layers", "heads", "kv_heads", "head_dim", "hidden_size", "experts",
                 "experts_per_token", "window", "context", "kv_dtype", "weight_dtype", "scheme", "kv_elements_per_token",
                 "kv_bytes_per_sequence", "weights_bytes", "context_limit", "source")


@dataclass
class Layout:
    """Where every block and cell sits."""

    rows: dict = field(default_factory=dict)  # block -> row
    columns: dict = field(default_factory=dict)  # kind -> {cell: column index}
    blocks: dict = field(default_factory=dict)  # kind -> [block names]


def plan_layout(program: Program, blocks: list) -> Layout:
    """A row for each block of `blocks` on its kind's sheet, a column for each cell; refused past Excel's last column."""
    layout = Layout()
    for info in blocks:
        if len(info.cells) + FIRST_COLUMN > MAX_COLUMNS:
            raise ExportError(f"{info.kind} `{info.name}` has {len(info.cells):,} cells, more than a sheet has columns",
                              info.block.name_span)
    for info in blocks:
        names = layout.blocks.setdefault(info.kind, [])
        layout.rows[info.name] = HEADER_ROWS + 1 + len(names)
        names.append(info.name)
        columns = layout.columns.setdefault(info.kind, {})
        for cell in info.cells:
            if cell not in columns:
                columns[cell] = FIRST_COLUMN + len(columns)
        if len(columns) + FIRST_COLUMN > MAX_COLUMNS:
            raise ExportError(f"the {info.kind} blocks have {len(columns):,} different cells, more than a sheet has columns")
    return layout


def order_columns(layout: Layout, kind: str, long_texts=frozenset()) -> dict:
    """Put the columns a reader needs first; returns {cell: outline level} of the ones grouped and hidden.
    A long text (a source, a note) of a kind without a chosen order is grouped and hidden: on paper it
    would run on over the next page's columns."""
    columns = layout.columns[kind]
    cells = list(columns)

    def rank(cell):
        if kind == "deployment":
            if cell in DEPLOYMENT_COLUMNS:
                return 0, DEPLOYMENT_COLUMNS.index(cell)
            return (3 if "." in cell else 2), cells.index(cell)
        if kind == "model":
            return (0, MODEL_COLUMNS.index(cell)) if cell in MODEL_COLUMNS else (2, cells.index(cell))
        return (2 if cell in long_texts else 0), cells.index(cell)

    ordered = sorted(cells, key=rank)
    layout.columns[kind] = {cell: FIRST_COLUMN + i for i, cell in enumerate(ordered)}
    return {cell: rank(cell)[0] - 1 for cell in ordered if rank(cell)[0] >= 2}


@dataclass(frozen=True)
class Twin:
    """The column just left of a named column that shows it to a reader."""

    column: int
    unit: HumanUnit  # GiB, GB/s, ... (factor 1 for names and for figures shown as they are)
    names: Optional[str] = None  # a reference cell: the kind whose names it shows
    na: bool = False  # the figure may not apply (`none`): shown as "n/a"


def twin_columns(program: Program, values: dict, layout: Layout, kind: str, hidden: dict, choices: dict) -> dict:
    """Give each column a reader sees a twin on its left when it shows memory, a rate or a price in base
    units, names a block by its id, or may not apply; {cell: Twin}.  The named columns with a twin join
    the hidden ones (`hidden` is updated)."""
    twins: dict = {}
    for name in layout.blocks[kind]:
        for cell in program.blocks[name].cells:
            if hidden.get(cell) or cell in twins:
                continue
            key = (name, cell)
            rc, value = program.cells[key], values.get(key)
            unit = sheet_unit(rc.dim) if not isinstance(value, (bool, str)) else None
            target = program.blocks[rc.ref_target].kind if rc.form == "ref" else None
            names = target if target in choices else None
            na = may_be_na(program, key)
            if unit is not None or names or na:
                twins[cell] = (unit or HumanUnit(1, number_format(rc.dim, value), ""), names, na)
    for cell in twins:
        for name in layout.blocks[kind]:
            if (name, cell) in program.cells and may_be_na(program, (name, cell)):
                twins[cell] = twins[cell][:2] + (True,)
    columns, out, shift = layout.columns[kind], {}, 0
    for cell in list(columns):
        if cell in twins:
            out[cell] = Twin(columns[cell] + shift, *twins[cell])
            shift += 1
            hidden[cell] = 1
        columns[cell] += shift
    return out


def may_be_na(program: Program, key) -> bool:
    """Whether a cell's value may be `none` (not applicable): its rule, or a rule it reads, says `none`."""
    from .. import model as m

    found = _NA.setdefault(program, {})
    todo, order = [key], []
    while todo:
        k = todo.pop()
        if k in found or k in order:
            continue
        order.append(k)
        todo.extend(program.dependencies(k) if program.cells[k].form == "rule" else ())
    for k in reversed(order):
        if k in found:
            continue
        rc = program.cells[k]
        own = rc.form == "rule" and any(isinstance(node, m.NoneValue) for node in _nodes(rc.expr))
        found[k] = own or any(found.get(d, False) for d in (program.dependencies(k) if rc.form == "rule" else ()))
    return found[key]


def _nodes(expr):
    from .. import model as m

    todo = [expr]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, m._Node):
            todo.extend(node.children())


_NA: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # program -> key -> may be none
