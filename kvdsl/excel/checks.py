"""The checks on typed cells of the block sheets: a drop-down on every cell that names a block, and
whole numbers, bounds, percentages or Yes/No from the `require` rules on every typed number.

The rules are read by validation.py; this module puts them on the sheets,
one data validation shared by every cell of a column that has the same rule.
"""

from __future__ import annotations

from ..labels import describe
from .cells import SHEETS, column_letter
from .lists import list_validation
from .names import ids_name
from .validation import Bounds, bounds, data_validation, example_text, human_unit, yes_no_validation


def sheet_validations(writer, wb) -> None:
    """A drop-down of names on every cell a reader types that names a block; the number checks."""
    for kind, names in writer.layout.blocks.items():
        ws = wb[SHEETS[kind]]
        per_kind: dict = {}
        for name in names:
            for cell in writer.program.blocks[name].cells:
                key = (name, cell)
                rc = writer.program.cells[key]
                if rc.form != "ref" or (writer.plan is not None and key in writer.plan.inputs):
                    continue
                target_kind = writer.program.blocks[rc.ref_target].kind
                if target_kind not in writer.layout.blocks:
                    continue
                # typed as a name in the twin column; in a hidden column (an engine's setting), as an id
                by_name = writer.human_input(key)
                if (target_kind, by_name) not in per_kind:
                    per_kind[(target_kind, by_name)] = (list_validation(writer, target_kind, describe(rc)[0]) if by_name
                                                        else id_validation(target_kind))
                    ws.add_data_validation(per_kind[(target_kind, by_name)])
                column = writer.human[kind][cell].column if by_name else writer.layout.columns[kind][cell]
                per_kind[(target_kind, by_name)].add(f"{column_letter(column)}{writer.layout.rows[name]}")
        _number_validations(writer, ws, kind, names)


def id_validation(kind: str):
    """A drop-down of a kind's ids, for a reference typed in a column of ids."""
    from openpyxl.worksheet.datavalidation import DataValidation

    return DataValidation(type="list", formula1=f"={ids_name(kind)}", allow_blank=False, showErrorMessage=True,
                          errorTitle="Not in the catalog", error=f"Choose one of the {SHEETS[kind]} rows.")


def _number_validations(writer, ws, kind: str, names: list) -> None:
    """Whole numbers, bounds and percentages from the `require` rules, on every typed number of a sheet."""
    groups: dict = {}
    for name in names:
        for cell in writer.program.blocks[name].cells:
            key = (name, cell)
            rc = writer.program.cells[key]
            if rc.form != "input" or isinstance(writer.values.get(key), str):
                continue
            if writer.plan is not None and key in writer.plan.inputs:
                continue
            if isinstance(writer.values.get(key), bool):
                _yes_no_validation(writer, ws, groups, kind, key)
                continue
            rule = bounds(writer.program, key) or Bounds()
            column = writer.layout.columns[kind][cell]
            if writer.human_input(key):
                column, unit = writer.human[kind][cell].column, writer.human[kind][cell].unit
            else:
                unit = human_unit(rc.dim, rule)
                if unit.factor != 1:  # typed in base units on this sheet
                    unit = type(unit)(1, unit.number_format, rc.dim.unit() or "")
            label = describe(rc)[0]
            signature = (column, rule.whole, rule.low, rule.low_strict, rule.high, rule.high_strict)
            if signature not in groups:
                dv = data_validation(rule, unit, label, example_text(writer.values.get(key), unit))
                if dv is None:
                    continue
                ws.add_data_validation(dv)
                groups[signature] = dv
            groups[signature].add(f"{column_letter(column)}{writer.layout.rows[name]}")


def _yes_no_validation(writer, ws, groups: dict, kind: str, key) -> None:
    """A typed condition (`flashinfer_sampler = true`): TRUE or FALSE from a drop-down."""
    column = writer.layout.columns[kind][key[1]]
    if (column, "yes/no") not in groups:
        groups[(column, "yes/no")] = yes_no_validation(describe(writer.program.cells[key])[0])
        ws.add_data_validation(groups[(column, "yes/no")])
    groups[(column, "yes/no")].add(f"{column_letter(column)}{writer.layout.rows[key[0]]}")
