"""The Comparison sheet: every model's KV cache side by side (scheme, elements per token, reduction
against full multi-head attention, cache per sequence), each figure the model's own cell."""

from __future__ import annotations

from .cells import text_cell
from .names import cell_name
from .lists import name_of
from .validation import GIB


def comparison_sheet(writer, wb) -> None:
    """The "One Table": scheme, elements per token, reduction vs MHA, cache per sequence."""
    from openpyxl.styles import Font

    ws = wb.create_sheet("Comparison")
    headers = ["model", "scheme", "elem/token", "vs MHA", "context", "KV format", "cache per sequence"]
    for col, text in enumerate(headers, start=1):
        ws.cell(1, col, text).font = Font(bold=True)
    for i, name in enumerate(writer.layout.blocks["model"], start=2):
        n = lambda cell, block=name: cell_name((block, cell))  # noqa: E731
        text_cell(ws.cell(i, 1), writer.program.blocks[name].title)
        ws.cell(i, 2).value = f"={n('scheme')}"
        ws.cell(i, 3).value = f"={n('kv_elements_per_token')}"
        ws.cell(i, 3).number_format = "#,##0"
        ws.cell(i, 4).value = f"={n('mha_reduction')}"
        ws.cell(i, 4).number_format = '0.0"x"'
        ws.cell(i, 5).value = f"={n('context')}"
        ws.cell(i, 5).number_format = '#,##0" tokens"'
        rc = writer.program.cells[(name, "kv_dtype")]
        kind = writer.program.blocks[rc.ref_target].kind if rc.form == "ref" else None
        ws.cell(i, 6).value = f"={name_of(kind, n('kv_dtype'))}" if kind in writer.choices else f"={n('kv_dtype')}"
        ws.cell(i, 7).value = f"={n('kv_bytes_per_sequence')}/{GIB}"
        ws.cell(i, 7).number_format = '0.00" GiB"'
        writer.formulas += 6
    ws.freeze_panes = "B2"
    for col, width in zip("ABCDEFG", (34, 30, 12, 9, 16, 14, 20)):
        ws.column_dimensions[col].width = width
