"""The Summary sheet: each deployment's main answers on one row, in planners' units (GiB, tokens,
sequences) and names, each figure the deployment's own cell."""

from __future__ import annotations

from .cells import column_letter
from .names import cell_name
from .validation import GIB


def summary_sheet(writer, wb) -> None:
    """Each deployment's answers in planners' units: GiB, tokens, sequences; models, GPUs, formats and engines by name."""
    from openpyxl.styles import Alignment, Font

    from .kind_sheet import ROW_HEIGHT, TEXT_CHAR, TITLE_WIDTH, display_width, header_width, wrapped_lines
    from .lists import name_of

    ws = wb.create_sheet("Summary")
    columns = [
        ("deployment", None, None), ("model", "model", "@"), ("GPU", "hardware", "@"), ("GPUs", "gpus", "#,##0"),
        ("KV format", "kv_dtype", "@"), ("context", "context", '#,##0" tokens"'), ("batch", "batch", "#,##0"),
        ("fits", "fits", "General"), ("max batch", "max_batch", "#,##0"), ("max context", "max_context", '#,##0" tokens"'),
        ("weights per GPU", "weights_bytes_per_gpu", GIB), ("KV budget per GPU", "kv_budget_bytes_per_gpu", GIB),
        ("KV per sequence per GPU", "kv_bytes_per_sequence_per_gpu", GIB), ("KV per GPU at batch", "kv_bytes_per_gpu", GIB),
        ("shortfall per GPU", "shortfall_bytes_per_gpu", GIB),
        ("engine", "engine", "@"), ("engine KV tokens", "engine_kv_cache_tokens", '#,##0" tokens"'),
        ("engine blocks", "engine_num_blocks", "#,##0"), ("engine concurrency", "engine_max_concurrency", '0.00"x"'),
    ]
    widths = {}
    for col, (title, _, _) in enumerate(columns, start=1):
        head = ws.cell(1, col, title)
        head.font = Font(bold=True)
        head.alignment = Alignment(wrap_text=True, vertical="top")
        widths[col] = header_width(title)
    for i, name in enumerate(writer.layout.blocks["deployment"], start=2):
        ws.cell(i, 1).value = "=" + writer.title_cell(name)
        ws.cell(i, 1).alignment = Alignment(wrap_text=True, vertical="top")
        lines = wrapped_lines(writer.program.blocks[name].title, TITLE_WIDTH, TEXT_CHAR)
        writer.formulas += 1
        for col, (_, cell, fmt) in enumerate(columns[1:], start=2):
            target = ws.cell(i, col)
            key = (name, cell)
            rc = writer.program.cells.get(key)
            value = writer.values.get(key)
            if fmt == GIB:
                target.value = f"={cell_name(key)}/{GIB}"
                target.number_format = '#,##0.00" GiB"'
                value = None if value is None else float(value) / GIB
            elif rc is not None and rc.form == "ref" and writer.program.blocks[rc.ref_target].kind in writer.choices:
                kind = writer.program.blocks[rc.ref_target].kind
                target.value = f"={name_of(kind, cell_name(key))}"
                value = writer.choices[kind].get(value, value)
            else:
                target.value = f"={cell_name(key)}"
                target.number_format = fmt
            if isinstance(writer.values.get(key), bool):
                writer.booleans.setdefault(ws.title, []).append(target.coordinate)
            widths[col] = max(widths[col], display_width(value, target.number_format))
            writer.formulas += 1
            if lines > 1:
                target.alignment = Alignment(vertical="top")
        if lines > 1:  # a spreadsheet does not fit a row to a formula's text: the row says its height
            ws.row_dimensions[i].height = ROW_HEIGHT * lines
    ws.freeze_panes = "B2"
    ws.column_dimensions["A"].width = TITLE_WIDTH
    for col in range(2, len(columns) + 1):
        ws.column_dimensions[column_letter(col)].width = min(widths[col], 30)
    # a spreadsheet does not fit a row's height to wrapped text when it opens the file: each row says its own
    ws.row_dimensions[1].height = ROW_HEIGHT * max(wrapped_lines(title, ws.column_dimensions[column_letter(col)].width)
                                                   for col, (title, _, _) in enumerate(columns, start=1))
