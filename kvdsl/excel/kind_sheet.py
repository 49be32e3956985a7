"""A kind's sheet (Deployments, Models, Hardware, Workloads, Formats, Engines): one row per block, one
column per cell.

Row 1 holds each cell's label (its description as the note), row 2 its
name and unit; every formula cell has a note with the file, line and rule
it comes from.  Columns are as wide as their values once formatted; the
columns `layout.py` groups are hidden.  A deployment's title follows its
drop-downs.
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
    widths = {col: 10 for col in columns.values()}
    ws.cell(1, 1, "Name").font = Font(bold=True)
    ws.cell(1, 2, "Title").font = Font(bold=True)
    headers: dict = {}
    for name in writer.layout.blocks[kind]:
        info = writer.program.blocks[name]
        row = writer.layout.rows[name]
        text_cell(ws.cell(row, 1), name)
        if kind == "deployment":
            ws.cell(row, 2).value = writer.title_formula(name)
            ws.cell(row, 2).comment = Comment(f"Follows the model, GPU count and hardware. As written: {info.title}",
                                              "kvdsl", width=300, height=70)
            writer.formulas += 1
        else:
            text_cell(ws.cell(row, 2), info.title)
        for cell in info.cells:
            key = (name, cell)
            col = columns[cell]
            target = ws.cell(row, col)
            sheet_value(writer, target, key)
            rc = writer.program.cells[key]
            if cell in writer.human.get(kind, {}):
                shown = human_cell(writer, ws, row, key, target)
                widths[shown.column] = max(widths.get(shown.column, 10),
                                           _display_width(human_value(writer, key), shown.number_format))
            if cell not in headers or (not describe(headers[cell])[1] and describe(rc)[1]):
                headers[cell] = rc  # the first definition with a description
            if target.data_type == "f" and target.comment is None:
                note = f"{rc.span.path}:{rc.span.line}\n{rc.cell.source}"
                target.comment = Comment(note, "kvdsl", width=420, height=110)
            widths[col] = max(widths[col], _display_width(writer.values.get(key), target.number_format))
    for cell, rc in headers.items():
        _header(writer, ws, columns[cell], cell, rc)
        if cell in writer.human.get(kind, {}):
            col, unit = writer.human[kind][cell]
            _header(writer, ws, col, cell, rc, unit.unit)
            widths[col] = max(widths.get(col, 10), 0.8 * len(str(ws.cell(2, col).value)) + 1)
        widths[columns[cell]] = max(widths[columns[cell]], 0.8 * len(str(ws.cell(2, columns[cell]).value)) + 1)
    ws.cell(2, 1, "cell · unit").font = Font(italic=True, size=8, color="666666")
    ws.cell(1, 1).alignment = ws.cell(1, 2).alignment = Alignment(vertical="top")
    ws.row_dimensions[1].height = 45
    ws.freeze_panes = ws.cell(HEADER_ROWS + 1, FIRST_COLUMN)
    ws.column_dimensions["A"].width = max(12, min(40, 2 + max(len(n) for n in writer.layout.blocks[kind])))
    ws.column_dimensions["B"].width = max(12, min(60, 2 + max(len(writer.program.blocks[n].title)
                                                             for n in writer.layout.blocks[kind])))
    for cell, col in columns.items():
        dim = ws.column_dimensions[column_letter(col)]
        dim.width = min(widths[col], 40)
        level = writer.hidden.get(kind, {}).get(cell)
        if cell in writer.human.get(kind, {}):
            shown = ws.column_dimensions[column_letter(writer.human[kind][cell][0])]
            shown.width = min(widths[writer.human[kind][cell][0]], 40)
            if level:
                shown.outlineLevel, shown.hidden = level, True
        if level:
            dim.outlineLevel = level
            dim.hidden = True
    if writer.hidden.get(kind):
        ws.sheet_properties.outlinePr.summaryRight = False


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
    small.font = Font(italic=True, size=8, color="666666")
    head.comment = Comment(f"{description}\n({cell})".strip(), "kvdsl", width=300, height=80)


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
