"""Where every block and cell of a kind's sheet sits: one row per block, one column per cell.

Row 1 holds the cell's label, row 2 its name and unit; columns A and B the
block name and title.  The columns a reader needs come first; a deployment's
intermediate cells, and the cells of the engines it runs, are grouped and
hidden after them.  Memory, rates and prices get a human-unit column (GiB,
GB/s, USD/h) beside their base-unit one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ExportError
from ..graph import Program
from .validation import sheet_unit

HEADER_ROWS = 2
FIRST_COLUMN = 3  # A: block name, B: title
MAX_COLUMNS = 16_384  # Excel's last column, XFD
# the columns a reader of the Deployments sheet needs, in this order; the
# other cells of a deployment are grouped and hidden after them
DEPLOYMENT_COLUMNS = (
    "model", "hardware", "gpus", "replicas", "context", "batch", "kv_dtype", "engine", "workload", "utilization",
    "reserve_bytes", "fits", "max_batch", "max_context", "memory_per_gpu", "weights_bytes_per_gpu",
    "kv_budget_bytes_per_gpu", "kv_bytes_per_gpu", "shortfall_bytes_per_gpu", "ttft_seconds", "tpot_seconds",
    "output_tokens_per_second", "users_served", "meets_targets", "cost_per_month", "cost_per_million_output_tokens",
    "bound", "engine_kv_cache_tokens", "engine_max_concurrency",
)
# kinds whose sheet shows memory, bandwidth, compute and price in human units
# (GiB, GB/s, TFLOP/s, USD/h) in a column beside each base-unit column
HUMAN_UNIT_KINDS = ("model", "hardware")
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


def order_columns(layout: Layout, kind: str) -> dict:
    """Put the columns a reader needs first; returns {cell: outline level} of the ones grouped and hidden."""
    columns = layout.columns[kind]
    cells = list(columns)

    def rank(cell):
        if kind == "deployment":
            if cell in DEPLOYMENT_COLUMNS:
                return 0, DEPLOYMENT_COLUMNS.index(cell)
            return (3 if "." in cell else 2), cells.index(cell)
        if kind == "model":
            return (0, MODEL_COLUMNS.index(cell)) if cell in MODEL_COLUMNS else (2, cells.index(cell))
        return 0, cells.index(cell)

    ordered = sorted(cells, key=rank)
    layout.columns[kind] = {cell: FIRST_COLUMN + i for i, cell in enumerate(ordered)}
    return {cell: rank(cell)[0] - 1 for cell in ordered if rank(cell)[0] >= 2}


def human_columns(program: Program, values: dict, layout: Layout, kind: str) -> dict:
    """Give each memory, rate and price column a human-unit column on its left: {cell: (column, unit)}.

    Where a block types the figure, the reader types it in the human
    column (yellow) and the named base-unit column converts it
    (`=E3*1073741824`); elsewhere the human column shows the base value
    converted (`=F3/1073741824`).
    """
    units = {}
    for name in layout.blocks[kind]:
        for cell in program.blocks[name].cells:
            unit = sheet_unit(program.cells[(name, cell)].dim)
            if unit is not None and not isinstance(values.get((name, cell)), (bool, str)):
                units.setdefault(cell, unit)
    columns, human, shift = layout.columns[kind], {}, 0
    for cell in list(columns):
        if cell in units:
            human[cell] = (columns[cell] + shift, units[cell])
            shift += 1
        columns[cell] += shift
    return human
