"""The README sheet: how to use the workbook, in plain words, on one printed page.

`readme_sheet(writer, wb)` adds the sheet.  It says where to type (yellow
cells), what each sheet of this workbook answers, how to switch a model or a
GPU (the drop-downs), that everything recalculates, the units, and where the
formulas come from.  Sheets the workbook will not have (a spec without
models or deployments) are left out of the list.
"""

from __future__ import annotations

from .formula import UNBOUNDED

INPUT_FILL = "FFF2CC"
INPUT_FONT = "1F4E79"

# What each sheet answers, in the order a reader meets them.
SHEET_ANSWERS = [
    ("Plan", "Will a deployment fit? How many users, how fast, at what cost? Start here."),
    ("Deployments", "One row per deployment: its choices (model, GPU, how many, context) and all its results."),
    ("Models", "One row per model: its size and shape, as its makers publish them."),
    ("Hardware", "One row per GPU: its memory, speed and price per hour."),
    ("Workloads", "Typical traffic: prompt and answer lengths, users, speed targets."),
    ("Formats", "Number formats (fp16, fp8, q4_0...): how many bytes one stored value takes."),
    ("Engines", "Serving software (vLLM, SGLang, TensorRT-LLM, llama.cpp) and its settings."),
    ("Comparison", "How much memory each model needs per request, side by side."),
    ("What-if", "How many requests fit at once as the context grows from 1K to 256K tokens."),
    ("Summary", "Each deployment's main answers on one row, in GiB and tokens."),
]


def sheets_present(writer) -> set:
    """Names of the sheets `writer` builds besides README (see the module docstring)."""
    from .cells import SHEETS

    kinds = set(writer.layout.blocks)
    present = {SHEETS[k] for k in kinds if k in SHEETS}
    if "model" in kinds:
        present.add("Comparison")
    if "deployment" in kinds:
        present |= {"Summary", "What-if"}
        if getattr(writer, "plan", None) is not None:
            present.add("Plan")
    return present


def readme_lines(writer) -> list:
    """(label, text, style) rows of the sheet; style is "title", "heading", "input" or ""."""
    present = sheets_present(writer)
    rows = [
        ("GPU memory planner", "", "title"),
        ("", "Made by kvdsl from " + ", ".join(writer.sources) + ".", ""),
        ("", "", ""),
        ("Where to type", "", "heading"),
        ("Yellow", "Type only in yellow cells, like this one. Every other cell is calculated.", "input"),
        ("", "Everything recalculates by itself after each change (Excel: F9 forces it; LibreOffice: Ctrl+Shift+F9).", ""),
        ("", "", ""),
        ("What each sheet answers", "", "heading"),
    ]
    rows += [(sheet, text, "") for sheet, text in SHEET_ANSWERS if sheet in present]
    rows += [
        ("", "", ""),
        ("Switch model or GPU", "", "heading"),
        ("", "Click a deployment's model or hardware cell: a list appears. Pick another entry.", ""),
        ("", "The whole row follows: memory, users, speed and cost use the new model or GPU.", ""),
        ("", "The KV format, engine and workload cells switch the same way.", ""),
        ("", "The lists are the first column of the Models, Hardware, Formats, Engines and Workloads sheets.", ""),
    ]
    rows += cost_lines(writer)
    rows += [
        ("", "", ""),
        ("Units", "", "heading"),
        ("Memory", "GiB: 1 GiB = 1,073,741,824 bytes (1024 x 1024 x 1024).", ""),
        ("Context", "tokens: 32K = 32,768 tokens, 128K = 131,072 tokens. Type the whole number.", ""),
        ("Time, money", "seconds (1 ms = 0.001 s); US dollars.", ""),
        ("Unbounded", f"a limit that memory never reaches shows \"unbounded\" (stored as {UNBOUNDED}).", ""),
        ("", "", ""),
        ("Where formulas come from", "", "heading"),
        ("", "Each number is a formula built from the rules in the kvdsl spec files named above.", ""),
        ("", "Point at a calculated cell: its note gives the file, the line and the rule as written.", ""),
        ("", "Formulas use names, not addresses: qwen3_8b.layers is the layers cell of the model qwen3_8b.", ""),
        ("", "A name that looks like a cell address gets a leading underscore: _h100.memory.", ""),
    ]
    return rows


def cost_lines(writer) -> list:
    """The basis of the costs, in the prelude's words: what a month counts, where prices come from, which tokens."""
    from ..labels import describe

    deployments = writer.layout.blocks.get("deployment", [])
    cells = writer.program.cells
    if not deployments or (deployments[0], "cost_per_million_tokens") not in cells:
        return []
    words = lambda cell: describe(cells[(deployments[0], cell)])  # noqa: E731
    hours, total, answer = words("hours_per_month"), words("cost_per_million_tokens"), words("cost_per_million_output_tokens")
    return [
        ("", "", ""),
        ("Costs", "", "heading"),
        ("Prices", "The price per GPU-hour on the Hardware sheet is an example rate: type the rate you pay.", ""),
        ("Per month", "Price per GPU-hour x GPUs per copy x copies x hours per month.", ""),
        ("", f"{hours.label}: {hours.description}", ""),
        ("", "Each deployment's hours per month is a yellow cell on its Plan page.", ""),
        ("Per million tokens", f"{total.label}: {total.description}", ""),
        ("", f"{answer.label}: {answer.description}", ""),
        ("", "For 2,000-token prompts and 500-token answers the first is a fifth of the second.", ""),
    ]


def readme_sheet(writer, wb) -> None:
    """Add the README sheet for `writer` (a `WorkbookWriter`) to `wb`."""
    from openpyxl.styles import Alignment, Font, PatternFill

    from .cells import text_cell

    ws = wb.create_sheet("README")
    for i, (label, text, style) in enumerate(readme_lines(writer), start=1):
        a, b = text_cell(ws.cell(i, 1), label), text_cell(ws.cell(i, 2), text)
        a.alignment = b.alignment = Alignment(vertical="top")
        if style == "title":
            a.font = Font(bold=True, size=16)
        elif style == "heading":
            a.font = Font(bold=True, size=12)
        else:
            a.font = Font(bold=True)
        if style == "input":
            a.fill = PatternFill("solid", fgColor=INPUT_FILL)
            a.font = Font(bold=True, color=INPUT_FONT)
    ws.column_dimensions["A"].width = 24
    ws.column_dimensions["B"].width = 100
    ws.sheet_view.showGridLines = False


__all__ = ["readme_sheet", "readme_lines", "SHEET_ANSWERS"]
