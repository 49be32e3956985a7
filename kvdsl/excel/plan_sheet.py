"""The Plan sheet: a contents page, then each deployment on one printed page, in plain words and human units.

A section per deployment: its title (a formula over the inputs it
describes), a one-line verdict, what a reader chooses on the left (yellow:
the deployment's inputs, then its workload's), what it gets on the right and
a chart of one GPU's memory (plan_chart.py).  Every label is the prelude's
(`## Label: description.`); the rows are the cells `DEPLOYMENT_INPUTS` and
`RESULTS` name and every input of the workload kind, so a cell the prelude
adds to workloads shows up here with its label and unit.

The typed cells live here only: the named cells on the Deployments and
Workloads sheets read them and convert them to base units
(`='Plan'!$B$9*1073741824`), or a name back to its id
(`=INDEX(all_models_ids, MATCH('Plan'!$B$9, all_models_names, 0))`), so the
defined names `block.cell` keep base units and equal `kvdsl eval`.  A
workload is typed in the section of the first deployment that serves it; the
others show its figures from there.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Optional

from ..labels import describe
from ..units import BYTES, SECONDS, USD, Dim
from .layout import may_be_na
from .lists import id_of, list_validation, name_of
from .names import cell_name
from .plan_chart import CHART_ROWS, FIGURE_ROWS, memory_chart
from .validation import GIB, HumanUnit, bounds, data_validation, example_text, human_unit, number_format, time_unit
from .values import stored_number, write_value

SHEET = "Plan"
YELLOW = "FFF2CC"
PALE = "FDF8E8"
RED = "F4CCCC"
BLUE = "1F4E79"
CONTENTS_FIRST = 4  # the first row of the contents list
GPU_COUNTS = 64  # the GPU counts per copy the drop-down weighs
# columns: A label, B value, C unit | E label, F value, G unit; the chart below the results, across E to G.
# A and E are as wide as their labels, B as the names it shows.  Pages print A to G; the chart's figures
# sit right of them (I to K), on screen only.
WIDTHS = {"A": 24, "B": 14, "C": 8, "D": 1, "E": 24, "F": 12, "G": 9, "H": 2, "I": 24, "J": 12, "K": 12}
LAST_COLUMN = "G"
NAME_WIDTH = 24  # the widest column B gets for the names it shows (a longer one runs on into C)
LABEL_WIDTHS = {"A": 32, "E": 46}  # the widest columns A and E get; a longer label wraps onto a second line
HEAD_ROWS = 4  # title, verdict, a blank row, the column headers
PAGE_WIDTH_PX, PAGE_HEIGHT_PX, ROW_PX = 1020, 670, 20  # A4 landscape inside the margins (styles.py), at 96 dpi
CM_PER_WIDTH = 0.19  # one unit of column width, in cm (7 pixels at 96 dpi)

# the deployment's cells a reader chooses, in the order shown (those a deployment has)
DEPLOYMENT_INPUTS = ("model", "hardware", "gpus", "replicas", "context", "batch", "kv_dtype", "engine", "workload",
                     "utilization", "reserve_bytes", "hours_per_month")
# what a reader gets, in the order shown
RESULTS = ("fits", "max_batch", "max_context", "memory_per_gpu", "usable_bytes_per_gpu", "weights_bytes_per_gpu",
           "kv_bytes_per_gpu", "kv_room_left_bytes_per_gpu", "ttft_seconds", "tpot_seconds",
           "total_output_tokens_per_second", "users_served", "meets_targets", "cost_per_month",
           "cost_per_million_tokens", "cost_per_million_output_tokens")
TYPED_FORMS = ("input", "ref", "rule")


@dataclass
class Section:
    block: str
    top: int  # first row
    workload: Optional[str] = None  # the workload block it serves, when the workbook has it
    rows: dict = field(default_factory=dict)  # key -> row of each input shown (the workload's too)
    height: int = 0
    tall: int = 0


class PlanSheet:
    """Positions and contents of the Plan sheet for a WorkbookWriter."""

    title = SHEET

    def __init__(self, writer):
        self.w = weakref.proxy(writer)  # no cycle: the program is freed with the writer, not by a collection
        self.program = writer.program
        self.inputs: dict = {}  # key -> (row, HumanUnit, Bounds or None): the cells typed here
        self.sections = []
        top = CONTENTS_FIRST + len(writer.layout.blocks["deployment"]) + 2
        for name in writer.layout.blocks["deployment"]:
            section = self._place(Section(name, top))
            self.sections.append(section)
            top += section.height

    def _place(self, section: Section) -> Section:
        d, row = section.block, section.top + HEAD_ROWS
        for cell in DEPLOYMENT_INPUTS:
            key = (d, cell)
            rc = self.program.cells.get(key)
            if rc is None:
                continue
            section.rows[key] = row
            if rc.form in TYPED_FORMS and not rc.scope:
                self.inputs[key] = (row, self._unit(key), bounds(self.program, key))
            row += 1
        row += 1  # the price per GPU-hour
        ref = self.program.cells.get((d, "workload"))
        if ref is not None and ref.form == "ref" and "workload" in self.w.layout.blocks:
            section.workload = ref.ref_target
            row += 1  # a blank row, then the workload's heading
            for key in self.workload_inputs(section.workload):
                row += 1
                section.rows[key] = row
                if key not in self.inputs:
                    self.inputs[key] = (row, self._unit(key), bounds(self.program, key))
            row += 1
        results = HEAD_ROWS + len([c for c in RESULTS if (d, c) in self.program.cells])
        section.height = max(row - section.top, results + 1 + CHART_ROWS, HEAD_ROWS - 1 + FIGURE_ROWS) + 1
        section.tall = 3  # rows of two lines: the verdict, the workload's title, a long label
        return section

    def workload_inputs(self, workload: str) -> list:
        """The workload's typed figures, in the order its kind defines them."""
        return [(workload, cell) for cell in self.program.blocks[workload].cells
                if self.program.cells[(workload, cell)].form == "input" and not self.program.cells[(workload, cell)].scope
                and not isinstance(self.w.values.get((workload, cell)), (str, bool))]

    def _unit(self, key) -> HumanUnit:
        rc = self.program.cells[key]
        return human_unit(rc.dim, bounds(self.program, key), [self.w.values.get(key)])

    # ---- what the block sheets read ---------------------------------------------

    def reference(self, key) -> str:
        """The formula of a typed cell's named cell: the Plan cell in base units, or a name's id."""
        row, unit, _ = self.inputs[key]
        typed = f"'{SHEET}'!$B${row}"
        names = self._names(key)
        return f"={id_of(names, typed)}" if names else f"={typed}{unit.to_base()}"

    def _names(self, key) -> Optional[str]:
        """The kind a reference cell names, when the workbook lists that kind's names."""
        rc = self.program.cells[key]
        if rc.form != "ref":
            return None
        kind = self.program.blocks[rc.ref_target].kind
        return kind if kind in self.w.choices else None

    # ---- writing --------------------------------------------------------------

    def build(self, wb) -> None:
        from openpyxl.styles import Alignment, Font
        from openpyxl.worksheet.pagebreak import Break, RowBreak

        ws = wb.create_sheet(SHEET, 0)
        ws.cell(1, 1, "Plan: one page per deployment").font = Font(bold=True, size=16)
        ws.cell(2, 1, "Type in the yellow cells (drop-downs where there is a list); every other number follows. "
                      "Click a deployment to go to its page.").font = Font(italic=True, color="555555")
        ws.cell(CONTENTS_FIRST - 1, 1, "Deployments").font = Font(bold=True)
        ws.cell(CONTENTS_FIRST - 1, 5, "Verdict").font = Font(bold=True)
        for i, section in enumerate(self.sections):
            link = ws.cell(CONTENTS_FIRST + i, 1, f"=A{section.top}")
            link.hyperlink = f"#'{SHEET}'!A{section.top}"
            link.font = Font(color="0563C1", underline="single")
            verdict = ws.cell(CONTENTS_FIRST + i, 5, f"=B{section.top + 1}")
            verdict.font = Font(color="555555")
            self.w.formulas += 2
        ws.row_breaks = RowBreak()
        ws.row_breaks.append(Break(id=self.sections[0].top - 1))
        owners, self._charts = {}, []
        for section in self.sections:
            owners.setdefault(section.workload, section)
            self._section(ws, section, owners[section.workload])
            ws.row_breaks.append(Break(id=section.top + section.height - 1))
        widths = self._widths(ws)
        for col, width in widths.items():
            ws.column_dimensions[col].width = width
        self.scale = print_scale([widths[c] for c in "ABCDEFG"], max(s.height + s.tall for s in self.sections))
        for d, figures, anchor in self._charts:  # as wide as the columns under it, once they are known
            memory_chart(self.w, ws, d, figures, anchor, sum(widths[c] for c in "EFG") * CM_PER_WIDTH)
        for row in range(self.sections[0].top, ws.max_row + 1):  # a label longer than its column takes two lines
            for col, letter in ((1, "A"), (5, "E")):
                label = ws.cell(row, col).value
                if isinstance(label, str) and not label.startswith("=") and len(label) * 1.1 + 1 > widths[letter]:
                    ws.cell(row, col).alignment = Alignment(wrap_text=True, vertical="top")
                    ws.row_dimensions[row].height = 30
        last = self.sections[-1]
        ws.print_area = f"A1:{LAST_COLUMN}{last.top + last.height - 1}"

    def _widths(self, ws) -> dict:
        """Column widths: A and E as wide as the labels of the deployment pages, B as the names they show."""
        widths = dict(WIDTHS)
        first = self.sections[0].top
        for col, letter in ((1, "A"), (5, "E")):
            labels = [ws.cell(r, col).value for r in range(first, ws.max_row + 1)]
            longest = max((len(v) for v in labels if isinstance(v, str) and not v.startswith("=")), default=0)
            widths[letter] = max(widths[letter], min(LABEL_WIDTHS[letter], longest * 1.1 + 1))
        shown = [v for r in range(first, ws.max_row + 1) for v in [ws.cell(r, 2).value]
                 if isinstance(v, str) and not v.startswith("=")]
        shown += [n for kind in self.w.choices.values() for n in kind.values()]
        widths["B"] = max(widths["B"], min(NAME_WIDTH, max((len(v) * 1.2 + 2 for v in shown), default=0)))
        return widths

    def _section(self, ws, section: Section, owner: Section) -> None:
        from openpyxl.styles import Alignment, Font

        d, top = section.block, section.top
        title = ws.cell(top, 1, "=" + self.w.title_cell(d))
        title.font = Font(bold=True, size=14)
        ws.cell(top + 1, 1, "Verdict").font = Font(bold=True)
        ws.cell(top + 1, 1).alignment = Alignment(vertical="top")
        # the prelude's verdict sentence, wrapped in a merged cell across the page: its fill covers it all
        verdict = ws.cell(top + 1, 2, "=" + cell_name((d, "verdict")))
        verdict.font = Font(bold=True, size=12)
        verdict.alignment = Alignment(wrap_text=True, vertical="top")
        ws.merge_cells(f"B{top + 1}:{LAST_COLUMN}{top + 1}")
        ws.row_dimensions[top + 1].height = 33
        self.w.formulas += 2
        for col, text in ((1, "You choose"), (2, "Value"), (3, "Unit"), (5, "You get"), (6, "Value"), (7, "Unit")):
            ws.cell(top + 3, col, text).font = Font(bold=True)
        for key, row in section.rows.items():
            if key[0] == d:
                self._input_row(ws, row, key)
        price = max(row for key, row in section.rows.items() if key[0] == d) + 1
        self._price(ws, d, price)
        if section.workload is not None:
            self._workload(ws, section, owner, price + 2)
        shown = [c for c in RESULTS if (d, c) in self.program.cells]
        for i, cell in enumerate(shown):
            self._result(ws, top + HEAD_ROWS + i, (d, cell))
        self._highlights(ws, section)
        self._charts.append((d, top + 3, f"E{top + HEAD_ROWS + len(shown) + 1}"))  # figures in I, from row top + 3

    def _input_row(self, ws, row: int, key) -> None:
        """A choice: its label, its cell (typed, or the value it follows) and its unit."""
        from openpyxl.comments import Comment

        rc = self.program.cells[key]
        label, description = describe(rc)
        ws.cell(row, 1, label)
        target = ws.cell(row, 2)
        if key in self.inputs and self.inputs[key][0] == row:
            _, unit, rule = self.inputs[key]
            self._typed(ws, target, key, unit, rule)
            ws.cell(row, 3, "" if unit.unit in ("%", "") else unit.unit)
        else:
            names = self._names(key)
            target.value = "=" + (name_of(names, cell_name(key)) if names else cell_name(key))
            self.w.formulas += 1
        note = f"{description}\n" if description else ""
        target.comment = Comment(f"{note}Cell {key[0]}.{key[1]}", "kvdsl", width=300, height=90)

    def _price(self, ws, d: str, row: int) -> None:
        from openpyxl.comments import Comment

        if (d, "hardware") not in self.program.cells or self.program.cells[(d, "hardware")].form != "ref":
            return
        ws.cell(row, 1, "Price per GPU-hour")
        price = ws.cell(row, 2, "=" + self._via(d, "hardware", "price_per_hour") + "*3600")
        price.number_format = '"$"#,##0.00'
        price.comment = Comment("The hardware's price per GPU-hour, an example rate: type yours on the Hardware sheet.",
                                "kvdsl", width=300, height=60)
        ws.cell(row, 3, "USD/h")
        self.w.formulas += 1

    def _workload(self, ws, section: Section, owner: Section, row: int) -> None:
        """The workload's heading and its figures: typed here, or shown from the page that types them."""
        from openpyxl.comments import Comment
        from openpyxl.styles import Alignment, Font

        w = section.workload
        heading = ws.cell(row, 1, "=" + self.w.title_cell(w))
        heading.font = Font(bold=True)
        heading.alignment = Alignment(wrap_text=True, vertical="top")
        ws.merge_cells(f"A{row}:C{row}")
        ws.row_dimensions[row].height = 30
        self.w.formulas += 1
        if owner is not section:
            heading.hyperlink = f"#'{SHEET}'!A{owner.top}"
            heading.comment = Comment(f"Its figures are typed on the page of {self.program.blocks[owner.block].title}"
                                      " (click to go there).", "kvdsl", width=300, height=60)
        for key in self.workload_inputs(w):
            here = section.rows[key]
            if owner is section:
                self._input_row(ws, here, key)
                continue
            label, description = describe(self.program.cells[key])
            ws.cell(here, 1, label)
            typed_row, unit, _ = self.inputs[key]
            shown = ws.cell(here, 2, f"=B{typed_row}")
            shown.number_format = ws.cell(typed_row, 2).number_format or _plain_format(unit)
            shown.comment = Comment(f"{description}\nTyped on the page of {self.program.blocks[owner.block].title}.",
                                    "kvdsl", width=300, height=90)
            ws.cell(here, 3, "" if unit.unit in ("%", "") else unit.unit)
            self.w.formulas += 1

    def _typed(self, ws, target, key, unit, rule) -> None:
        """Write a typed cell in human units (a name for a block), with its drop-down or number validation."""
        from openpyxl.styles import Font, PatternFill

        rc = self.program.cells[key]
        names = self._names(key)
        write_value(self.w, target, key)
        if names:
            if target.data_type == "f":  # follows another cell (the model's KV format) until typed over
                target.value = f"={name_of(names, target.value[1:])}"
            else:
                target.value = self.w.choices[names][rc.ref_target]
        elif unit.factor != 1:
            if target.data_type == "f":
                target.value = f"=({target.value[1:]}){unit.from_base()}"
            elif isinstance(target.value, (int, float)):
                target.value = stored_number(Fraction(self.w.values[key]) / unit.factor)
        target.number_format = unit.number_format if unit.unit == "%" or names else _plain_format(unit)
        target.fill = PatternFill("solid", fgColor=YELLOW if rc.form != "rule" else PALE)
        target.font = Font(color=BLUE, bold=True)
        words = describe(rc)[0]
        if names:
            dv = list_validation(self.w, names, words)
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
        if (d, "engine_runs_tensor_parallel") not in self.program.cells or (d, "gpus") not in self.program.cells:
            return None
        return self.w.derived(("gpu counts", d), lambda: _tensor_parallel_counts(self.w, d))

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

    def _result(self, ws, row: int, key) -> None:
        """A result: its label, its value in human units ("n/a" where it does not apply), its unit."""
        from openpyxl.comments import Comment
        from openpyxl.styles import Alignment

        rc = self.program.cells[key]
        label, description = describe(rc)
        ws.cell(row, 5, label)
        value = ws.cell(row, 6)
        name = cell_name(key)
        if isinstance(self.w.values.get(key), bool):
            value.value = f'=IF({name},"Yes","No")'
        else:
            unit, fmt = result_unit(rc.dim, self.w.values.get(key))
            figure = f"{name}{unit.from_base()}"
            value.value = f'=IF(ISNA({name}),"n/a",{figure})' if may_be_na(self.program, key) else f"={figure}"
            value.number_format = fmt + (";[Red]-" + fmt if key[1] == "kv_room_left_bytes_per_gpu" else "")
            ws.cell(row, 7, unit.unit)
        value.alignment = Alignment(horizontal="right")
        value.comment = Comment(f"{description}\nCell {key[0]}.{key[1]}".strip(), "kvdsl", width=300, height=90)
        self.w.formulas += 1

    def _highlights(self, ws, section: Section) -> None:
        """Red where a result cannot hold (no fit, a missed target), green where the deployment serves its workload:
        each mark is a condition the prelude states (`fits`, `meets_ttft`, `serves_workload`), never a threshold here."""
        from openpyxl.formatting.rule import FormulaRule
        from openpyxl.styles import Font, PatternFill

        d, top = section.block, section.top
        red = PatternFill("solid", fgColor=RED, bgColor=RED)
        green = Font(color="2E7D32", bold=True, size=12)
        n = lambda cell: cell_name((d, cell))  # noqa: E731
        shown = [c for c in RESULTS if (d, c) in self.program.cells]
        rows = {cell: top + HEAD_ROWS + i for i, cell in enumerate(shown)}
        verdict = f"B{top + 1}:{LAST_COLUMN}{top + 1}"
        marks = [(verdict, "serves_workload")] + [
            (f"F{rows[cell]}", condition) for cell, condition in (
                ("fits", "fits"), ("meets_targets", "meets_targets"), ("ttft_seconds", "meets_ttft"), ("tpot_seconds", "meets_tpot"))
            if cell in rows and (d, condition) in self.program.cells]
        for where, condition in marks:
            ws.conditional_formatting.add(where, FormulaRule(formula=[f"NOT({n(condition)})"], fill=red))
        ws.conditional_formatting.add(verdict, FormulaRule(formula=[n("serves_workload")], font=green))


