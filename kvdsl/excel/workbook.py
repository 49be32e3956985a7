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

import re

from ..display import context_label
from ..graph import Key, Program, walk_refs
from .cells import SHEETS, WHAT_IF_CONTEXTS
from .charts import what_if_sheet
from .checks import sheet_validations
from .comparison_sheet import comparison_sheet
from .kind_sheet import kind_sheet
from .layout import order_columns, plan_layout, twin_columns
from .lists import choice_names, lists_sheet, name_of
from .names import cell_name, check_names, column_name, define_names, ids_name
from .plan_sheet import PlanSheet
from .formula import MAX_TEXT_LITERAL, RulePrinter, check_limits, excel_text_literal, number_text
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
        self.choices = choice_names(program, self.layout)
        self.lists: dict = {}  # kind -> the range of its names on the Lists sheet
        self.hidden = {kind: order_columns(self.layout, kind, self._long_texts(kind)) for kind in self.layout.columns}
        self.human = {kind: twin_columns(program, self.values, self.layout, kind, self.hidden[kind], self.choices)
                      for kind in self.layout.columns}
        self.formulas = 0
        self.names = 0
        self.plan = PlanSheet(self) if "deployment" in self.layout.blocks else None
        self.booleans: dict = {}  # sheet -> coordinates of boolean cells
        self._rule_texts: dict = {}  # (source cell, scope, which refs read through a block) -> _RuleText or False

    def human_input(self, key: Key) -> bool:
        """Whether `key` is typed in its twin column (human units, a block's name) on its block sheet."""
        kind = self.program.blocks[key[0]].kind
        rc = self.program.cells[key]
        if key[1] not in self.human.get(kind, {}) or rc.scope or (self.plan is not None and key in self.plan.inputs):
            return False
        return rc.form == "input" or (rc.form == "ref" and isinstance(rc.ref_expr, str))

    def sheet_of(self, kind: str) -> str:
        """The sheet of a kind's blocks."""
        return SHEETS[kind]

    def title_formula(self, block: str) -> str:
        """A block's title as a formula over the inputs it describes: the spec's title while they hold
        their exported values, else the title they give now (a deployment: `model on N x GPU`; a
        workload: its name and the prelude's `in_words`)."""
        info = self.program.blocks[block]
        now = self._title_now(block)
        if now is None:
            return "=" + excel_text_literal(info.title)
        tests = [f"{cell_name(key)}={self._literal(key)}" for key in self._typed_inputs(block)]
        if not tests or len(info.title) > MAX_TEXT_LITERAL:
            return "=" + now
        held = tests[0] if len(tests) == 1 else f"AND({', '.join(tests)})"
        return f"=IF({held}, {excel_text_literal(info.title)}, {now})"

    def title_cell(self, block: str) -> str:
        """The cell holding a block's title, as a formula reads it from another sheet."""
        kind = self.program.blocks[block].kind
        return f"'{self.sheet_of(kind)}'!$B${self.layout.rows[block]}"

    def _long_texts(self, kind: str) -> set:
        """The cells of `kind` whose text is wider than a column gets on some block (a source, a note)."""
        from .kind_sheet import MAX_WIDTH, display_width

        return {cell for name in self.layout.blocks[kind] for cell in self.program.blocks[name].cells
                if isinstance(self.values.get((name, cell)), str) and display_width(self.values[(name, cell)], "@") > MAX_WIDTH}

    def _title_now(self, block: str):
        """The title a deployment's or workload's inputs give, as formula text; None for other kinds."""
        info = self.program.blocks[block]
        if info.kind == "workload" and (block, "in_words") in self.program.cells and "workload" in self.choices:
            return f'{excel_text_literal(self.choices["workload"][block] + ": ")}&{cell_name((block, "in_words"))}'
        if info.kind != "deployment":
            return None
        parts = {}
        for ref in ("model", "hardware"):
            rc = self.program.cells.get((block, ref))
            if rc is None or rc.form != "ref" or self.program.blocks[rc.ref_target].kind not in self.choices:
                return None
            parts[ref] = name_of(self.program.blocks[rc.ref_target].kind, cell_name((block, ref)))
        gpus, replicas = cell_name((block, "gpus")), cell_name((block, "replicas"))
        copies = f'IF({replicas}>1," (x "&{replicas}&" copies)","")' if (block, "replicas") in self.program.cells else '""'
        return f'{parts["model"]}&" on "&{gpus}&" x "&{parts["hardware"]}&{copies}'

    def _typed_inputs(self, block: str) -> list:
        """The cells a reader types for a block: on the Plan sheet, or on its own sheet."""
        keys = [(block, cell) for cell in self.program.blocks[block].cells]
        typed = [k for k in keys if self.plan is not None and k in self.plan.inputs]
        if typed or self.program.blocks[block].kind == "deployment":
            return [k for k in typed if self.program.cells[k].form != "rule"]
        return [k for k in keys if self.program.cells[k].form == "input" and not self.program.cells[k].scope
                and not isinstance(self.values.get(k), str)]

    def _literal(self, key) -> str:
        """The exported value of a typed cell as formula text."""
        value = self.values.get(key)
        rc = self.program.cells[key]
        if rc.form == "ref":
            return excel_text_literal(rc.ref_target)
        if isinstance(value, bool):
            return "TRUE" if value else "FALSE"
        return number_text(value)[0]

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
        from .printer import excel_formula

        return "=" + excel_formula(expr, refs)

    def rule_formula(self, key: Key) -> str:
        """A cell's own rule, as written, over the defined names of the cells it reads.

        A rule that many blocks run (the prelude's, an engine's) is printed
        once: its text is kept with a slot for each cell it reads, filled in
        for each block (see `_RuleText`).
        """
        rc = self.program.cells[key]
        refs = list(walk_refs(rc.expr))
        texts = [self.lookup(r.key, r.via) for r in refs]
        shape = (id(rc.cell), rc.scope, tuple(bool(r.via) for r in refs))
        kept = self._rule_texts.get(shape)
        if kept:
            text = kept.fill(texts)
            check_limits(text)
            return "=" + text
        text = RulePrinter(lambda r: self.lookup(r.key, r.via)).doprint(rc.expr)
        if kept is None:
            self._rule_texts[shape] = _RuleText.of(rc.expr, refs, texts, text)
        return "=" + text

    def expanded_formula(self, expr, expander, extra: dict) -> str:
        """An expanded SymPy expression as a formula over the cells its `Expander` maps its symbols to (and `extra` names)."""
        refs = {sym.name: self.lookup(key, expander.vias.get(sym, ())) for sym, key in expander.symbols.items()}
        refs.update(extra)
        return self.formula(expr, refs)

    def derived(self, what: tuple, make):
        """`make()`, what the workbook derives from the program alone, made once per program.

        A formula printed through SymPy (a solved cell's, a What-if column's),
        the GPU counts an engine runs (a search over NumPy arrays): each is kept
        with the program (`Program.derived`), which goes to disk with them, so
        an export of a program read back imports no SymPy and searches nothing.
        """
        kept = self.program.derived
        if what not in kept:
            kept[what] = make()
        return kept[what]

    # ---- sheets ------------------------------------------------------------

    def build(self):
        """The workbook, its sheets in order, then its names, checks, highlights and printed pages."""
        from openpyxl import Workbook
        from openpyxl.workbook.properties import CalcProperties

        from ..progress import stage

        stage("laying out the workbook")
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
        self.lists = lists_sheet(self, wb)
        define_names(self, wb)
        sheet_validations(self, wb)
        highlights(self, wb)
        for ws in wb.worksheets:
            print_setup(ws, self.plan.scale if self.plan is not None and ws.title == self.plan.title else None)
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


