"""The Plan sheet's chart of one GPU's memory: what the GPU has beside what the deployment needs.

Two stacked bars on one axis that starts at 0: the GPU's memory (the part
the engine may use, then the part it leaves out), and what the deployment
needs on each GPU (weights, the reserve, the KV cache in use).  Where the
needs bar ends past the usable part, the deployment does not fit, and the
bars show by how much.  Each bar's label states its total
(`GPU 80.0 GiB (72.0 usable)`, `Needs 198.0 GiB`), and the figures are
written beside the results, all formulas over the deployment's named cells.
"""

from __future__ import annotations

from .charts import text_size
from .names import cell_name
from .validation import GIB

CHART_ROWS = 12  # rows the chart covers (6 cm at the default row height), below the results
FIGURES_COLUMN = 9  # column I: the chart's figures, beside the results
# (series, which bar it stacks on, the deployment cell in GiB, colour)
PARTS = [
    ("Usable by the engine", 0, "usable_bytes_per_gpu", "C6E0B4"),
    ("Left out by the engine", 0, "unused_bytes_per_gpu", "D9D9D9"),
    ("Weights", 1, "weights_bytes_per_gpu", "4472C4"),
    ("Reserve", 1, "reserve_bytes", "ED7D31"),
    ("KV cache in use", 1, "kv_bytes_per_gpu", "FFC000"),
]
FIGURE_ROWS = 1 + len(PARTS)  # the figures' heading and one row per part


def memory_chart(writer, ws, d: str, figures: int, anchor: str, width_cm: float) -> None:
    """The chart of deployment `d` at `anchor`, `width_cm` wide, and its figures from row `figures` of column I."""
    from openpyxl.chart import BarChart, Reference, Series
    from openpyxl.chart.series import SeriesLabel
    from openpyxl.styles import Alignment, Font

    cells = ("memory_per_gpu", "usable_bytes_per_gpu", "needed_bytes_per_gpu") + tuple(part[2] for part in PARTS)
    if any((d, cell) not in writer.program.cells for cell in cells):
        return
    n = lambda cell: cell_name((d, cell))  # noqa: E731
    col = FIGURES_COLUMN
    ws.cell(figures, col, "Memory of one GPU (GiB)").font = Font(bold=True)
    labels = [f'="GPU "&FIXED({n("memory_per_gpu")}/{GIB},1)&" GiB ("&FIXED({n("usable_bytes_per_gpu")}/{GIB},1)&" usable)"',
              f'="Needs "&FIXED({n("needed_bytes_per_gpu")}/{GIB},1)&" GiB"']
    for j, label in enumerate(labels):
        cell = ws.cell(figures, col + 1 + j, label)
        cell.font = Font(bold=True)
        cell.alignment = Alignment(wrap_text=True, vertical="top", horizontal="right")
    ws.row_dimensions[figures].height = 30
    chart = BarChart()
    chart.type = "bar"
    chart.grouping = "stacked"
    chart.overlap = 100
    chart.gapWidth = 40
    chart.height, chart.width = CHART_ROWS * 0.5, width_cm
    chart.legend.position = "b"
    chart.y_axis.title = "GiB per GPU"
    chart.y_axis.scaling.min = 0  # from 0, so a bar's length is its size
    chart.y_axis.number_format = "#,##0"
    chart.x_axis.scaling.orientation = "maxMin"  # the GPU's bar on top
    chart.x_axis.delete = chart.y_axis.delete = False
    text_size(chart)
    for i, (words, bar, cell, color) in enumerate(PARTS, start=1):
        row = figures + i
        ws.cell(row, col, words)
        figure = f"{n(cell)}/{GIB}"
        for j in range(2):
            target = ws.cell(row, col + 1 + j, f"={figure}" if j == bar else 0)
            target.number_format = "#,##0.0"
        writer.formulas += 1
        series = Series(Reference(ws, min_col=col + 1, max_col=col + 2, min_row=row), title=None)
        series.tx = SeriesLabel(v=words)
        series.graphicalProperties.solidFill = color
        series.graphicalProperties.line.solidFill = color
        chart.series.append(series)
    chart.set_categories(Reference(ws, min_col=col + 1, max_col=col + 2, min_row=figures))
    writer.formulas += 2
    ws.add_chart(chart, anchor)
