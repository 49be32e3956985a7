"""Charts of the workbook: the What-if sheet and a stacked memory bar.

What-if sheet (`what_if_sheet(writer, wb)`): a table of live formulas, the
most requests a deployment holds at once (`max_batch`) at each context length
of `WHAT_IF_CONTEXTS` (column A, yellow, typed in) for each deployment (one
column each, headed by its title), 0 past the model's context limit.  Below
it, line charts of that table, at most `SERIES_PER_CHART` deployments each,
so every chart draws lines with a legend a few lines tall.  The value axis
is logarithmic: the count falls roughly as 1/context, so over 1K..256K it
spans two to three orders of magnitude.  Points that are 0 (past the
context limit) have no place on a log axis and are not drawn.

Stacked bar helper, for a sheet showing memory per GPU:

    memory_bar_chart(ws, anchor, title, categories, series,
                     horizontal=True, axis_title="GiB per GPU", colors=None)

    ws          the worksheet the chart is added to
    anchor      top-left cell of the chart, e.g. "F3"
    title       the chart's title (plain words)
    categories  openpyxl `Reference` of the bar labels (one cell per bar)
    series      [(name, values), ...] stacked in order: name is a string, a
                cell, or a `Reference` to one cell holding it; values a `Reference`
                the same length as `categories` (e.g. weights, KV cache, free)
    colors      hex RGB per series (default: blue, orange, green, grey...)

It returns the openpyxl `BarChart` (already added to `ws`).
"""

from __future__ import annotations

from math import ceil

from .cells import WHAT_IF_CONTEXTS, column_letter

SERIES_PER_CHART = 5
CHART_WIDTH_CM = 22.0
CHART_HEIGHT_CM = 10.0
CHART_ROWS = 22  # rows a chart of CHART_HEIGHT_CM covers at the default row height, plus a gap
CM_PER_CHARACTER = 0.19  # one unit of column width (Calibri 11, 96 dpi)
DEFAULT_WIDTH = 8.43  # a column's width when none is set
VALUE_WIDTH = 11  # a deployment's column in the What-if table (its title wraps)
DEFAULT_COLORS = ("4472C4", "ED7D31", "70AD47", "A5A5A5", "FFC000", "5B9BD5")
CONTEXT_SLOT = "$WHATIF_CONTEXT$"  # no defined name holds `$`: a formula printed once per deployment, then each row's context cell put in
INPUT_FILL = "FFF2CC"
CHART_TEXT_PT = 11  # axis labels and legends, like the cells


def groups(count: int, size: int = SERIES_PER_CHART) -> list:
    """Split `count` items into consecutive (start, stop) ranges of at most `size`, as even as possible."""
    if count <= 0:
        return []
    parts = ceil(count / size)
    base, extra = divmod(count, parts)
    out, start = [], 0
    for i in range(parts):
        stop = start + base + (1 if i < extra else 0)
        out.append((start, stop))
        start = stop
    return out


