"""The workbook: every block on its kind's sheet, every result a live formula.

Layout: one sheet per kind (Models, Hardware, Deployments, Formats), one row
per block, one column per cell.  Row 1 holds cell names, row 2 units; the
first two columns the block name and title.  Every cell has a workbook-scoped
defined name `block.cell`, every column a name `all_models.cell` (the range
of that column) and the block names of a sheet the name `all_models_ids`, so
formulas read like the spec:

    =2*qwen3_8b.layers*...
    =INDEX(all_models.kv_heads, MATCH(chat.model, all_models_ids, 0))

The second form is how a deployment reads its model: through the name held in
its `model` cell, so switching that cell (a drop-down) switches every number.

Naming rule: a name whose first part reads as a cell reference (`h100`,
`tp2`, `r`, `c`, `r1c1`) gets a leading underscore: `_h100.memory`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import sympy as sp

from ..display import context_label
from ..errors import ExportError
from ..graph import Key, Origin, Program
from ..search import depends_on
from ..symbolic import Expander
from ..units import BYTES, TOKENS, USD, Dim
from .printer import UNBOUNDED, RulePrinter, excel_formula, excel_text_literal

SHEETS = {"model": "Models", "hardware": "Hardware", "deployment": "Deployments", "format": "Formats", "engine": "Engines",
          "workload": "Workloads"}
COLUMN_SETS = {"model": "all_models", "hardware": "all_hardware", "deployment": "all_deployments", "format": "all_formats",
               "engine": "all_engines", "workload": "all_workloads"}
HEADER_ROWS = 2
FIRST_COLUMN = 3  # A: block name, B: title
WHAT_IF_CONTEXTS = [1024 * 2**i for i in range(0, 9)]  # 1K .. 256K
GIB = 1024**3
MAX_COLUMNS = 16_384  # Excel's last column, XFD
MAX_NAME = 255  # Excel's longest defined name
RESERVED_PREFIXES = ("_xlfn", "_xlnm", "_xlws")  # names Excel keeps for itself (compared ignoring case)

_A1 = re.compile(r"^([A-Za-z]{1,3})(\d+)$")
_R1C1 = re.compile(r"^[Rr]\d*([Cc]\d*)?$|^[Cc]\d*$")


@functools.lru_cache(maxsize=None)
def excel_name(name: str) -> str:
    """A defined name Excel accepts for `name` (see the module docstring)."""
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


def column_letter(index: int) -> str:
    from openpyxl.utils import get_column_letter

    return get_column_letter(index)


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
        self.values = values
        self.sources = sources
        self.blocks = [b for b in program.blocks.values() if (not b.prelude) or b.kind in ("format", "engine", "workload")]
        self._check_names()
        self.layout = plan_layout(program, self.blocks)
        self.formulas = 0
        self.names = 0

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
            if name in {c.lower() for c in COLUMN_SETS.values()} | {self.ids_name(k).lower() for k in COLUMN_SETS}:
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
            for cell, span in cells.items():
                yield self.column_name(kind, cell), span, f"column `{self.column_name(kind, cell)}`"

    @staticmethod
    def ids_name(kind: str) -> str:
        """The range of block names of a kind (no dot, so no cell can take it)."""
        return f"{COLUMN_SETS[kind]}_ids"

    def cell_name(self, key: Key) -> str:
        return excel_name(f"{key[0]}.{key[1]}")

    def column_name(self, kind: str, cell: str) -> str:
        return f"{COLUMN_SETS[kind]}.{cell}"

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
        self._readme(wb)
        for kind in SHEETS:
            if kind in self.layout.blocks:
                self._kind_sheet(wb, kind)
        self._define_names(wb)
        self._validations(wb)
        if "model" in self.layout.blocks:
            self._comparison(wb)
        if "deployment" in self.layout.blocks:
            self._summary(wb)
            self._what_if(wb)
        wb.calculation = CalcProperties(fullCalcOnLoad=True)
        return wb

    def _kind_sheet(self, wb, kind: str) -> None:
        from openpyxl.comments import Comment
        from openpyxl.styles import Alignment, Font

        ws = wb.create_sheet(SHEETS[kind])
        columns = self.layout.columns[kind]
        ws.cell(1, 1, "block").font = Font(bold=True)
        ws.cell(1, 2, "title").font = Font(bold=True)
        for cell, col in columns.items():
            ws.cell(1, col, cell).font = Font(bold=True)
            ws.cell(1, col).alignment = Alignment(text_rotation=0, wrap_text=True, vertical="top")
        for name in self.layout.blocks[kind]:
            info = self.program.blocks[name]
            row = self.layout.rows[name]
            _text(ws.cell(row, 1), name)
            _text(ws.cell(row, 2), info.title)
            for cell in info.cells:
                key = (name, cell)
                target = ws.cell(row, columns[cell])
                self._write_cell(target, key)
                rc = self.program.cells[key]
                unit_cell = ws.cell(2, columns[cell])
                if unit_cell.value is None and isinstance(rc.dim, Dim) and rc.dim.unit():
                    unit_cell.value = rc.dim.unit()
                if target.data_type == "f":
                    note = f"{rc.span.path}:{rc.span.line}\n{rc.cell.source}"
                    target.comment = Comment(note, "kvdsl", width=420, height=110)
        ws.cell(2, 1, "unit").font = Font(italic=True)
        for col in range(1, FIRST_COLUMN + len(columns)):
            ws.cell(2, col).font = Font(italic=True, color="666666")
        ws.freeze_panes = ws.cell(HEADER_ROWS + 1, FIRST_COLUMN)
        ws.column_dimensions["A"].width = 26
        ws.column_dimensions["B"].width = 34
        for cell, col in columns.items():
            ws.column_dimensions[column_letter(col)].width = max(12, min(len(cell) + 2, 30))

    def _write_cell(self, target, key: Key) -> None:
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
            _text(target, value or "")
        elif rc.form == "ref":
            if isinstance(rc.ref_expr, str):
                _text(target, rc.ref_target)
                target.fill, target.font = _input_style()
            else:
                target.value = "=" + self.lookup(rc.ref_expr.key, rc.ref_expr.via)
                self.formulas += 1
        elif rc.form == "unknown":
            from openpyxl.comments import Comment

            from ..errors import SolveError
            from ..solve import live_form

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
            except SolveError as exc:
                raise ExportError(exc.message, rc.cell.span, exc.hint) from None
            self.formulas += 1
            target.number_format = f'[>={UNBOUNDED}]"unbounded";' + _number_format(rc.dim)
            return
        else:
            target.value = self.rule_formula(key)
            self.formulas += 1
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
                    if rc.form != "ref":
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

    def _comparison(self, wb) -> None:
        """The "One Table": scheme, elements per token, reduction vs MHA, cache per sequence."""
        from openpyxl.styles import Font

        ws = wb.create_sheet("Comparison")
        headers = ["model", "scheme", "elem/token", "vs MHA", "context", "KV format", "cache per sequence"]
        for col, text in enumerate(headers, start=1):
            ws.cell(1, col, text).font = Font(bold=True)
        for i, name in enumerate(self.layout.blocks["model"], start=2):
            n = lambda cell, block=name: self.cell_name((block, cell))  # noqa: E731
            _text(ws.cell(i, 1), self.program.blocks[name].title)
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
            _text(ws.cell(i, 1), self.program.blocks[name].title)
            for col, (_, cell, fmt) in enumerate(columns[1:], start=2):
                target = ws.cell(i, col)
                if fmt == GIB:
                    target.value = f"={self.cell_name((name, cell))}/{GIB}"
                    target.number_format = '#,##0.00" GiB"'
                else:
                    target.value = f"={self.cell_name((name, cell))}"
                    target.number_format = fmt
                self.formulas += 1
        ws.freeze_panes = "B2"
        ws.column_dimensions["A"].width = 44
        for col in range(2, len(columns) + 1):
            ws.column_dimensions[column_letter(col)].width = 16

    def _what_if(self, wb) -> None:
        """Max concurrency against context length for each deployment, with a chart."""
        from openpyxl.chart import LineChart, Reference
        from openpyxl.styles import Font, PatternFill

        ws = wb.create_sheet("What-if")
        ws.cell(1, 1, "context").font = Font(bold=True)
        deployments = self.layout.blocks["deployment"]
        for j, name in enumerate(deployments, start=2):
            _text(ws.cell(1, j), self.program.blocks[name].title).font = Font(bold=True)
            ws.column_dimensions[column_letter(j)].width = 22
        for i, tokens in enumerate(WHAT_IF_CONTEXTS, start=2):
            cell = ws.cell(i, 1, tokens)
            cell.number_format = '#,##0" tokens"'
            cell.fill = PatternFill("solid", fgColor="FFF2CC")
        for j, name in enumerate(deployments, start=2):
            expr, expander, context = self._max_batch_at_context(name)
            formula = self.expanded_formula(expr, expander, {context.name: _CONTEXT_SLOT})
            for i in range(2, 2 + len(WHAT_IF_CONTEXTS)):
                ws.cell(i, j).value = formula.replace(_CONTEXT_SLOT, f"$A{i}")
                ws.cell(i, j).number_format = "#,##0"
                self.formulas += 1
        ws.column_dimensions["A"].width = 16
        ws.freeze_panes = "B2"
        chart = LineChart()
        chart.title = "Max concurrent sequences by context length"
        chart.y_axis.title = "sequences"
        chart.x_axis.title = "context (tokens)"
        chart.height, chart.width = 10, 22
        last = 1 + len(WHAT_IF_CONTEXTS)
        data = Reference(ws, min_col=2, max_col=1 + len(deployments), min_row=1, max_row=last)
        chart.add_data(data, titles_from_data=True)
        chart.set_categories(Reference(ws, min_col=1, min_row=2, max_row=last))
        ws.add_chart(chart, f"A{last + 3}")

    def _max_batch_at_context(self, block: str):
        """`max_batch` with `context` left free (0 past the model's context limit)."""
        context = sp.Symbol("what_if_context", positive=True)
        target = (block, "context")
        affected = depends_on(self.program, target)
        expander = Expander(self.program, stop=lambda key: key not in affected, rename={target: context})
        max_batch = expander.expand((block, "max_batch"))
        limit = sp.Symbol("what_if_limit")
        model_ref = self.program.cells[(block, "model")]
        limit_key = (model_ref.ref_target, "context_limit")
        expander.symbols[limit] = limit_key
        expander.vias[limit] = ((block, "model"),)
        return sp.Piecewise((max_batch, sp.Le(context, limit)), (0, True)), expander, context

    def _readme(self, wb) -> None:
        from openpyxl.styles import Font

        ws = wb.create_sheet("README")
        lines = [
            ("kvdsl capacity workbook", True),
            ("", False),
            ("Every yellow cell is an input: change it and every result follows (the workbook recalculates on open).", False),
            ("Every other number is a live formula written with defined names that read like the spec:", False),
            ("  qwen3_8b.kv_bytes_per_sequence is the cell kv_bytes_per_sequence of the block qwen3_8b.", False),
            ("A deployment reads its model and hardware through its `model` and `hardware` cells (drop-downs):", False),
            ("  INDEX(all_models.layers, MATCH(chat.model, all_models_ids, 0)) is the chosen model's layers.", False),
            ("The `kv_dtype` cells are drop-downs over the Formats sheet; their bytes per element are looked up live.", False),
            ("Sheets: Models, Hardware, Deployments, Formats (one row per block, one column per cell; row 2 gives units),", False),
            ("  Summary (each deployment in GiB and tokens), Comparison (the One Table),", False),
            ("  What-if (max concurrency against context length, with a chart).", False),
            ("Units: bytes, tokens, elements, seconds. 1 GiB = 1,073,741,824 bytes; a 32K context is 32,768 tokens.", False),
            ("Each formula's note gives the spec file and line it comes from, and the rule as written.", False),
            ("Names whose first part reads as a cell reference (h100, tp2, r, c) start with an underscore: _h100.memory.", False),
            (f"A solved answer that nothing bounds (no memory limit on a pure state-space model's context) holds "
             f"{UNBOUNDED} and reads \"unbounded\".", False),
            ("", False),
            ("Made from: " + ", ".join(self.sources), False),
        ]
        for i, (text, bold) in enumerate(lines, start=1):
            _text(ws.cell(i, 1), text).font = Font(bold=bold, size=14 if bold else 11)
        ws.column_dimensions["A"].width = 120


@functools.lru_cache(maxsize=None)
def _input_style():
    """The fill and font of an input cell, made once and shared (openpyxl hashes each style it is given)."""
    from openpyxl.styles import Font, PatternFill

    return PatternFill("solid", fgColor="FFF2CC"), Font(color="1F4E79")


_CONTEXT_SLOT = "$WHATIF_CONTEXT$"  # no defined name holds `$`: printed once per deployment, then replaced by each row's context cell


def _text(cell, text: str):
    """Store text as text, even when it starts with =, +, - or @ (control characters become U+FFFD)."""
    from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

    if isinstance(text, str):
        text = ILLEGAL_CHARACTERS_RE.sub("\ufffd", text)
    cell.value = text
    if isinstance(text, str) and text:
        cell.data_type = "s"
    return cell


def _number(value):
    if isinstance(value, bool) or value is None:
        return value
    if value.denominator == 1:
        return int(value)
    return float(value)


def _number_format(dim) -> str:
    if dim == BYTES:
        return '#,##0" B"'
    if dim == TOKENS:
        return '#,##0" tokens"'
    if isinstance(dim, Dim) and dim == Dim((1, 0, 0, -1)):
        return '#,##0" B/s"'
    if dim == USD:
        return '#,##0.00" USD"'
    if isinstance(dim, Dim) and not dim.dimensionless:
        return "#,##0.####"
    return "General"


def write_workbook(program: Program, values: dict, out: str, sources: list, force: bool = False) -> dict:
    """Write the workbook atomically; returns what was written (sheets, blocks, formulas, names)."""
    from ..files import atomic_writer

    writer = WorkbookWriter(program, values, sources)
    wb = writer.build()
    with atomic_writer(out, force=force, binary=True) as stream:
        wb.save(stream)
    return {
        "sheets": wb.sheetnames,
        "blocks": sum(len(v) for v in writer.layout.blocks.values()),
        "formulas": writer.formulas,
        "names": writer.names,
        "contexts": [context_label(t) for t in WHAT_IF_CONTEXTS],
    }


__all__ = ["write_workbook", "excel_name", "excel_text_literal", "WorkbookWriter"]
