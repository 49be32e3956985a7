"""How the sheets look beyond a cell's own format: Yes/No on boolean cells, red where a result cannot
hold, and the printed page."""

from __future__ import annotations

from .cells import SHEETS, column_letter
from .layout import HEADER_ROWS

# A boolean cell reads Yes/No through a conditional format's number format: the
# cell's own format stays General, so the cell stays a boolean (LibreOffice
# saves a boolean with a number format of its own as a number).
YES_NO = '"Yes";"Yes";"No"'


def highlights(writer, wb) -> None:
    """Red on the Deployments sheet where a result cannot hold; Yes/No on every boolean cell."""
    from openpyxl.formatting.rule import Rule
    from openpyxl.styles import PatternFill
    from openpyxl.styles.differential import DifferentialStyle
    from openpyxl.styles.numbers import NumberFormat

    yes_no = NumberFormat(numFmtId=500, formatCode=YES_NO)
    fill = PatternFill("solid", fgColor="F4CCCC", bgColor="F4CCCC")
    if "deployment" in writer.layout.blocks:  # a condition's red cell still reads Yes/No; a figure keeps its format
        _red_results(writer, wb[SHEETS["deployment"]], DifferentialStyle(fill=fill, numFmt=yes_no), DifferentialStyle(fill=fill))
    for sheet, coordinates in writer.booleans.items():
        wb[sheet].conditional_formatting.add(" ".join(coordinates),
                                             Rule(type="expression", formula=["TRUE"],
                                                  dxf=DifferentialStyle(numFmt=yes_no)))


def _red_results(writer, ws, red_condition, red_figure) -> None:
    """Red where a result cannot hold: the memory figures where the deployment does not fit, `meets_targets`
    where it misses them (conditions the prelude states, never a threshold here); on the column a reader sees."""
    from openpyxl.formatting.rule import Rule

    first, last = HEADER_ROWS + 1, HEADER_ROWS + len(writer.layout.blocks["deployment"])
    columns, twins = writer.layout.columns["deployment"], writer.human.get("deployment", {})
    for cell, condition in (("fits", "fits"), ("meets_targets", "meets_targets"), ("shortfall_bytes_per_gpu", "fits"),
                            ("kv_budget_bytes_per_gpu", "fits"), ("max_batch", "fits")):
        if cell not in columns or condition not in columns:
            continue
        letter = column_letter(twins[cell].column if cell in twins else columns[cell])
        test = f"NOT(${column_letter(columns[condition])}{first})"
        red = red_condition if cell == condition else red_figure
        ws.conditional_formatting.add(f"{letter}{first}:{letter}{last}", Rule(type="expression", formula=[test], dxf=red))


# No printed text is smaller than MIN_PRINTED_PT: the block sheets print at BLOCK_SCALE, where their
# smallest text (row 2's cell names, 10 pt) prints at 8 pt, and run over as many pages across as their
# columns need, the id and title columns repeated on each; the Plan sheet prints at the scale its
# widest page needs (plan_sheet.py), the README on one page.
MIN_PRINTED_PT = 8
BLOCK_SCALE = 80


def print_setup(ws, scale=None) -> None:
    """Landscape A4 with narrow margins and header rows repeated on every page, at `scale` % (else the
    sheet's own rule above)."""
    from openpyxl.worksheet.page import PageMargins

    ws.page_setup.orientation = "landscape"
    ws.page_setup.paperSize = ws.PAPERSIZE_A4
    ws.page_margins = PageMargins(left=0.5, right=0.5, top=0.6, bottom=0.6, header=0.3, footer=0.3)
    if ws.title == "README":  # one page
        ws.page_setup.fitToWidth = ws.page_setup.fitToHeight = 1
        ws.sheet_properties.pageSetUpPr.fitToPage = True
        return
    ws.sheet_properties.pageSetUpPr.fitToPage = False
    ws.page_setup.scale = scale or BLOCK_SCALE
    ws.page_setup.pageOrder = "overThenDown"
    if ws.title in SHEETS.values():
        ws.print_title_rows = f"1:{HEADER_ROWS}"
        ws.print_title_cols = "A:B"
    elif ws.title in ("Summary", "Comparison", "What-if"):
        ws.print_title_rows = "1:1"
        ws.print_title_cols = "A:A"
