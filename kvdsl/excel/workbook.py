"""The workbook: every block on its kind's sheet, every result a live formula.

Sheets, in order: Plan (each deployment on one page, in plain words and
human units; see plan_sheet.py), Deployments, Models, Hardware, Workloads,
README, Summary, Comparison, What-if, Formats, Engines.  A kind's sheet has
one row per block and one column per cell: row 1 the cell's label (its
description as the note), row 2 the cell name and unit; the first two columns
the block name and title.  The columns a reader needs come first; a
deployment's intermediate cells, and the cells of the engines it runs, are
grouped and hidden after them.  Every cell has a workbook-scoped defined name
`block.cell` in base units, every column a name `all_models.cell` (the range
of that column), the block names of a sheet the name `all_models_ids` and
their titles `all_models_titles`, so formulas read like the spec:

    =2*qwen3_8b.layers*...
    =INDEX(all_models.kv_heads, MATCH(chat.model, all_models_ids, 0))

The second form is how a deployment reads its model: through the name held in
its `model` cell, so switching that cell (a drop-down on the Plan sheet)
switches every number.  A deployment's typed cells live on the Plan sheet
only; its Deployments columns read them (`='Plan'!$B$21*1073741824`).

Naming rule: a name whose first part reads as a cell reference (`h100`,
`tp2`, `r`, `c`, `r1c1`) gets a leading underscore: `_h100.memory`.
"""

from __future__ import annotations

import datetime
import functools
import re
import zipfile
from dataclasses import dataclass, field

from ..display import context_label
from ..errors import ExportError
from ..graph import Key, Origin, Program
from ..symbolic import Expander
from ..units import BYTES, SECONDS, TOKENS, USD, Dim
from ..labels import describe
from .cells import SHEETS, WHAT_IF_CONTEXTS, column_letter, text_cell
from .plan_sheet import PlanSheet
from .printer import UNBOUNDED, RulePrinter, excel_formula, excel_text_literal
from .validation import Bounds, bounds, data_validation, example_text, human_unit, sheet_unit, yes_no_validation

COLUMN_SETS = {"model": "all_models", "hardware": "all_hardware", "deployment": "all_deployments", "format": "all_formats",
               "engine": "all_engines", "workload": "all_workloads"}
HEADER_ROWS = 2
FIRST_COLUMN = 3  # A: block name, B: title
GIB = 1024**3
MAX_COLUMNS = 16_384  # Excel's last column, XFD
MAX_NAME = 255  # Excel's longest defined name
RESERVED_PREFIXES = ("_xlfn", "_xlnm", "_xlws")  # names Excel keeps for itself (compared ignoring case)
# A boolean cell reads Yes/No through a conditional format's number format: the
# cell's own format stays General, so the cell stays a boolean (LibreOffice
# saves a boolean with a number format of its own as a number).
YES_NO = '"Yes";"Yes";"No"'
# the columns a reader of the Deployments sheet needs, in this order; the
# other cells of a deployment are grouped and hidden after them
DEPLOYMENT_COLUMNS = (
    "model", "hardware", "gpus", "replicas", "context", "batch", "kv_dtype", "engine", "workload", "utilization",
    "reserve_bytes", "fits", "max_batch", "max_context", "memory_per_gpu", "weights_bytes_per_gpu",
    "kv_budget_bytes_per_gpu", "kv_bytes_per_gpu", "shortfall_bytes_per_gpu", "ttft_seconds", "tpot_seconds",
    "output_tokens_per_second", "users_served", "meets_targets", "cost_per_month", "cost_per_million_output_tokens",
    "bound", "engine_kv_cache_tokens", "engine_max_concurrency",
)
# a model's figures a reader compares; its other cells are grouped and hidden
# kinds whose sheet shows memory, bandwidth, compute and price in human units
# (GiB, GB/s, TFLOP/s, USD/h) in a column beside each base-unit column
HUMAN_UNIT_KINDS = ("model", "hardware")
MODEL_COLUMNS = ("params", "active_params", "layers", "heads", "kv_heads", "head_dim", "hidden_size", "experts",
                 "experts_per_token", "window", "context", "kv_dtype", "weight_dtype", "scheme", "kv_elements_per_token",
                 "kv_bytes_per_sequence", "weights_bytes", "context_limit", "source")

_A1 = re.compile(r"^([A-Za-z]{1,3})(\d+)$")
_R1C1 = re.compile(r"^[Rr]\d*([Cc]\d*)?$|^[Cc]\d*$")


_MEMBER = re.compile(r"\[(\d+)\]")


