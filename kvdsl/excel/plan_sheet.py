"""The Plan sheet: each deployment on one printed page, in plain words and human units.

A section per deployment: its title (a formula that follows the drop-downs),
a one-line verdict, the inputs a reader types (yellow) on the left, the
results on the right and a stacked bar of one GPU's memory.  The typed cells
live here only: the deployment's columns on the Deployments sheet read them
and convert them to base units (`='Plan'!$B$9*1073741824`), so the defined
names `block.cell` keep base units and equal `kvdsl eval`.
"""

from __future__ import annotations

import weakref
from fractions import Fraction
from typing import Optional

from dataclasses import dataclass

from ..labels import describe, is_labelled
from .names import cell_name, ids_name
from .validation import GIB, bounds, data_validation, example_text, human_unit
from .values import stored_number, write_value

SHEET = "Plan"
YELLOW = "FFF2CC"
PALE = "FDF8E8"
RED = "F4CCCC"
BLUE = "1F4E79"
CONTENTS_FIRST = 4  # the first row of the contents list
SECTION_ROWS = 24
GPU_COUNTS = 64  # the GPU counts per copy the drop-down weighs
PRINT_LAST_COLUMN = "P"  # the memory chart, anchored at column I, ends before it
VERDICT_LAST_COLUMN = 16  # the verdict's merged cell spans E to P: the whole printed width

# (cell, words) of what a reader chooses, in the order shown
INPUTS = [
    ("model", "Model"),
    ("hardware", "GPU type"),
    ("gpus", "GPUs per copy"),
    ("replicas", "Copies of the deployment"),
    ("context", "Context per user"),
    ("batch", "Users served at once, per copy"),
    ("kv_dtype", "KV cache precision"),
    ("engine", "Serving engine"),
    ("workload", "Workload"),
    ("utilization", "Share of GPU memory the engine uses"),
    ("reserve_bytes", "Reserve per GPU (runtime overhead)"),
    ("hours_per_month", "Hours per month"),
]
TYPED_FORMS = ("input", "ref", "rule")
SCALED = ("memory_per_gpu", "weights_bytes_per_gpu", "kv_bytes_per_gpu", "tpot_seconds")  # the cell in GiB or ms


@dataclass
class Section:
    block: str
    top: int  # first row


