"""The names a reader picks from a list: each block's title's head, unique within its kind.

A drop-down offers these names (`Qwen3-8B`, `NVIDIA H100 SXM5 80GB`, `Chat`),
not the ids formulas use (`qwen3_8b`); the name a reader picks turns back
into the id in the named cell beside or behind it:

    =INDEX(all_models_ids, MATCH('Plan'!$B$9, all_models_names, 0))

The names live on a hidden sheet, Lists, one column per kind, each column
named `all_models_names` (`all_hardware_names`, ...).  A name is the title's
head, up to its first `: `, `, ` or ` (` ("Chat: 1,000-token prompts, ..." is
offered as "Chat", "vLLM (v1 engine)" as "vLLM"), so it is short and stays
put when a title that is a formula (a workload's) changes; two
blocks of a kind whose names would be equal, ignoring case as MATCH does,
are told apart by their ids, and `*`, `?` and `~` (which MATCH reads as
wildcards) are left out.
"""

from __future__ import annotations

import re

from .cells import column_letter, text_cell
from .names import ids_name, names_name

SHEET = "Lists"
_WILDCARDS = re.compile(r"[*?~]")


def choice_names(program, layout) -> dict:
    """kind -> {block: the name a list offers}, for every kind of the layout but deployments."""
    out: dict = {}
    for kind, blocks in layout.blocks.items():
        if kind == "deployment":
            continue
        names = {block: _name(program.blocks[block].title or block) for block in blocks}
        counts: dict = {}
        for name in names.values():
            counts[name.lower()] = counts.get(name.lower(), 0) + 1
        out[kind] = {block: (name if counts[name.lower()] == 1 else f"{name} ({block})") for block, name in names.items()}
    return out


def _name(title: str) -> str:
    """A title's head: up to its first `: `, `, ` or ` (`, wildcards left out."""
    head = re.split(r": |, | \(", title, maxsplit=1)[0]
    return _WILDCARDS.sub("", head).strip() or title


def name_of(kind: str, id_text: str) -> str:
    """Formula text for the name of the block whose id `id_text` gives."""
    return f"INDEX({names_name(kind)}, MATCH({id_text}, {ids_name(kind)}, 0))"


def id_of(kind: str, name_text: str) -> str:
    """Formula text for the id of the block whose name `name_text` gives."""
    return f"INDEX({ids_name(kind)}, MATCH({name_text}, {names_name(kind)}, 0))"


def lists_sheet(writer, wb) -> dict:
    """The hidden Lists sheet; returns {kind: the range of its names}, as `'Lists'!$A$2:$A$38`."""
    from openpyxl.styles import Font

    ws = wb.create_sheet(SHEET)
    ws.sheet_state = "hidden"
    ranges = {}
    for col, (kind, names) in enumerate(writer.choices.items(), start=1):
        ws.cell(1, col, kind).font = Font(bold=True)
        for row, block in enumerate(writer.layout.blocks[kind], start=2):
            text_cell(ws.cell(row, col), names[block])
        letter = column_letter(col)
        ranges[kind] = f"'{SHEET}'!${letter}$2:${letter}${len(names) + 1}"
    return ranges


def list_validation(writer, kind: str, words: str):
    """A drop-down of a kind's names, refusing anything else."""
    from openpyxl.worksheet.datavalidation import DataValidation

    sheet = writer.sheet_of(kind)
    return DataValidation(type="list", formula1=f"={names_name(kind)}", allow_blank=False, showErrorMessage=True,
                          showInputMessage=True, errorTitle="Not in the list",
                          error=f"Choose one of the rows of the {sheet} sheet.",
                          promptTitle=words[:32], prompt=f"Choose from the list (the {sheet} sheet).")