@functools.lru_cache(maxsize=None)
def excel_name(name: str) -> str:
    """A defined name Excel accepts for `name` (see the module docstring)."""
    name = _MEMBER.sub(r".\1", name)  # `stage_start[3]` -> `stage_start.3`: no kvspec name part starts with a digit
    head = name.split(".", 1)[0]
    match = _A1.match(head)
    if match:
        column = 0
        for ch in match.group(1).upper():
            column = column * 26 + ord(ch) - 64
        if column <= 16384 and 1 <= int(match.group(2)) <= 1048576:
            return "_" + name
    if _R1C1.match(head) or head.upper() in ("TRUE", "FALSE"):
        return "_" + name
    return name


@dataclass
class Layout:
    """Where every block and cell sits."""

    rows: dict = field(default_factory=dict)  # block -> row
    columns: dict = field(default_factory=dict)  # kind -> {cell: column index}
    blocks: dict = field(default_factory=dict)  # kind -> [block names]


def plan_layout(program: Program, blocks: list) -> Layout:
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


class WorkbookWriter:
    """Builds the openpyxl workbook for a program and its evaluated values."""

    def __init__(self, program: Program, values: dict, sources: list):
        self.program = program
        # a `none` value (a cost of a deployment that does not fit) has no number to lay out
        self.values = {k: (None if type(v).__name__ == "_NotApplicable" else v) for k, v in values.items()}
        self.sources = sources
        self.blocks = [b for b in program.blocks.values() if (not b.prelude) or b.kind in ("format", "engine", "workload")]
        self._check_names()
        self.layout = plan_layout(program, self.blocks)
        self.hidden = {kind: self._order_columns(kind) for kind in self.layout.columns}
        self.human = {kind: self._human_columns(kind) for kind in HUMAN_UNIT_KINDS if kind in self.layout.columns}
        self.formulas = 0
        self.names = 0
        self.plan = PlanSheet(self) if "deployment" in self.layout.blocks else None
        self.booleans: dict = {}  # sheet -> coordinates of boolean cells

    def _order_columns(self, kind: str) -> dict:
        """Put the columns a reader needs first; returns {cell: outline level} of the ones grouped and hidden."""
        columns = self.layout.columns[kind]
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
        self.layout.columns[kind] = {cell: FIRST_COLUMN + i for i, cell in enumerate(ordered)}
        return {cell: rank(cell)[0] - 1 for cell in ordered if rank(cell)[0] >= 2}

    def _human_columns(self, kind: str) -> dict:
        """Give each memory, rate and price column a human-unit column on its left: {cell: (column, unit)}.

        Where a block types the figure, the reader types it in the human
        column (yellow) and the named base-unit column converts it
        (`=E3*1073741824`); elsewhere the human column shows the base value
        converted (`=F3/1073741824`).
        """
        units = {}
        for name in self.layout.blocks[kind]:
            for cell in self.program.blocks[name].cells:
                unit = sheet_unit(self.program.cells[(name, cell)].dim)
                if unit is not None and not isinstance(self.values.get((name, cell)), (bool, str)):
                    units.setdefault(cell, unit)
        columns, human, shift = self.layout.columns[kind], {}, 0
        for cell in list(columns):
            if cell in units:
                human[cell] = (columns[cell] + shift, units[cell])
                shift += 1
            columns[cell] += shift
        return human

    def human_input(self, key: Key) -> bool:
        """Whether `key` is typed in a human-unit column of its block sheet."""
        kind = self.program.blocks[key[0]].kind
        rc = self.program.cells[key]
        return key[1] in self.human.get(kind, {}) and rc.form == "input" and not rc.scope

    def sheet_of(self, kind: str) -> str:
        """The sheet of a kind's blocks."""
        return SHEETS[kind]

    @staticmethod
    def titles_name(kind: str) -> str:
        """The range of block titles of a kind."""
        return f"{COLUMN_SETS[kind]}_titles"

    def title_formula(self, block: str) -> str:
        """A deployment's title from its drop-downs: `model title on N x hardware title`."""
        info = self.program.blocks[block]
        parts = {}
        for ref in ("model", "hardware"):
            rc = self.program.cells.get((block, ref))
            if rc is None or rc.form != "ref" or self.program.blocks[rc.ref_target].kind not in self.layout.blocks:
                return "=" + excel_text_literal(info.title)
            kind = self.program.blocks[rc.ref_target].kind
            parts[ref] = f"INDEX({self.titles_name(kind)}, MATCH({self.cell_name((block, ref))}, {self.ids_name(kind)}, 0))"
        gpus, replicas = self.cell_name((block, "gpus")), self.cell_name((block, "replicas"))
        copies = f'IF({replicas}>1," (x "&{replicas}&" copies)","")' if (block, "replicas") in self.program.cells else '""'
        return f'={parts["model"]}&" on "&{gpus}&" x "&{parts["hardware"]}&{copies}'

    # ---- names -------------------------------------------------------------

    def _check_names(self) -> None:
        """Refuse names Excel would merge, reserve or cut, before anything is written.

        Excel and LibreOffice compare defined names ignoring case, keep the
        prefixes `_xlfn`, `_xlnm` and `_xlws` for themselves, and take at most
        255 characters; every name the workbook defines is checked.
        """
        seen: dict[str, str] = {}
        for info in self.blocks:
            name = excel_name(info.name).lower()
            if name in seen:
                raise ExportError(
                    f"blocks `{seen[name]}` and `{info.name}` would share defined names in Excel "
                    f"(names ignore case, and `{excel_name(seen[name])}` is how a cell-like name is written): rename one",
                    info.block.name_span)
            seen[name] = info.name
            if name.startswith(RESERVED_PREFIXES):
                raise ExportError(f"a block may not be named `{info.name}` in a workbook: Excel keeps names that start "
                                  f"with {', '.join(f'`{p}`' for p in RESERVED_PREFIXES)} for itself", info.block.name_span)
            if name in ({c.lower() for c in COLUMN_SETS.values()} | {self.ids_name(k).lower() for k in COLUMN_SETS}
                        | {self.titles_name(k).lower() for k in COLUMN_SETS}):
                raise ExportError(f"a block may not be named `{info.name}` in a workbook: the name is taken by a column",
                                  info.block.name_span)
        owners: dict[str, tuple] = {}
        for defined, span, what in self.defined_names():
            if len(defined) > MAX_NAME:
                raise ExportError(f"{what} is longer than the {MAX_NAME} characters Excel allows in a name "
                                  f"(its name has {len(defined)})", span)
            if defined.lower().startswith(RESERVED_PREFIXES):
                raise ExportError(f"{what} would be named `{defined}`, a prefix Excel keeps for itself", span)
            other = owners.setdefault(defined.lower(), (defined, span, what))
            if other[2] != what:
                raise ExportError(f"{other[2]} and {what} would share the defined name `{other[0]}` in Excel "
                                  f"(names ignore case): rename one", span, hint=f"the other is at {other[1]}")

    def defined_names(self):
        """(name, span, description) of every name the workbook defines, cells first."""
        columns: dict[str, dict] = {}
        for info in self.blocks:
            for cell in info.cells:
                span = self.program.cells[(info.name, cell)].cell.name_span
                yield self.cell_name((info.name, cell)), span, f"cell `{info.name}.{cell}`"
                columns.setdefault(info.kind, {}).setdefault(cell, span)
        for kind, cells in columns.items():
            yield self.ids_name(kind), None, f"the list of {SHEETS[kind].lower()}"
            yield self.titles_name(kind), None, f"the titles of {SHEETS[kind].lower()}"
            for cell, span in cells.items():
                yield self.column_name(kind, cell), span, f"column `{self.column_name(kind, cell)}`"

    @staticmethod
    def ids_name(kind: str) -> str:
        """The range of block names of a kind (no dot, so no cell can take it)."""
        return f"{COLUMN_SETS[kind]}_ids"

    def cell_name(self, key: Key) -> str:
        return excel_name(f"{key[0]}.{key[1]}")

    def column_name(self, kind: str, cell: str) -> str:
        return excel_name(f"{COLUMN_SETS[kind]}.{cell}")

    def lookup(self, key: Key, via: tuple) -> str:
        """Text reading `key` through the reference cells `via` (live lookups)."""
        if not via:
            return self.cell_name(key)
        match_value = self.lookup(via[-1], via[:-1])
        kind = self.program.blocks[key[0]].kind
        return f"INDEX({self.column_name(kind, key[1])}, MATCH({match_value}, {self.ids_name(kind)}, 0))"

    def formula(self, expr, refs: dict) -> str:
        return "=" + excel_formula(expr, refs)

    def rule_formula(self, key: Key) -> str:
        """A cell's own rule, as written, over the defined names of the cells it reads."""
        return "=" + RulePrinter(lambda r: self.lookup(r.key, r.via)).doprint(self.program.cells[key].expr)

    def expanded_formula(self, expr, expander: Expander, extra: dict) -> str:
        refs = {sym.name: self.lookup(key, expander.vias.get(sym, ())) for sym, key in expander.symbols.items()}
        refs.update(extra)
        return self.formula(expr, refs)

    # ---- sheets ------------------------------------------------------------

    def build(self):
        from openpyxl import Workbook
        from openpyxl.workbook.properties import CalcProperties

        wb = Workbook()
        wb.remove(wb.active)
        if self.plan is not None:
            self.plan.build(wb)
        for kind in ("deployment", "model", "hardware", "workload"):
            if kind in self.layout.blocks:
                self._kind_sheet(wb, kind)
        self._readme(wb)
        if "deployment" in self.layout.blocks:
            self._summary(wb)
        if "model" in self.layout.blocks:
            self._comparison(wb)
        if "deployment" in self.layout.blocks:
            self._what_if(wb)
        for kind in ("format", "engine"):
            if kind in self.layout.blocks:
                self._kind_sheet(wb, kind)
        self._define_names(wb)
        self._validations(wb)
        self._highlights(wb)
        for ws in wb.worksheets:
            _print_setup(ws)
        wb.calculation = CalcProperties(fullCalcOnLoad=True)
        return wb

    def _kind_sheet(self, wb, kind: str) -> None:
        from openpyxl.comments import Comment
        from openpyxl.styles import Alignment, Font

        ws = wb.create_sheet(SHEETS[kind])
        columns = self.layout.columns[kind]
        widths = {col: 10 for col in columns.values()}
        ws.cell(1, 1, "Name").font = Font(bold=True)
        ws.cell(1, 2, "Title").font = Font(bold=True)
        headers: dict = {}
        for name in self.layout.blocks[kind]:
            info = self.program.blocks[name]
            row = self.layout.rows[name]
            text_cell(ws.cell(row, 1), name)
            if kind == "deployment":
                ws.cell(row, 2).value = self.title_formula(name)
                ws.cell(row, 2).comment = Comment(f"Follows the model, GPU count and hardware. As written: {info.title}",
                                                  "kvdsl", width=300, height=70)
                self.formulas += 1
            else:
                text_cell(ws.cell(row, 2), info.title)
            for cell in info.cells:
                key = (name, cell)
                col = columns[cell]
                target = ws.cell(row, col)
                self._write_cell(target, key)
                rc = self.program.cells[key]
                if cell in self.human.get(kind, {}):
                    shown = self._human_cell(ws, row, key, target)
                    widths[shown.column] = max(widths.get(shown.column, 10),
                                               _display_width(self._human_value(key), shown.number_format))
                if cell not in headers or (not describe(headers[cell])[1] and describe(rc)[1]):
                    headers[cell] = rc  # the first definition with a description
                if target.data_type == "f" and target.comment is None:
                    note = f"{rc.span.path}:{rc.span.line}\n{rc.cell.source}"
                    target.comment = Comment(note, "kvdsl", width=420, height=110)
                widths[col] = max(widths[col], _display_width(self.values.get(key), target.number_format))
        for cell, rc in headers.items():
            self._header(ws, columns[cell], cell, rc)
            if cell in self.human.get(kind, {}):
                col, unit = self.human[kind][cell]
                self._header(ws, col, cell, rc, unit.unit)
                widths[col] = max(widths.get(col, 10), 0.8 * len(str(ws.cell(2, col).value)) + 1)
            widths[columns[cell]] = max(widths[columns[cell]], 0.8 * len(str(ws.cell(2, columns[cell]).value)) + 1)
        ws.cell(2, 1, "cell · unit").font = Font(italic=True, size=8, color="666666")
        ws.cell(1, 1).alignment = ws.cell(1, 2).alignment = Alignment(vertical="top")
        ws.row_dimensions[1].height = 45
        ws.freeze_panes = ws.cell(HEADER_ROWS + 1, FIRST_COLUMN)
        ws.column_dimensions["A"].width = max(12, min(40, 2 + max(len(n) for n in self.layout.blocks[kind])))
        ws.column_dimensions["B"].width = max(12, min(60, 2 + max(len(self.program.blocks[n].title)
                                                                 for n in self.layout.blocks[kind])))
        for cell, col in columns.items():
            dim = ws.column_dimensions[column_letter(col)]
            dim.width = min(widths[col], 40)
            level = self.hidden.get(kind, {}).get(cell)
            if cell in self.human.get(kind, {}):
                shown = ws.column_dimensions[column_letter(self.human[kind][cell][0])]
                shown.width = min(widths[self.human[kind][cell][0]], 40)
                if level:
                    shown.outlineLevel, shown.hidden = level, True
            if level:
                dim.outlineLevel = level
                dim.hidden = True
        if self.hidden.get(kind):
            ws.sheet_properties.outlinePr.summaryRight = False

    def _header(self, ws, col: int, cell: str, rc, shown_unit: str = "") -> None:
        """Row 1: the label (the description as its note); row 2: the cell name and unit, small.

        `shown_unit` heads the human-unit column beside a base-unit column.
        """
        from openpyxl.comments import Comment
        from openpyxl.styles import Alignment, Font

        label, description = describe(rc)
        head = ws.cell(1, col, label)
        head.font = Font(bold=True)
        head.alignment = Alignment(wrap_text=True, vertical="top")
        unit = rc.dim.unit() if isinstance(rc.dim, Dim) and rc.dim.unit() else ""
        if isinstance(rc.dim, Dim) and rc.form == "input":
            rule = bounds(self.program, rc.key)
            if rule is not None and rule.fraction:
                unit = "%"
        if shown_unit:
            unit = f"in {shown_unit}"
        small = ws.cell(2, col, f"{cell} · {unit}" if unit else cell)
        small.font = Font(italic=True, size=8, color="666666")
        head.comment = Comment(f"{description}\n({cell})".strip(), "kvdsl", width=300, height=80)

    def _write_cell(self, target, key: Key) -> None:
        """A cell on its kind's sheet; a deployment's typed cell reads the Plan sheet in base units."""
        if self.plan is not None and key in self.plan.inputs:
            target.value = self.plan.reference(key)
            target.number_format = _number_format(self.program.cells[key].dim)
            self.formulas += 1
            return
        self.write_value(target, key)
        if self.program.blocks[key[0]].kind == "model" and self._count(key) and target.number_format in ("General", "#,##0.####"):
            target.number_format = "#,##0"

    def _count(self, key: Key) -> bool:
        """A whole number that stays whole: typed, or computed without a division (params, layers)."""
        rc, value = self.program.cells[key], self.values.get(key)
        if isinstance(value, (bool, str)) or value is None or getattr(value, "denominator", 0) != 1:
            return False
        return rc.form == "input" or (rc.form == "rule" and not _divides(rc.expr))

    def _human_value(self, key: Key):
        kind = self.program.blocks[key[0]].kind
        value = self.values.get(key)
        if value is None or isinstance(value, (bool, str)):
            return value
        return _number(value / self.human[kind][key[1]][1].factor)

    def _human_cell(self, ws, row: int, key: Key, base):
        """The human-unit cell beside `base`: typed (yellow) when the block types the figure, else converted."""
        from openpyxl.styles import Font, PatternFill

        kind = self.program.blocks[key[0]].kind
        col, unit = self.human[kind][key[1]]
        shown = ws.cell(row, col)
        shown.number_format = unit.number_format
        if self.human_input(key):
            shown.value = self._human_value(key)
            shown.fill = PatternFill("solid", fgColor="FFF2CC")
            shown.font = Font(color="1F4E79")
            base.value = f"={shown.coordinate}{unit.to_base()}"
            base.fill, base.font = PatternFill(), Font()
        else:
            shown.value = f"={base.coordinate}{unit.from_base()}"
        self.formulas += 1
        return shown

    def write_value(self, target, key: Key) -> None:
        """The value or formula of a cell, as the spec gives it."""
        rc = self.program.cells[key]
        value = self.values.get(key)
        if rc.scope and rc.origin == Origin.ENGINE and (rc.scope, rc.local_name) in self.program.cells:
            # an engine's setting, unchanged by this deployment: read it from the engine's row
            target.value = "=" + self.cell_name((rc.scope, rc.local_name))
            self.formulas += 1
        elif rc.form == "input":
            target.value = _number(value)
            target.fill, target.font = _input_style()
        elif rc.form in ("text",):
            text_cell(target, value or "")
        elif rc.form == "ref":
            if isinstance(rc.ref_expr, str):
                text_cell(target, rc.ref_target)
                target.fill, target.font = _input_style()
            else:
                target.value = "=" + self.lookup(rc.ref_expr.key, rc.ref_expr.via)
                self.formulas += 1
        elif rc.form == "unknown":
            from openpyxl.comments import Comment

            from ..errors import NoLiveForm, SolveError
            from ..solve import live_form

            live = True
            try:
                expr, expander, _ = live_form(self.program, key[0], key[1])
                try:
                    target.value = self.expanded_formula(expr, expander, {})
                except ExportError:  # too long for Excel: drop the regimes of the cells that are 0 now
                    expr, expander, assumed = live_form(self.program, key[0], key[1], assume_zeros=True)
                    target.value = self.expanded_formula(expr, expander, {})
                    target.comment = Comment(
                        f"Solved by kvdsl. The formula holds while these stay 0 (or false): {', '.join(assumed)}; "
                        "export again after changing them.", "kvdsl")
            except NoLiveForm as exc:
                live = False
                target.value = _number(value)
                target.comment = Comment(f"Solved by kvdsl: {exc.message}. This number does not follow the other "
                                         "inputs: export again after changing them.", "kvdsl", width=300, height=90)
            except SolveError as exc:
                raise ExportError(exc.message, rc.cell.span, exc.hint) from None
            self.formulas += live
            target.number_format = f'[>={UNBOUNDED}]"unbounded";' + _number_format(rc.dim)
            return
        else:
            target.value = self.rule_formula(key)
            self.formulas += 1
        if isinstance(value, bool):
            self.booleans.setdefault(target.parent.title, []).append(target.coordinate)
        elif rc.form == "input" and isinstance(rc.dim, Dim):
            unit = human_unit(rc.dim, bounds(self.program, key))
            target.number_format = unit.number_format if unit.unit in ("%", "") else _number_format(rc.dim)
        else:
            target.number_format = _number_format(rc.dim)

    def _define_names(self, wb) -> None:
        from openpyxl.workbook.defined_name import DefinedName

        def add(name: str, ref: str):
            wb.defined_names[name] = DefinedName(name, attr_text=ref)
            self.names += 1

        for kind, names in self.layout.blocks.items():
            sheet = SHEETS[kind]
            first, last = HEADER_ROWS + 1, HEADER_ROWS + len(names)
            add(self.ids_name(kind), f"'{sheet}'!$A${first}:$A${last}")
            add(self.titles_name(kind), f"'{sheet}'!$B${first}:$B${last}")
            for cell, col in self.layout.columns[kind].items():
                letter = column_letter(col)
                add(self.column_name(kind, cell), f"'{sheet}'!${letter}${first}:${letter}${last}")
            for name in names:
                row = self.layout.rows[name]
                for cell in self.program.blocks[name].cells:
                    letter = column_letter(self.layout.columns[kind][cell])
                    add(self.cell_name((name, cell)), f"'{sheet}'!${letter}${row}")

    def _validations(self, wb) -> None:
        """A drop-down on every cell that names a block: the blocks of that kind."""
        from openpyxl.worksheet.datavalidation import DataValidation

        for kind, names in self.layout.blocks.items():
            ws = wb[SHEETS[kind]]
            per_kind: dict[str, DataValidation] = {}
            for name in names:
                for cell in self.program.blocks[name].cells:
                    rc = self.program.cells[(name, cell)]
                    if rc.form != "ref" or (self.plan is not None and (name, cell) in self.plan.inputs):
                        continue
                    target_kind = self.program.blocks[rc.ref_target].kind
                    if target_kind not in self.layout.blocks:
                        continue
                    dv = per_kind.get(target_kind)
                    if dv is None:
                        dv = DataValidation(type="list", formula1=f"={self.ids_name(target_kind)}", allow_blank=False,
                                            showErrorMessage=True, errorTitle="Not in the catalog",
                                            error=f"Choose one of the {SHEETS[target_kind]} rows.")
                        per_kind[target_kind] = dv
                        ws.add_data_validation(dv)
                    letter = column_letter(self.layout.columns[kind][cell])
                    dv.add(f"{letter}{self.layout.rows[name]}")
            self._number_validations(ws, kind, names)

    def _number_validations(self, ws, kind: str, names: list) -> None:
        """Whole numbers, bounds and percentages from the `require` rules, on every typed number of a sheet."""
        groups: dict = {}
        for name in names:
            for cell in self.program.blocks[name].cells:
                key = (name, cell)
                rc = self.program.cells[key]
                if rc.form != "input" or isinstance(self.values.get(key), str):
                    continue
                if self.plan is not None and key in self.plan.inputs:
                    continue
                if isinstance(self.values.get(key), bool):
                    self._yes_no_validation(ws, groups, kind, key)
                    continue
                rule = bounds(self.program, key) or Bounds()
                column = self.layout.columns[kind][cell]
                if self.human_input(key):
                    column, unit = self.human[kind][cell]
                else:
                    unit = human_unit(rc.dim, rule)
                    if unit.factor != 1:  # typed in base units on this sheet
                        unit = type(unit)(1, unit.number_format, rc.dim.unit() or "")
                label = describe(rc)[0]
                signature = (column, rule.whole, rule.low, rule.low_strict, rule.high, rule.high_strict)
                if signature not in groups:
                    dv = data_validation(rule, unit, label, example_text(self.values.get(key), unit))
                    if dv is None:
                        continue
                    ws.add_data_validation(dv)
                    groups[signature] = dv
                groups[signature].add(f"{column_letter(column)}{self.layout.rows[name]}")

    def _yes_no_validation(self, ws, groups: dict, kind: str, key) -> None:
        """A typed condition (`flashinfer_sampler = true`): TRUE or FALSE from a drop-down."""
        column = self.layout.columns[kind][key[1]]
        if (column, "yes/no") not in groups:
            groups[(column, "yes/no")] = yes_no_validation(describe(self.program.cells[key])[0])
            ws.add_data_validation(groups[(column, "yes/no")])
        groups[(column, "yes/no")].add(f"{column_letter(column)}{self.layout.rows[key[0]]}")

    def _highlights(self, wb) -> None:
        """Red on the Deployments sheet where a result cannot hold."""
        from openpyxl.formatting.rule import Rule
        from openpyxl.styles import PatternFill
        from openpyxl.styles.differential import DifferentialStyle
        from openpyxl.styles.numbers import NumberFormat

        yes_no = NumberFormat(numFmtId=500, formatCode=YES_NO)
        red = DifferentialStyle(fill=PatternFill("solid", fgColor="F4CCCC", bgColor="F4CCCC"), numFmt=yes_no)
        if "deployment" in self.layout.blocks:
            self._red_results(wb[SHEETS["deployment"]], red)
        for sheet, coordinates in self.booleans.items():
            wb[sheet].conditional_formatting.add(" ".join(coordinates),
                                                 Rule(type="expression", formula=["TRUE"],
                                                      dxf=DifferentialStyle(numFmt=yes_no)))

    def _red_results(self, ws, red) -> None:
        """Red where a result cannot hold: the memory figures where the deployment does not fit, `meets_targets`
        where it misses them (conditions the prelude states, never a threshold here)."""
        from openpyxl.formatting.rule import Rule

        first, last = HEADER_ROWS + 1, HEADER_ROWS + len(self.layout.blocks["deployment"])
        columns = self.layout.columns["deployment"]
        for cell, condition in (("fits", "fits"), ("meets_targets", "meets_targets"), ("shortfall_bytes_per_gpu", "fits"),
                                ("kv_budget_bytes_per_gpu", "fits"), ("max_batch", "fits")):
            if cell not in columns or condition not in columns:
                continue
            letter = column_letter(columns[cell])
            test = f"NOT(${column_letter(columns[condition])}{first})"
            ws.conditional_formatting.add(f"{letter}{first}:{letter}{last}", Rule(type="expression", formula=[test], dxf=red))

    def _comparison(self, wb) -> None:
        """The "One Table": scheme, elements per token, reduction vs MHA, cache per sequence."""
        from openpyxl.styles import Font

        ws = wb.create_sheet("Comparison")
        headers = ["model", "scheme", "elem/token", "vs MHA", "context", "KV format", "cache per sequence"]
        for col, text in enumerate(headers, start=1):
            ws.cell(1, col, text).font = Font(bold=True)
        for i, name in enumerate(self.layout.blocks["model"], start=2):
            n = lambda cell, block=name: self.cell_name((block, cell))  # noqa: E731
            text_cell(ws.cell(i, 1), self.program.blocks[name].title)
            ws.cell(i, 2).value = f"={n('scheme')}"
            ws.cell(i, 3).value = f"={n('kv_elements_per_token')}"
            ws.cell(i, 3).number_format = "#,##0"
            ws.cell(i, 4).value = f"={n('mha_reduction')}"
            ws.cell(i, 4).number_format = '0.0"x"'
            ws.cell(i, 5).value = f"={n('context')}"
            ws.cell(i, 5).number_format = '#,##0" tokens"'
            ws.cell(i, 6).value = f"={n('kv_dtype')}"
            ws.cell(i, 7).value = f"={n('kv_bytes_per_sequence')}/{GIB}"
            ws.cell(i, 7).number_format = '0.00" GiB"'
            self.formulas += 6
        ws.freeze_panes = "B2"
        for col, width in zip("ABCDEFG", (24, 30, 12, 9, 16, 11, 20)):
            ws.column_dimensions[col].width = width

    def _summary(self, wb) -> None:
        """Each deployment's answers in planners' units: GiB, tokens, sequences."""
        from openpyxl.styles import Font

        ws = wb.create_sheet("Summary")
        columns = [
            ("deployment", None, None), ("model", "model", "@"), ("hardware", "hardware", "@"), ("GPUs", "gpus", "#,##0"),
            ("KV format", "kv_dtype", "@"), ("context", "context", '#,##0" tokens"'), ("batch", "batch", "#,##0"),
            ("fits", "fits", "General"), ("max batch", "max_batch", "#,##0"), ("max context", "max_context", '#,##0" tokens"'),
            ("weights per GPU", "weights_bytes_per_gpu", GIB), ("KV budget per GPU", "kv_budget_bytes_per_gpu", GIB),
            ("KV per sequence per GPU", "kv_bytes_per_sequence_per_gpu", GIB), ("KV per GPU at batch", "kv_bytes_per_gpu", GIB),
            ("shortfall per GPU", "shortfall_bytes_per_gpu", GIB),
            ("engine", "engine", "@"), ("engine KV tokens", "engine_kv_cache_tokens", '#,##0" tokens"'),
            ("engine blocks", "engine_num_blocks", "#,##0"), ("engine concurrency", "engine_max_concurrency", '0.00"x"'),
        ]
        for col, (title, _, _) in enumerate(columns, start=1):
            ws.cell(1, col, title).font = Font(bold=True)
        for i, name in enumerate(self.layout.blocks["deployment"], start=2):
            text_cell(ws.cell(i, 1), self.program.blocks[name].title)
            for col, (_, cell, fmt) in enumerate(columns[1:], start=2):
                target = ws.cell(i, col)
                if fmt == GIB:
                    target.value = f"={self.cell_name((name, cell))}/{GIB}"
                    target.number_format = '#,##0.00" GiB"'
                else:
                    target.value = f"={self.cell_name((name, cell))}"
                    target.number_format = fmt
                if isinstance(self.values.get((name, cell)), bool):
                    self.booleans.setdefault(ws.title, []).append(target.coordinate)
                self.formulas += 1
        ws.freeze_panes = "B2"
        ws.column_dimensions["A"].width = 44
        for col in range(2, len(columns) + 1):
            ws.column_dimensions[column_letter(col)].width = 16

    def _what_if(self, wb) -> None:
        """Max concurrency against context length for each deployment, with charts (see `charts`)."""
        from .charts import what_if_sheet

        what_if_sheet(self, wb)

    def _readme(self, wb) -> None:
        """The first sheet: how to use the workbook, in plain words (see `readme_sheet`)."""
        from .readme_sheet import readme_sheet

        readme_sheet(self, wb)