class PlanSheet:
    """Positions and contents of the Plan sheet for a WorkbookWriter."""

    def __init__(self, writer):
        self.w = weakref.proxy(writer)  # no cycle: the program is freed with the writer, not by a collection
        self.program = writer.program
        names = writer.layout.blocks["deployment"]
        first = CONTENTS_FIRST + len(names) + 2
        self.sections = [Section(name, first + i * SECTION_ROWS) for i, name in enumerate(names)]
        self.inputs: dict = {}  # key -> (row, factor, number format, Bounds or None)
        for section in self.sections:
            for i, (cell, _) in enumerate(INPUTS):
                key = (section.block, cell)
                rc = self.program.cells.get(key)
                if rc is None or rc.form not in TYPED_FORMS or rc.scope:
                    continue
                rule = bounds(self.program, key)
                unit = human_unit(rc.dim, rule, [writer.values.get(key)])
                self.inputs[key] = (section.top + 4 + i, unit, rule)

    # ---- what the Deployments sheet reads ------------------------------------

    def reference(self, key) -> str:
        """The base-unit formula of a typed cell on the Deployments sheet."""
        row, unit, _ = self.inputs[key]
        return f"='{SHEET}'!$B${row}" + unit.to_base()

    # ---- writing --------------------------------------------------------------

    def build(self, wb) -> None:
        from openpyxl.styles import Font

        ws = wb.create_sheet(SHEET, 0)
        ws.cell(1, 1, "Plan: one page per deployment").font = Font(bold=True, size=16)
        ws.cell(2, 1, "Type in the yellow cells (drop-downs where there is a list); every other number follows. "
                      "Click a deployment to go to its page.").font = Font(italic=True, color="555555")
        ws.cell(CONTENTS_FIRST - 1, 1, "Deployments").font = Font(bold=True)
        for i, section in enumerate(self.sections):
            link = ws.cell(CONTENTS_FIRST + i, 1, f"=A{section.top}")
            link.hyperlink = f"#'{SHEET}'!A{section.top}"
            link.font = Font(color="0563C1", underline="single")
            verdict = ws.cell(CONTENTS_FIRST + i, 5, f"=E{section.top + 1}")
            verdict.font = Font(color="555555")
            self.w.formulas += 2
        from openpyxl.worksheet.pagebreak import Break, RowBreak

        ws.row_breaks = RowBreak()
        ws.row_breaks.append(Break(id=self.sections[0].top - 1))
        for section in self.sections:
            self._section(ws, section)
            ws.row_breaks.append(Break(id=section.top + SECTION_ROWS - 1))
        for col, width in zip("ABCDEFG", (38, 24, 10, 3, 40, 18, 10)):
            ws.column_dimensions[col].width = width
        # the contents list is for the screen (its links); paper gets one page per deployment
        ws.print_area = f"A{self.sections[0].top}:{PRINT_LAST_COLUMN}{self.sections[-1].top + SECTION_ROWS - 1}"

    def _n(self, block, cell) -> str:
        return cell_name((block, cell))

    def _section(self, ws, section: Section) -> None:
        from openpyxl.comments import Comment
        from openpyxl.styles import Alignment, Font

        d, top = section.block, section.top
        title = ws.cell(top, 1, self.w.title_formula(d))
        title.font = Font(bold=True, size=14)
        ws.cell(top + 1, 1, "Verdict").font = Font(bold=True)
        # the prelude's verdict sentence; its fill reaches across the page, so a long one stays inside it
        verdict = ws.cell(top + 1, 5, "=" + self._n(d, "verdict"))
        verdict.font = Font(bold=True, size=12)
        ws.merge_cells(start_row=top + 1, start_column=5, end_row=top + 1, end_column=VERDICT_LAST_COLUMN)
        ws.cell(top + 2, 1, f"Block `{d}`; its base-unit cells are on the Deployments sheet.").font = Font(
            italic=True, color="777777", size=9)
        self.w.formulas += 2
        for col, text in ((1, "You choose"), (2, "Value"), (3, "Unit"), (5, "Result"), (6, "Value"), (7, "Unit")):
            ws.cell(top + 3, col, text).font = Font(bold=True)
        for i, (cell, words) in enumerate(INPUTS):
            row = top + 4 + i
            key = (d, cell)
            rc = self.program.cells.get(key)
            if rc is None:
                continue
            label, description = describe(rc)
            ws.cell(row, 1, label if is_labelled(rc) else words)
            target = ws.cell(row, 2)
            if key in self.inputs:
                _, unit, rule = self.inputs[key]
                self._typed(ws, target, key, unit, rule)
                ws.cell(row, 3, "" if unit.unit == "%" else unit.unit)
            else:
                target.value = "=" + cell_name(key)
                self.w.formulas += 1
            note = f"{description}\n" if description else ""
            target.comment = Comment(f"{note}Cell {d}.{cell}", "kvdsl", width=300, height=90)
        price_row = top + 4 + len(INPUTS)
        ws.cell(price_row, 1, "Price per GPU-hour (set on the Hardware sheet)")
        price = ws.cell(price_row, 2, "=" + self._via(d, "hardware", "price_per_hour") + "*3600")
        price.number_format = '"$"#,##0.00'
        ws.cell(price_row, 3, "USD/h")
        self.w.formulas += 1
        for i, (words, cell, formula, fmt, unit) in enumerate(self._results(d)):
            row = top + 4 + i
            rc = self.program.cells.get((d, cell)) if cell else None
            direct = formula in (f"={self._n(d, cell)}", f'=IF({self._n(d, cell)},"Yes","No")') or cell in SCALED
            label = describe(rc)[0] if rc is not None and direct and is_labelled(rc) else words
            ws.cell(row, 5, label)
            value = ws.cell(row, 6, formula)
            value.number_format = fmt
            value.alignment = Alignment(horizontal="right")
            ws.cell(row, 7, unit)
            if rc is not None:
                value.comment = Comment(f"{describe(rc)[1]}\nCell {d}.{cell}".strip(), "kvdsl", width=300, height=90)
            self.w.formulas += 1
        self._highlights(ws, d, top)
        self._chart(ws, d, top)

    def _typed(self, ws, target, key, unit, rule) -> None:
        """Write a typed cell in human units, with its drop-down or number validation."""
        from openpyxl.styles import Font, PatternFill
        from openpyxl.worksheet.datavalidation import DataValidation

        rc = self.program.cells[key]
        write_value(self.w, target, key)
        if unit.factor != 1:
            if target.data_type == "f":
                target.value = f"=({target.value[1:]}){unit.from_base()}"
            elif isinstance(target.value, (int, float)):
                target.value = stored_number(Fraction(self.w.values[key]) / unit.factor)
        target.number_format = unit.number_format if unit.unit == "%" else unit.number_format.split('"')[0].strip()
        target.fill = PatternFill("solid", fgColor=YELLOW if rc.form != "rule" else PALE)
        target.font = Font(color=BLUE, bold=True)
        words = dict(INPUTS)[key[1]]
        if rc.form == "ref":
            kind = self.program.blocks[rc.ref_target].kind
            if kind not in self.w.layout.blocks:
                return
            dv = DataValidation(type="list", formula1=f"={ids_name(kind)}", allow_blank=False,
                                showErrorMessage=True, showInputMessage=True, errorTitle="Not in the list",
                                error=f"Choose one of the rows of the {self.w.sheet_of(kind)} sheet.",
                                promptTitle=words[:32], prompt=f"Choose from the list (the {self.w.sheet_of(kind)} sheet).")
        elif key[1] == "gpus" and self._engine_counts(key[0]) is not None:
            dv = self._gpu_validation(key[0], words)
        elif rule is not None:
            dv = data_validation(rule, unit, words, example_text(self.w.values.get(key), unit))
        else:
            return
        if dv is not None:
            ws.add_data_validation(dv)
            dv.add(target.coordinate)

    def _engine_counts(self, d) -> Optional[list]:
        """The GPU counts up to GPU_COUNTS the deployment's engine runs (its tensor-parallel rule), or None if it runs any."""
        import numpy as np

        from ..search import Feasibility, VectorFeasibility, truth

        if (d, "engine_runs_tensor_parallel") not in self.program.cells or (d, "gpus") not in self.program.cells:
            return None
        if not hasattr(self, "_counts"):
            self._counts = {}
        if d not in self._counts:
            rule = Feasibility(self.program, self.w.values, (d, "gpus"), (d, "engine_runs_tensor_parallel"))
            vector = VectorFeasibility(rule)
            xs = np.arange(1, GPU_COUNTS + 1, dtype=float)
            runs = truth(vector.values(xs).get((d, "engine_runs_tensor_parallel")), len(xs))
            counts = [int(x) for x, ok in zip(xs, runs) if ok]
            self._counts[d] = None if len(counts) == GPU_COUNTS else counts
        return self._counts[d]

    def _gpu_validation(self, d, words):
        """A drop-down of the GPU counts the engine runs: another count is refused, as the CLI refuses it."""
        from openpyxl.worksheet.datavalidation import DataValidation

        counts = ",".join(str(n) for n in self._engine_counts(d))
        engine = self.w.values.get((d, "engine_display_name")) or "the engine"
        return DataValidation(type="list", formula1=f'"{counts}"'[:255], allow_blank=False, errorStyle="stop",
                              showErrorMessage=True, showInputMessage=True, errorTitle="A count the engine refuses",
                              error=f"{engine} splits this model's attention heads evenly only over {counts} GPUs "
                                    "(with pipeline stages: that many per stage)."[:255],
                              promptTitle=words[:32], prompt=f"GPU counts {engine} runs: {counts}"[:255])

    def _via(self, d, ref, cell) -> str:
        target = self.program.cells[(d, ref)].ref_target
        return self.w.lookup((target, cell), ((d, ref),))

    def _results(self, d):
        n = lambda cell: self._n(d, cell)  # noqa: E731
        gib = f"/{GIB}"

        def shown(cell, scale=""):  # a figure that does not apply (n/a: it does not fit) is left empty
            return f'=IF(ISNA({n(cell)}),"",{n(cell)}{scale})'

        return [
            ("Fits in memory", "fits", f'=IF({n("fits")},"Yes","No")', "General", ""),
            ("Concurrent users that fit, per copy", "max_batch", f"={n('max_batch')}", "#,##0", "users"),
            ("Longest context at this many users", "max_context", f"={n('max_context')}", "#,##0", "tokens"),
            ("GPU memory", "memory_per_gpu", f"={n('memory_per_gpu')}{gib}", "#,##0.0", "GiB"),
            ("Weights per GPU", "weights_bytes_per_gpu", f"={n('weights_bytes_per_gpu')}{gib}", "#,##0.0", "GiB"),
            ("KV cache per GPU at this many users", "kv_bytes_per_gpu", f"={n('kv_bytes_per_gpu')}{gib}", "#,##0.0", "GiB"),
            ("Room left for KV cache per GPU", "kv_room_left_bytes_per_gpu",
             f"={n('kv_room_left_bytes_per_gpu')}{gib}", "#,##0.0;[Red]-#,##0.0", "GiB"),
            ("Time to first token", "ttft_seconds", shown("ttft_seconds"), "#,##0.00", "s"),
            ("Time per output token", "tpot_seconds", shown("tpot_seconds", "*1000"), "#,##0.0", "ms"),
            ("Output tokens per second, all copies", "output_tokens_per_second",
             shown("total_output_tokens_per_second"), "#,##0", "tokens/s"),
            ("Users served at once, all copies", "users_served", shown("users_served"), "#,##0", "users"),
            ("Meets the workload's targets", "meets_targets", f'=IF({n("meets_targets")},"Yes","No")', "General", ""),
            ("Cost per month", "cost_per_month", shown("cost_per_month"), '"$"#,##0', "USD"),
            ("Cost per million tokens (prompt + answer)", "cost_per_million_tokens",
             shown("cost_per_million_tokens"), '"$"#,##0.00', "USD"),
            ("Cost per million answer tokens", "cost_per_million_output_tokens",
             shown("cost_per_million_output_tokens"), '"$"#,##0.00', "USD"),
        ]

    def _highlights(self, ws, d, top) -> None:
        """Red where a result cannot hold (no fit, a missed target), green where the deployment serves its workload:
        each mark is a condition the prelude states (`fits`, `meets_ttft`, `serves_workload`), never a threshold here."""
        from openpyxl.formatting.rule import FormulaRule
        from openpyxl.styles import Font, PatternFill

        red = PatternFill("solid", fgColor=RED, bgColor=RED)
        green = Font(color="2E7D32", bold=True, size=12)
        n = lambda cell: self._n(d, cell)  # noqa: E731
        rows = {cell: top + 4 + i for i, (_words, cell, *_rest) in enumerate(self._results(d))}
        marks = [(f"E{top + 1}", "serves_workload")] + [
            (f"F{rows[shown]}", condition) for shown, condition in (
                ("fits", "fits"), ("meets_targets", "meets_targets"), ("ttft_seconds", "meets_ttft"), ("tpot_seconds", "meets_tpot"))
            if (d, condition) in self.program.cells]
        for where, condition in marks:
            ws.conditional_formatting.add(where, FormulaRule(formula=[f"NOT({n(condition)})"], fill=red))
        ws.conditional_formatting.add(f"E{top + 1}", FormulaRule(formula=[n("serves_workload")], font=green))

    def _chart(self, ws, d, top) -> None:
        """One GPU's memory as a stacked bar: weights, reserve and headroom, KV cache, free."""
        from openpyxl.chart import BarChart, Reference, Series
        from openpyxl.styles import Font

        n = lambda cell: self._n(d, cell)  # noqa: E731
        parts = [
            ("Weights", f"={n('weights_bytes_per_gpu')}/{GIB}"),
            ("Reserve and engine headroom",
             f"={n('reserved_bytes_per_gpu')}/{GIB}"),
            ("KV cache at this many users", f"={n('kv_bytes_per_gpu')}/{GIB}"),
            ("Free", f"=MAX({n('kv_room_left_bytes_per_gpu')},0)/{GIB}"),  # a bar is never negative
        ]
        chart = BarChart()
        chart.type = "bar"
        chart.grouping = "stacked"
        chart.overlap = 100
        chart.title = "Memory of one GPU (GiB)"
        chart.height, chart.width = 7.5, 13
        chart.legend.position = "b"
        chart.y_axis.title = "GiB"
        chart.y_axis.delete = False
        chart.x_axis.delete = True
        first = top + 4 + len(INPUTS) + 3
        ws.cell(first - 1, 1, "Memory of one GPU (the chart)").font = Font(bold=True)
        for i, (words, formula) in enumerate(parts):
            row = first + i
            ws.cell(row, 1, words)
            ws.cell(row, 2, formula).number_format = "#,##0.0"
            ws.cell(row, 3, "GiB")
            self.w.formulas += 1
            chart.series.append(Series(Reference(ws, min_col=2, min_row=row), title=words))
        ws.add_chart(chart, f"I{top + 3}")