def what_if_sheet(writer, wb) -> None:
    """The What-if sheet of `writer` (a `WorkbookWriter`): the live table and its charts."""
    from openpyxl.styles import Alignment, Font, PatternFill
    from openpyxl.worksheet.datavalidation import DataValidation


    ws = wb.create_sheet("What-if")
    ws.cell(1, 1, "context").font = Font(bold=True)
    deployments = writer.layout.blocks["deployment"]
    for j, name in enumerate(deployments, start=2):
        title = ws.cell(1, j, "=" + writer.title_cell(name))
        writer.formulas += 1
        title.font = Font(bold=True)
        title.alignment = Alignment(wrap_text=True, vertical="top", horizontal="center")
        ws.column_dimensions[column_letter(j)].width = VALUE_WIDTH
    longest = max((len(writer.program.blocks[name].title) for name in deployments), default=0)
    ws.row_dimensions[1].height = 15 * max(1, ceil(longest / (VALUE_WIDTH - 2)))
    contexts = DataValidation(type="whole", operator="greaterThanOrEqual", formula1="1", allow_blank=False,
                              showErrorMessage=True, errorTitle="Not a context length",
                              error="Type a whole number of tokens, at least 1.",
                              showInputMessage=True, promptTitle="Context length",
                              prompt="In tokens, a whole number: 131072 for 128K.")
    ws.add_data_validation(contexts)
    for i, tokens in enumerate(WHAT_IF_CONTEXTS, start=2):
        cell = ws.cell(i, 1, tokens)
        cell.number_format = '#,##0" tokens"'
        cell.fill = PatternFill("solid", fgColor=INPUT_FILL)
        contexts.add(cell.coordinate)
    for j, name in enumerate(deployments, start=2):
        formula = writer.derived(("what-if", name), lambda: _what_if_formula(writer, name))
        for i in range(2, 2 + len(WHAT_IF_CONTEXTS)):
            ws.cell(i, j).value = formula.replace(CONTEXT_SLOT, f"$A{i}")
            ws.cell(i, j).number_format = "#,##0"
            writer.formulas += 1
    ws.column_dimensions["A"].width = 16
    ws.freeze_panes = "B2"
    _what_if_charts(ws, len(deployments), len(WHAT_IF_CONTEXTS))


def _what_if_formula(writer, block: str) -> str:
    """The What-if formula of a deployment: its `max_batch` with CONTEXT_SLOT where a row's context goes."""
    expr, expander, context = max_batch_at_context(writer, block)
    return writer.expanded_formula(expr, expander, {context.name: CONTEXT_SLOT})