@functools.lru_cache(maxsize=None)
def _input_style():
    """The fill and font of an input cell, made once and shared (openpyxl hashes each style it is given)."""
    from openpyxl.styles import Font, PatternFill

    return PatternFill("solid", fgColor="FFF2CC"), Font(color="1F4E79")




def _divides(expr) -> bool:
    """Whether a rule divides anywhere (its value may then stop being whole)."""
    from .. import model as m

    todo = [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, m.Binary) and node.op == "/":
            return True
        if isinstance(node, m._Node):
            todo.extend(node.children())
    return False


def _number(value):
    if isinstance(value, bool) or value is None:
        return value
    if value.denominator == 1:
        return int(value)
    return float(value)


def _print_setup(ws) -> None:
    """Landscape A4, fit to the page width, header rows repeated on every page."""
    ws.page_setup.orientation = "landscape"
    ws.page_setup.paperSize = ws.PAPERSIZE_A4
    ws.page_setup.fitToWidth = 1
    ws.page_setup.fitToHeight = 0
    ws.sheet_properties.pageSetUpPr.fitToPage = True
    if ws.title in SHEETS.values():
        ws.print_title_rows = f"1:{HEADER_ROWS}"
    elif ws.title in ("Summary", "Comparison"):
        ws.print_title_rows = "1:1"