def print_scale(widths: list, rows: int) -> int:
    """The print scale (%) at which columns of `widths` fit a page's width and `rows` rows its height.

    A unit of width is 7 pixels in Calibri, Excel's default font; LibreOffice measures it in the font it
    draws instead (DejaVu Serif, where Calibri is missing), a third wider: the page is reckoned for that."""
    wide = sum(9.5 * w + 5 for w in widths)  # pixels at 96 dpi
    return int(min(100, 100 * PAGE_WIDTH_PX / wide, 100 * PAGE_HEIGHT_PX / (rows * ROW_PX)))


def _tensor_parallel_counts(writer, d) -> Optional[list]:
    """The GPU counts up to GPU_COUNTS the engine of deployment `d` runs, or None if it runs any."""
    import numpy as np

    from ..search import Feasibility, VectorFeasibility, truth

    rule = Feasibility(writer.program, writer.values, (d, "gpus"), (d, "engine_runs_tensor_parallel"))
    xs = np.arange(1, GPU_COUNTS + 1, dtype=float)
    runs = truth(VectorFeasibility(rule).values(xs).get((d, "engine_runs_tensor_parallel")), len(xs))
    counts = [int(x) for x, ok in zip(xs, runs) if ok]
    return None if len(counts) == GPU_COUNTS else counts


def result_unit(dim, value) -> tuple:
    """(the unit a result is shown in, its number format): GiB, s or ms, dollars, counts with separators."""
    if dim == BYTES:
        return HumanUnit(GIB, "#,##0.0", "GiB"), "#,##0.0"
    if dim == SECONDS:
        unit = time_unit([value])
        return (unit, "#,##0.00") if unit.unit != "ms" else (unit, "#,##0.0")
    if dim == USD:
        return HumanUnit(1, '"$"#,##0.00', "USD"), '"$"#,##0.00'
    unit = dim.unit() if isinstance(dim, Dim) and not dim.dimensionless else ""
    return HumanUnit(1, "#,##0", unit), _plain_format(HumanUnit(1, number_format(dim, value), unit))


def _plain_format(unit: HumanUnit) -> str:
    """A number format without its unit suffix (the unit has a column of its own)."""
    return unit.number_format.split('"')[0].strip() or "General"
