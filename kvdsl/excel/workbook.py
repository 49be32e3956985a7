"""The workbook: every block on its kind's sheet, every result a live formula.

Sheets, in order: Plan (each deployment on one page, in plain words and
human units; see plan_sheet.py), Deployments, Models, Hardware, Workloads,
README, Summary, Comparison, What-if, Formats, Engines.  A kind's sheet has
one row per block and one column per cell (kind_sheet.py, laid out by
layout.py).  Every cell has a workbook-scoped defined name `block.cell` in
base units, every column a name `all_models.cell` (the range of that
column), the block names of a sheet the name `all_models_ids` and their
titles `all_models_titles` (names.py), so formulas read like the spec:

    =2*qwen3_8b.layers*...
    =INDEX(all_models.kv_heads, MATCH(chat.model, all_models_ids, 0))

The second form is how a deployment reads its model: through the name held in
its `model` cell, so switching that cell (a drop-down on the Plan sheet)
switches every number.  A deployment's typed cells live on the Plan sheet
only; its Deployments columns read them (`='Plan'!$B$21*1073741824`).

`WorkbookWriter` holds what the sheets share (the program, its values, the
layout, the counts of formulas and names) and builds them in order; each
sheet is a module of its own, each cell's value is written by values.py.
"""

from __future__ import annotations

from ..display import context_label
from ..graph import Key, Program
from ..symbolic import Expander
from .cells import SHEETS, WHAT_IF_CONTEXTS
from .charts import what_if_sheet
from .checks import sheet_validations
from .comparison_sheet import comparison_sheet
from .kind_sheet import kind_sheet
from .layout import HUMAN_UNIT_KINDS, human_columns, order_columns, plan_layout
from .names import cell_name, check_names, column_name, define_names, ids_name, titles_name
from .plan_sheet import PlanSheet
from .printer import RulePrinter, excel_formula, excel_text_literal
from .readme_sheet import readme_sheet
from .styles import highlights, print_setup
from .summary_sheet import summary_sheet


class WorkbookWriter:
    """Builds the openpyxl workbook for a program and its evaluated values."""

    def __init__(self, program: Program, values: dict, sources: list):
        self.program = program
        # a `none` value (a cost of a deployment that does not fit) has no number to lay out
        self.values = {k: (None if type(v).__name__ == "_NotApplicable" else v) for k, v in values.items()}
        self.sources = sources
        self.blocks = [b for b in program.blocks.values() if (not b.prelude) or b.kind in ("format", "engine", "workload")]
        check_names(program, self.blocks)
        self.layout = plan_layout(program, self.blocks)
        self.hidden = {kind: order_columns(self.layout, kind) for kind in self.layout.columns}
        self.human = {kind: human_columns(program, self.values, self.layout, kind)
                      for kind in HUMAN_UNIT_KINDS if kind in self.layout.columns}
        self.formulas = 0
        self.names = 0
        self.plan = PlanSheet(self) if "deployment" in self.layout.blocks else None
        self.booleans: dict = {}  # sheet -> coordinates of boolean cells

    def human_input(self, key: Key) -> bool:
        """Whether `key` is typed in a human-unit column of its block sheet."""
        kind = self.program.blocks[key[0]].kind
        rc = self.program.cells[key]
        return key[1] in self.human.get(kind, {}) and rc.form == "input" and not rc.scope

    def sheet_of(self, kind: str) -> str:
        """The sheet of a kind's blocks."""
        return SHEETS[kind]

    def title_formula(self, block: str) -> str:
        """A deployment's title from its drop-downs: `model title on N x hardware title`."""
        info = self.program.blocks[block]
        parts = {}
        for ref in ("model", "hardware"):
            rc = self.program.cells.get((block, ref))
            if rc is None or rc.form != "ref" or self.program.blocks[rc.ref_target].kind not in self.layout.blocks:
                return "=" + excel_text_literal(info.title)
            kind = self.program.blocks[rc.ref_target].kind
            parts[ref] = f"INDEX({titles_name(kind)}, MATCH({cell_name((block, ref))}, {ids_name(kind)}, 0))"
        gpus, replicas = cell_name((block, "gpus")), cell_name((block, "replicas"))
        copies = f'IF({replicas}>1," (x "&{replicas}&" copies)","")' if (block, "replicas") in self.program.cells else '""'
        return f'={parts["model"]}&" on "&{gpus}&" x "&{parts["hardware"]}&{copies}'

    # ---- formulas ----------------------------------------------------------

    def lookup(self, key: Key, via: tuple) -> str:
        """Text reading `key` through the reference cells `via` (live lookups)."""
        if not via:
            return cell_name(key)
        match_value = self.lookup(via[-1], via[:-1])
        kind = self.program.blocks[key[0]].kind
        return f"INDEX({column_name(kind, key[1])}, MATCH({match_value}, {ids_name(kind)}, 0))"

    def formula(self, expr, refs: dict) -> str:
        """A SymPy expression as a formula, its symbols named by `refs`."""
        return "=" + excel_formula(expr, refs)

    def rule_formula(self, key: Key) -> str:
        """A cell's own rule, as written, over the defined names of the cells it reads."""
        return "=" + RulePrinter(lambda r: self.lookup(r.key, r.via)).doprint(self.program.cells[key].expr)

    def expanded_formula(self, expr, expander: Expander, extra: dict) -> str:
        """An expanded SymPy expression as a formula over the cells its symbols stand for (and `extra` names)."""
        refs = {sym.name: self.lookup(key, expander.vias.get(sym, ())) for sym, key in expander.symbols.items()}
        refs.update(extra)
        return self.formula(expr, refs)

    # ---- sheets ------------------------------------------------------------

    def build(self):
        """The workbook, its sheets in order, then its names, checks, highlights and printed pages."""
        from openpyxl import Workbook
        from openpyxl.workbook.properties import CalcProperties

        wb = Workbook()
        wb.remove(wb.active)
        if self.plan is not None:
            self.plan.build(wb)
        for kind in ("deployment", "model", "hardware", "workload"):
            if kind in self.layout.blocks:
                kind_sheet(self, wb, kind)
        readme_sheet(self, wb)
        if "deployment" in self.layout.blocks:
            summary_sheet(self, wb)
        if "model" in self.layout.blocks:
            comparison_sheet(self, wb)
        if "deployment" in self.layout.blocks:
            what_if_sheet(self, wb)
        for kind in ("format", "engine"):
            if kind in self.layout.blocks:
                kind_sheet(self, wb, kind)
        define_names(self, wb)
        sheet_validations(self, wb)
        highlights(self, wb)
        for ws in wb.worksheets:
            print_setup(ws)
        wb.calculation = CalcProperties(fullCalcOnLoad=True)
        return wb


def build_workbook(program: Program, values: dict, sources: list):
    """The workbook of `program` (not yet saved), and what it holds (sheets, blocks, formulas, names)."""
    writer = WorkbookWriter(program, values, sources)
    wb = writer.build()
    return wb, {
        "sheets": wb.sheetnames,
        "blocks": sum(len(v) for v in writer.layout.blocks.values()),
        "formulas": writer.formulas,
        "names": writer.names,
        "contexts": [context_label(t) for t in WHAT_IF_CONTEXTS],
    }


__all__ = ["build_workbook", "WorkbookWriter"]