def _display_width(value, number_format: str) -> float:
    """The column width a value needs once formatted (digits, separators and the unit suffix)."""
    if value is None:
        return 10
    if isinstance(value, bool):
        return 6
    if isinstance(value, str):
        return len(value) + 2
    suffix = re.findall(r'"([^"]*)"', number_format.split(";")[-1])
    number = float(value)
    if number >= 1e299:
        return 12
    decimals = 0 if "." not in number_format and number_format != "General" else 4
    if number_format.endswith("%"):
        number, decimals = number * 100, 0
    text = f"{number:,.{decimals}f}" if abs(number) < 1e15 else f"{number:.4E}"
    return len(text) + sum(len(x) for x in suffix) + 3


def _number_format(dim) -> str:
    if dim == BYTES:
        return '#,##0" B"'
    if dim == TOKENS:
        return '#,##0" tokens"'
    if isinstance(dim, Dim) and dim == Dim((1, 0, 0, -1)):
        return '#,##0" B/s"'
    if dim == USD:
        return '"$"#,##0.00'
    if dim == USD / SECONDS:
        return '"$"0.000000" /s"'
    if dim == SECONDS:
        return '#,##0.000" s"'
    if isinstance(dim, Dim) and not dim.dimensionless:
        return "#,##0.####"
    return "General"


