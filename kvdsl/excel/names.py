"""The workbook's defined names: what each is called, that Excel takes them all, and where they point.

Every cell has a workbook-scoped name `block.cell`, every column of a kind's
sheet a name `all_models.cell` (the range of that column), the block names
of a sheet the name `all_models_ids`, their titles `all_models_titles` and the
names a drop-down offers `all_models_names` (lists.py).
A name whose first part reads as a cell reference (`h100`, `tp2`, `r`, `c`,
`r1c1`) gets a leading underscore: `_h100.memory`.
"""

from __future__ import annotations

import functools
import re

from ..errors import ExportError
from ..graph import Key, Program
from .cells import SHEETS, column_letter
from .layout import HEADER_ROWS

COLUMN_SETS = {"model": "all_models", "hardware": "all_hardware", "deployment": "all_deployments", "format": "all_formats",
               "engine": "all_engines", "workload": "all_workloads"}
MAX_NAME = 255  # Excel's longest defined name
RESERVED_PREFIXES = ("_xlfn", "_xlnm", "_xlws")  # names Excel keeps for itself (compared ignoring case)

_A1 = re.compile(r"^([A-Za-z]{1,3})(\d+)$")
_R1C1 = re.compile(r"^[Rr]\d*([Cc]\d*)?$|^[Cc]\d*$")


_MEMBER = re.compile(r"\[(\d+)\]")


@functools.lru_cache(maxsize=None)
def excel_name(name: str) -> str:
    """A defined name Excel accepts for `name` (see the module docstring)."""
    name = _MEMBER.sub(r".\1", name)  # `stage_start[3]` -> `stage_start.3`: no kvspec name part starts with a digit
    head = name.split(".", 1)[0]
    match = _A1.match(head)
    if match:
        column = 0
        for ch in match.group(1).upper():
            column = column * 26 + ord(ch) - 64
        if column <= 16384 and 1 <= int(match.group(2)) <= 1048576:
            return "_" + name
    if _R1C1.match(head) or head.upper() in ("TRUE", "FALSE"):
        return "_" + name
    return name


@functools.lru_cache(maxsize=1 << 16)  # every formula names the cells it reads: a catalog names 30,000 cells 100,000 times
def cell_name(key: Key) -> str:
    """The defined name of one cell: `block.cell`."""
    return excel_name(f"{key[0]}.{key[1]}")


def column_name(kind: str, cell: str) -> str:
    """The defined name of a column of a kind's sheet: `all_models.cell`."""
    return excel_name(f"{COLUMN_SETS[kind]}.{cell}")


def ids_name(kind: str) -> str:
    """The range of block names of a kind (no dot, so no cell can take it)."""
    return f"{COLUMN_SETS[kind]}_ids"


def titles_name(kind: str) -> str:
    """The range of block titles of a kind."""
    return f"{COLUMN_SETS[kind]}_titles"


def names_name(kind: str) -> str:
    """The range of the names a drop-down offers for a kind's blocks (lists.py)."""
    return f"{COLUMN_SETS[kind]}_names"


def check_names(program: Program, blocks: list) -> None:
    """Refuse names Excel would merge, reserve or cut, before anything is written.

    Excel and LibreOffice compare defined names ignoring case, keep the
    prefixes `_xlfn`, `_xlnm` and `_xlws` for themselves, and take at most
    255 characters; every name the workbook defines is checked.
    """
    seen: dict[str, str] = {}
    for info in blocks:
        name = excel_name(info.name).lower()
        if name in seen:
            raise ExportError(
                f"blocks `{seen[name]}` and `{info.name}` would share defined names in Excel "
                f"(names ignore case, and `{excel_name(seen[name])}` is how a cell-like name is written): rename one",
                info.block.name_span)
        seen[name] = info.name
        if name.startswith(RESERVED_PREFIXES):
            raise ExportError(f"a block may not be named `{info.name}` in a workbook: Excel keeps names that start "
                              f"with {', '.join(f'`{p}`' for p in RESERVED_PREFIXES)} for itself", info.block.name_span)
        if name in ({c.lower() for c in COLUMN_SETS.values()} | {ids_name(k).lower() for k in COLUMN_SETS}
                    | {titles_name(k).lower() for k in COLUMN_SETS} | {names_name(k).lower() for k in COLUMN_SETS}):
            raise ExportError(f"a block may not be named `{info.name}` in a workbook: the name is taken by a column",
                              info.block.name_span)
    owners: dict[str, tuple] = {}
    for defined, span, what in defined_names(program, blocks):
        if len(defined) > MAX_NAME:
            raise ExportError(f"{what} is longer than the {MAX_NAME} characters Excel allows in a name "
                              f"(its name has {len(defined)})", span)
        if defined.lower().startswith(RESERVED_PREFIXES):
            raise ExportError(f"{what} would be named `{defined}`, a prefix Excel keeps for itself", span)
        other = owners.setdefault(defined.lower(), (defined, span, what))
        if other[2] != what:
            raise ExportError(f"{other[2]} and {what} would share the defined name `{other[0]}` in Excel "
                              f"(names ignore case): rename one", span, hint=f"the other is at {other[1]}")


def defined_names(program: Program, blocks: list):
    """(name, span, description) of every name the workbook defines for `blocks`, cells first."""
    columns: dict[str, dict] = {}
    for info in blocks:
        for cell in info.cells:
            span = program.cells[(info.name, cell)].cell.name_span
            yield cell_name((info.name, cell)), span, f"cell `{info.name}.{cell}`"
            columns.setdefault(info.kind, {}).setdefault(cell, span)
    for kind, cells in columns.items():
        yield ids_name(kind), None, f"the list of {SHEETS[kind].lower()}"
        yield titles_name(kind), None, f"the titles of {SHEETS[kind].lower()}"
        if kind != "deployment":
            yield names_name(kind), None, f"the names of {SHEETS[kind].lower()}"
        for cell, span in cells.items():
            yield column_name(kind, cell), span, f"column `{column_name(kind, cell)}`"


def define_names(writer, wb) -> None:
    """Define every name in `wb`: each block's cells, each column, the block names and titles of each sheet."""
    from openpyxl.workbook.defined_name import DefinedName

    # hazard: DefinedName's constructor checks sixteen fields through descriptors, for each of
    # seventeen thousand names; each is made as a copy of one made that way (the fields keep
    # their values in the instance's __dict__, as the descriptors store them)
    fields = DefinedName("name", attr_text="ref").__dict__

    def add(name: str, ref: str):
        defined = object.__new__(DefinedName)
        defined.__dict__.update(fields, name=name, attr_text=ref)
        wb.defined_names[name] = defined
        writer.names += 1

    for kind, names in writer.layout.blocks.items():
        sheet = SHEETS[kind]
        first, last = HEADER_ROWS + 1, HEADER_ROWS + len(names)
        add(ids_name(kind), f"'{sheet}'!$A${first}:$A${last}")
        add(titles_name(kind), f"'{sheet}'!$B${first}:$B${last}")
        if kind in writer.lists:
            add(names_name(kind), writer.lists[kind])
        for cell, col in writer.layout.columns[kind].items():
            letter = column_letter(col)
            add(column_name(kind, cell), f"'{sheet}'!${letter}${first}:${letter}${last}")
        for name in names:
            row = writer.layout.rows[name]
            for cell in writer.program.blocks[name].cells:
                letter = column_letter(writer.layout.columns[kind][cell])
                add(cell_name((name, cell)), f"'{sheet}'!${letter}${row}")
