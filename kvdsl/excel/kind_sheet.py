"""A kind's sheet (Deployments, Models, Hardware, Workloads, Formats, Engines): one row per block, one
column per cell.

Row 1 holds each cell's label (its description as the note), row 2 its
name and unit; every formula cell has a note with the file, line and rule
it comes from.  Columns are as wide as their values once formatted; the
columns `layout.py` groups are hidden.  A deployment's or workload's title
is a formula over its inputs.  Column A (the ids) and row 2 are for
formulas: grouped and hidden, a click on `+` away, so a printed page shows
titles, labels and figures.
"""

from __future__ import annotations

import re

from ..labels import describe
from ..units import Dim
from .cells import SHEETS, column_letter, text_cell
from .layout import FIRST_COLUMN, HEADER_ROWS
from .validation import bounds
from .values import human_cell, human_value, sheet_value


def kind_sheet(writer, wb, kind: str) -> None:
    """Add the sheet of `kind`'s blocks (see the module docstring)."""
    from openpyxl.comments import Comment
    from openpyxl.styles import Alignment, Font

    ws = wb.create_sheet(SHEETS[kind])
    columns = writer.layout.columns[kind]
    twins = writer.human.get(kind, {})
    widths: dict = {}
    ws.cell(1, 1, "Id (in formulas)").font = Font(bold=True)
    ws.cell(1, 2, "Title").font = Font(bold=True)
    headers: dict = {}
    for name in writer.layout.blocks[kind]:
        info = writer.program.blocks[name]
        row = writer.layout.rows[name]
        text_cell(ws.cell(row, 1), name)
        title = ws.cell(row, 2)
        if kind in ("deployment", "workload"):
            title.value = writer.title_formula(name)
            title.comment = Comment(f"Follows the inputs it describes. As written: {info.title}",
                                    "kvdsl", width=300, height=70)
            writer.formulas += 1
        else:
            text_cell(title, info.title)
        title.alignment = Alignment(wrap_text=True, vertical="top")
        lines = wrapped_lines(info.title, TITLE_WIDTH, TEXT_CHAR)
        for cell in info.cells:
            key = (name, cell)
            col = columns[cell]
            target = ws.cell(row, col)
            sheet_value(writer, target, key)
            rc = writer.program.cells[key]
            if cell in twins:
                shown = human_cell(writer, ws, row, key, target)
                _widen(widths, shown.column, display_width(human_value(writer, key), shown.number_format))
            if cell not in headers or (not describe(headers[cell])[1] and describe(rc)[1]):
                headers[cell] = rc  # the first definition with a description
            if target.data_type == "f" and target.comment is None:
                note = f"{rc.span.path}:{rc.span.line}\n{rc.cell.source}"
                target.comment = Comment(note, "kvdsl", width=420, height=110)
            _widen(widths, col, display_width(writer.values.get(key), target.number_format))
        if lines > 1:  # a spreadsheet does not fit a row to a formula's text: the row says its height
            ws.row_dimensions[row].height = ROW_HEIGHT * lines
            for target in ws[row][2:]:
                target.alignment = Alignment(vertical="top")
    for cell, rc in headers.items():
        _header(writer, ws, columns[cell], cell, rc)
        if cell in twins:
            _header(writer, ws, twins[cell].column, cell, rc, twins[cell].unit.unit or "name" * bool(twins[cell].names))
    ws.cell(2, 1, "cell · unit").font = Font(italic=True, size=SMALL, color="666666")
    ws.cell(1, 1).alignment = ws.cell(1, 2).alignment = Alignment(vertical="top", wrap_text=True)
    ws.freeze_panes = ws.cell(HEADER_ROWS + 1, FIRST_COLUMN)
    ws.column_dimensions["A"].width = max(12, min(28, 2 + max(len(n) for n in writer.layout.blocks[kind])))
    ws.column_dimensions["B"].width = TITLE_WIDTH
    hidden = writer.hidden.get(kind, {})
    for cell, col in columns.items():
        shown = [col] + ([twins[cell].column] if cell in twins else [])
        for c in shown:
            dim = ws.column_dimensions[column_letter(c)]
            dim.width = min(max(widths.get(c, 0), header_width(ws.cell(1, c).value)), MAX_WIDTH)
        if hidden.get(cell):
            dim = ws.column_dimensions[column_letter(col)]
            dim.outlineLevel, dim.hidden = hidden[cell], True
    shown = [c for c in range(1, ws.max_column + 1) if not ws.column_dimensions[column_letter(c)].hidden]
    ws.row_dimensions[1].height = ROW_HEIGHT * max(
        2, max(wrapped_lines(ws.cell(1, c).value, ws.column_dimensions[column_letter(c)].width) for c in shown))
    # the ids and the cells' names and units are for formulas: grouped, a click away (the `+` buttons)
    ws.column_dimensions["A"].outlineLevel, ws.column_dimensions["A"].hidden = 1, True
    ws.row_dimensions[2].outlineLevel, ws.row_dimensions[2].hidden = 1, True
    ws.sheet_properties.outlinePr.summaryRight = False
    ws.sheet_properties.outlinePr.summaryBelow = False


TITLE_WIDTH = 36  # column B: a block's title, wrapped
ROW_HEIGHT = 15  # points: one line of the workbook's 11 pt text
BOLD_CHAR, TEXT_CHAR = 1.25, 1.0  # a character's width in column units: a bold header's, a title's
MAX_WIDTH = 40
SMALL = 10  # the small print of row 2 (cell name and unit): 8 pt on paper at the block sheets' 80 %


def _widen(widths: dict, col: int, width: float) -> None:
    widths[col] = max(widths.get(col, 0), width)


def header_width(label) -> float:
    """The width a column's header needs: the longest word of its label (it wraps)."""
    words = max((len(w) for w in str(label or "").split()), default=0)
    return max(10, words * 1.25 + 2)


def wrapped_lines(text, width, char: float = BOLD_CHAR) -> int:
    """How many lines a wrapped text takes in a column of `width`, each character `char` wide."""
    import math

    if not text:
        return 1
    return max(1, math.ceil(len(str(text)) * char / max(1.0, (width or 10) - 1)))


def _header(writer, ws, col: int, cell: str, rc, shown_unit: str = "") -> None:
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
        rule = bounds(writer.program, rc.key)
        if rule is not None and rule.fraction:
            unit = "%"
    if shown_unit:
        unit = f"in {shown_unit}"
    small = ws.cell(2, col, f"{cell} · {unit}" if unit else cell)
    small.font = Font(italic=True, size=SMALL, color="666666")
    head.comment = Comment(f"{description}\n({cell})".strip(), "kvdsl", width=300, height=80)


def display_width(value, number_format: str) -> float:
    """The column width a value needs once formatted (digits, separators and the unit), with room for
    fonts wider than the workbook's Calibri (LibreOffice may print in DejaVu)."""
    if value is None:
        return 10
    if isinstance(value, bool):
        return 6
    if isinstance(value, str):
        return len(value) * 1.2 + 2
    sections = number_format.split(";")
    suffix = re.findall(r'"([^"]*)"', sections[-1] if sections[-1] else sections[0])
    number = float(value)
    if number >= 1e299:
        return 12
    decimals = len(sections[-1].split(".")[1].split('"')[0]) if "." in sections[-1] else (4 if number_format == "General" else 0)
    if number_format.endswith("%"):
        number, decimals = number * 100, 0
    text = f"{number:,.{decimals}f}" if abs(number) < 1e15 else f"{number:.4E}"
    return (len(text) + sum(len(x) for x in suffix)) * 1.2 + 3