def _what_if_charts(ws, deployments: int, contexts: int) -> None:
    """Line charts of the table in rows 1..1+contexts, columns 2..1+deployments."""
    from openpyxl.chart import Reference

    last = 1 + contexts
    parts = groups(deployments)
    top = last + 4
    note = "On the log scale a 0 (past the model's longest context) is not drawn."
    if len(parts) > 1:
        ws.cell(top - 2, 1, f"The charts draw the table above, {SERIES_PER_CHART} deployments at most each.")
        ws.cell(top - 1, 1, note)
    else:  # the chart sits beside the table: the note goes below both
        ws.cell(max(top, CHART_ROWS + 1), 1, note)
    categories = Reference(ws, min_col=1, min_row=2, max_row=last)
    second = _column_after(ws, CHART_WIDTH_CM + 0.5)
    if len(parts) == 1:  # one chart: beside the table, so a page holds both
        top, first = 1, deployments + 3
    else:
        first = 1
    for k, (start, stop) in enumerate(parts):
        title = "Requests that fit at once"
        if len(parts) > 1:
            title += f" ({start + 1} to {stop} of {deployments})"
        data = Reference(ws, min_col=2 + start, max_col=1 + stop, min_row=1, max_row=last)
        chart = line_chart(title, categories, data, y_title="requests at once (log scale)",
                           x_title="context length (tokens)", log=True)
        row = top + (k // 2) * CHART_ROWS
        col = first if k % 2 == 0 else second
        ws.add_chart(chart, f"{column_letter(col)}{row}")


def _column_after(ws, cm: float) -> int:
    """The first column starting at least `cm` to the right of column A's left edge."""
    col, width = 1, 0.0
    while width < cm:
        set_width = ws.column_dimensions[column_letter(col)].width if column_letter(col) in ws.column_dimensions else None
        width += (set_width or DEFAULT_WIDTH) * CM_PER_CHARACTER
        col += 1
    return col


def line_chart(title: str, categories, data, y_title: str, x_title: str, log: bool = False):
    """A line chart of the columns of `data` (first row: series names) against `categories`."""
    from openpyxl.chart import LineChart

    chart = LineChart()
    chart.title = title
    chart.y_axis.title = y_title
    chart.x_axis.title = x_title
    chart.width, chart.height = CHART_WIDTH_CM, CHART_HEIGHT_CM
    chart.add_data(data, titles_from_data=True)
    chart.set_categories(categories)
    if log:
        chart.y_axis.scaling.logBase = 10
    chart.y_axis.number_format = "#,##0"
    chart.x_axis.number_format = "#,##0"
    chart.x_axis.tickLblPos = "low"
    _show_axes(chart)
    chart.legend.position = "r"
    for i, series in enumerate(chart.series):
        series.smooth = False
        series.marker.symbol = "circle"
        series.marker.size = 5
        color = DEFAULT_COLORS[i % len(DEFAULT_COLORS)]
        series.graphicalProperties.line.solidFill = color
        series.marker.graphicalProperties.solidFill = color
        series.marker.graphicalProperties.line.solidFill = color
    return chart


def memory_bar_chart(ws, anchor: str, title: str, categories, series, horizontal: bool = True,
                     axis_title: str = "GiB per GPU", colors=None):
    """A stacked bar chart of `series` over `categories` added to `ws` at `anchor` (see the module docstring)."""
    from openpyxl.chart import BarChart, Series
    from openpyxl.chart.series import SeriesLabel, StrRef

    chart = BarChart()
    chart.type = "bar" if horizontal else "col"
    chart.grouping = "stacked"
    chart.overlap = 100
    chart.gapWidth = 60
    chart.title = title
    chart.y_axis.title = axis_title
    chart.y_axis.number_format = "#,##0"
    chart.width, chart.height = CHART_WIDTH_CM, 6.0
    colors = list(colors or DEFAULT_COLORS)
    for i, (name, values) in enumerate(series):
        s = Series(values)
        if isinstance(name, str):
            s.tx = SeriesLabel(v=name)
        else:
            s.tx = SeriesLabel(strRef=StrRef(_absolute(name)))
        s.graphicalProperties.solidFill = colors[i % len(colors)]
        s.graphicalProperties.line.solidFill = colors[i % len(colors)]
        chart.series.append(s)
    chart.set_categories(categories)
    _show_axes(chart)
    chart.legend.position = "b"
    ws.add_chart(chart, anchor)
    return chart


def _absolute(reference) -> str:
    """`'Sheet'!$A$1` of a one-cell openpyxl Reference, or of a cell."""
    from openpyxl.utils import quote_sheetname

    if hasattr(reference, "coordinate"):  # a cell
        return f"{quote_sheetname(reference.parent.title)}!${reference.column_letter}${reference.row}"
    return f"{quote_sheetname(reference.worksheet.title)}!${column_letter(reference.min_col)}${reference.min_row}"


def _show_axes(chart) -> None:
    # openpyxl 3.1 writes <c:delete val="1"/> on axes unless told otherwise: Excel then draws none
    chart.x_axis.delete = False
    chart.y_axis.delete = False
    text_size(chart)


def text_size(chart, points: int = CHART_TEXT_PT) -> None:
    """Axis labels and legend in `points` (LibreOffice's default is 10 pt; printed smaller, it gets hard to read)."""
    from openpyxl.chart.text import RichText
    from openpyxl.drawing.text import CharacterProperties, Paragraph, ParagraphProperties

    def text():
        size = CharacterProperties(sz=points * 100)
        return RichText(p=[Paragraph(pPr=ParagraphProperties(defRPr=size), endParaRPr=size)])

    chart.x_axis.txPr = text()
    chart.y_axis.txPr = text()
    if chart.legend is not None:
        chart.legend.txPr = text()


__all__ = ["what_if_sheet", "max_batch_at_context", "memory_bar_chart", "line_chart", "groups", "SERIES_PER_CHART"]


def max_batch_at_context(writer, block: str):
    """`max_batch` of `block` with `context` left free, as SymPy: the prelude's rule, its context limit included.

    Returns the expression, the Expander that maps its symbols to cells, and the context symbol.
    """
    import sympy as sp

    from ..search import depends_on
    from ..symbolic import Expander

    context = sp.Symbol("what_if_context", positive=True)
    target = (block, "context")
    affected = depends_on(writer.program, target)
    expander = Expander(writer.program, stop=lambda key: key not in affected, rename={target: context})
    return expander.expand((block, "max_batch")), expander, context