FIXED_TIMESTAMP = datetime.datetime(2000, 1, 1)  # the document's created/modified: the same bytes on every run


class FixedTimeZip(zipfile.ZipFile):
    """A zip archive whose entries are all dated FIXED_TIMESTAMP, so equal workbooks are equal files."""

    def entry(self, name: str) -> zipfile.ZipInfo:
        info = zipfile.ZipInfo(name, date_time=FIXED_TIMESTAMP.timetuple()[:6])
        info.compress_type = self.compression
        info.external_attr = 0o600 << 16
        return info

    def writestr(self, name, data, *args, **kwargs):
        return super().writestr(name if isinstance(name, zipfile.ZipInfo) else self.entry(name), data, *args, **kwargs)

    def write(self, filename, arcname=None, *args, **kwargs):
        import shutil

        with open(filename, "rb") as source, self.open(self.entry(arcname or filename), "w", force_zip64=True) as target:
            shutil.copyfileobj(source, target)


def save_fixed(wb, stream) -> None:
    """Save `wb` to `stream` as openpyxl does, but with fixed document and entry timestamps."""
    from openpyxl.writer.excel import ExcelWriter

    wb.properties.created = wb.properties.modified = FIXED_TIMESTAMP
    with FixedTimeZip(stream, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
        ExcelWriter(wb, archive).save()


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


def save_workbook(wb, out: str, force: bool = False) -> None:
    """Write `wb` to `out` atomically, with fixed timestamps."""
    from ..files import atomic_writer

    with atomic_writer(out, force=force, binary=True) as stream:
        save_fixed(wb, stream)


__all__ = ["build_workbook", "save_workbook", "excel_name", "excel_text_literal", "WorkbookWriter"]
