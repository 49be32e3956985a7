"""A cell's value on a sheet: a typed number (yellow), text, a lookup, a live formula, or a solved
cell's closed form, each with its number format.

`write_value` writes a cell as the spec gives it; `sheet_value` writes it on
its kind's sheet, where a deployment's typed cells read the Plan sheet;
`human_cell` writes the human-unit cell beside a memory, rate or price.
"""

from __future__ import annotations

import functools

from ..errors import ExportError
from ..graph import Key, Origin
from ..units import BYTES, SECONDS, TOKENS, USD, Dim
from .cells import text_cell
from .names import cell_name
from .printer import UNBOUNDED
from .validation import bounds, human_unit


def sheet_value(writer, target, key: Key) -> None:
    """A cell on its kind's sheet; a deployment's typed cell reads the Plan sheet in base units."""
    if writer.plan is not None and key in writer.plan.inputs:
        target.value = writer.plan.reference(key)
        target.number_format = number_format(writer.program.cells[key].dim)
        writer.formulas += 1
        return
    write_value(writer, target, key)
    if writer.program.blocks[key[0]].kind == "model" and _count(writer, key) and target.number_format in ("General", "#,##0.####"):
        target.number_format = "#,##0"


def _count(writer, key: Key) -> bool:
    """A whole number that stays whole: typed, or computed without a division (params, layers)."""
    rc, value = writer.program.cells[key], writer.values.get(key)
    if isinstance(value, (bool, str)) or value is None or getattr(value, "denominator", 0) != 1:
        return False
    return rc.form == "input" or (rc.form == "rule" and not _divides(rc.expr))


def human_value(writer, key: Key):
    """A cell's value in the unit of its human-unit column (GiB, GB/s, USD/h)."""
    kind = writer.program.blocks[key[0]].kind
    value = writer.values.get(key)
    if value is None or isinstance(value, (bool, str)):
        return value
    return stored_number(value / writer.human[kind][key[1]][1].factor)


def human_cell(writer, ws, row: int, key: Key, base):
    """The human-unit cell beside `base`: typed (yellow) when the block types the figure, else converted."""
    from openpyxl.styles import Font, PatternFill

    kind = writer.program.blocks[key[0]].kind
    col, unit = writer.human[kind][key[1]]
    shown = ws.cell(row, col)
    shown.number_format = unit.number_format
    if writer.human_input(key):
        shown.value = human_value(writer, key)
        shown.fill = PatternFill("solid", fgColor="FFF2CC")
        shown.font = Font(color="1F4E79")
        base.value = f"={shown.coordinate}{unit.to_base()}"
        base.fill, base.font = PatternFill(), Font()
    else:
        shown.value = f"={base.coordinate}{unit.from_base()}"
    writer.formulas += 1
    return shown


def write_value(writer, target, key: Key) -> None:
    """The value or formula of a cell, as the spec gives it."""
    rc = writer.program.cells[key]
    value = writer.values.get(key)
    if rc.scope and rc.origin == Origin.ENGINE and (rc.scope, rc.local_name) in writer.program.cells:
        # an engine's setting, unchanged by this deployment: read it from the engine's row
        target.value = "=" + cell_name((rc.scope, rc.local_name))
        writer.formulas += 1
    elif rc.form == "input":
        target.value = stored_number(value)
        target.fill, target.font = input_style()
    elif rc.form == "text" and not value:
        # an empty cell reads as 0 in a formula (Excel and LibreOffice; `formulas` as empty): the empty text, written so
        target.value = '=""'
        writer.formulas += 1
    elif rc.form == "text":
        text_cell(target, value)
    elif rc.form == "ref":
        if isinstance(rc.ref_expr, str):
            text_cell(target, rc.ref_target)
            target.fill, target.font = input_style()
        else:
            target.value = "=" + writer.lookup(rc.ref_expr.key, rc.ref_expr.via)
            writer.formulas += 1
    elif rc.form == "unknown":
        from openpyxl.comments import Comment

        from ..errors import NoLiveForm, SolveError
        from ..solve_live import live_form

        live = True
        try:
            expr, expander, _ = live_form(writer.program, key[0], key[1])
            try:
                target.value = writer.expanded_formula(expr, expander, {})
            except ExportError:  # too long for Excel: drop the regimes of the cells that are 0 now
                expr, expander, assumed = live_form(writer.program, key[0], key[1], assume_zeros=True)
                target.value = writer.expanded_formula(expr, expander, {})
                target.comment = Comment(
                    f"Solved by kvdsl. The formula holds while these stay 0 (or false): {', '.join(assumed)}; "
                    "export again after changing them.", "kvdsl")
        except NoLiveForm as exc:
            live = False
            target.value = stored_number(value)
            target.comment = Comment(f"Solved by kvdsl: {exc.message}. This number does not follow the other "
                                     "inputs: export again after changing them.", "kvdsl", width=300, height=90)
        except SolveError as exc:
            raise ExportError(exc.message, rc.cell.span, exc.hint) from None
        writer.formulas += live
        target.number_format = f'[>={UNBOUNDED}]"unbounded";' + number_format(rc.dim)
        return
    else:
        target.value = writer.rule_formula(key)
        writer.formulas += 1
    if isinstance(value, bool):
        writer.booleans.setdefault(target.parent.title, []).append(target.coordinate)
    elif rc.form == "input" and isinstance(rc.dim, Dim):
        unit = human_unit(rc.dim, bounds(writer.program, key))
        target.number_format = unit.number_format if unit.unit in ("%", "") else number_format(rc.dim)
    else:
        target.number_format = number_format(rc.dim)


@functools.lru_cache(maxsize=None)
def input_style():
    """The fill and font of an input cell, made once and shared (openpyxl hashes each style it is given)."""
    from openpyxl.styles import Font, PatternFill

    return PatternFill("solid", fgColor="FFF2CC"), Font(color="1F4E79")


def _divides(expr) -> bool:
    """Whether a rule divides anywhere (its value may then stop being whole)."""
    from .. import model as m

    todo = [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, m.Binary) and node.op == "/":
            return True
        if isinstance(node, m._Node):
            todo.extend(node.children())
    return False


def stored_number(value):
    """An exact value as the int or float a sheet stores."""
    if isinstance(value, bool) or value is None:
        return value
    if value.denominator == 1:
        return int(value)
    return float(value)


def number_format(dim) -> str:
    """The number format of a value of dimension `dim`, its unit shown after the number."""
    if dim == BYTES:
        return '#,##0" B"'
    if dim == TOKENS:
        return '#,##0" tokens"'
    if isinstance(dim, Dim) and dim == Dim((1, 0, 0, -1)):
        return '#,##0" B/s"'
    if dim == USD:
        return '"$"#,##0.00'
    if dim == USD / SECONDS:
        return '"$"0.000000" /s"'
    if dim == SECONDS:
        return '#,##0.000" s"'
    if isinstance(dim, Dim) and not dim.dimensionless:
        return "#,##0.####"
    return "General"
