"""The Summary sheet: each deployment's main answers on one row, in planners' units (GiB, tokens,
sequences), each figure the deployment's own cell."""

from __future__ import annotations

from .cells import column_letter, text_cell
from .names import cell_name
from .validation import GIB


def summary_sheet(writer, wb) -> None:
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
    for i, name in enumerate(writer.layout.blocks["deployment"], start=2):
        text_cell(ws.cell(i, 1), writer.program.blocks[name].title)
        for col, (_, cell, fmt) in enumerate(columns[1:], start=2):
            target = ws.cell(i, col)
            if fmt == GIB:
                target.value = f"={cell_name((name, cell))}/{GIB}"
                target.number_format = '#,##0.00" GiB"'
            else:
                target.value = f"={cell_name((name, cell))}"
                target.number_format = fmt
            if isinstance(writer.values.get((name, cell)), bool):
                writer.booleans.setdefault(ws.title, []).append(target.coordinate)
            writer.formulas += 1
    ws.freeze_panes = "B2"
    ws.column_dimensions["A"].width = 44
    for col in range(2, len(columns) + 1):
        ws.column_dimensions[column_letter(col)].width = 16