class _RuleText:
    """A rule's formula with a slot for the text of each cell it reads (`pieces`: text, slot, text, ...).

    Made by printing the rule with a stand-in for each cell it reads (a
    name, or a lookup where the real text is one: they print alike); kept
    only when filling in the real texts gives the formula printed directly.
    Each block that runs the rule has the same expression with other cells,
    so filling in their texts gives the formula the printer would.
    """

    _SLOT = re.compile(r"INDEX\(\$\$(\d+)\$\$\)|\$\$(\d+)\$\$")

    def __init__(self, pieces: list):
        self.pieces = pieces

    @classmethod
    def of(cls, expr, refs: list, texts: list, printed: str):
        """The rule text of `expr` whose refs print as `texts`, or False when its slots cannot be told apart."""
        index: dict = {}
        for i, ref in enumerate(refs):
            index.setdefault(id(ref), i)
        stand_in = lambda r: f"INDEX($${index[id(r)]}$$)" if r.via else f"$${index[id(r)]}$$"  # noqa: E731
        parts = cls._SLOT.split(RulePrinter(stand_in).visit(expr)[0])
        pieces = []
        for k in range(0, len(parts), 3):  # text, then the two groups of a slot (one of them None), ...
            pieces.append(parts[k])
            if k + 2 < len(parts):
                pieces.append(int(parts[k + 1] or parts[k + 2]))
        found = cls(pieces)
        return found if found.fill(texts) == printed else False

    def fill(self, texts: list) -> str:
        pieces = self.pieces
        return "".join([texts[p] if j % 2 else p for j, p in enumerate(pieces)])
