"""A cell's value on a sheet: a typed number (yellow), text, a lookup, a live formula, or a solved
cell's closed form, each with its number format.

`write_value` writes a cell as the spec gives it; `sheet_value` writes it on
its kind's sheet, where a deployment's typed cells read the Plan sheet;
`human_cell` writes the human-unit cell beside a memory, rate or price.
"""

from __future__ import annotations

import functools

from ..dims import PRELUDE_SHOWN
from ..errors import ExportError
from ..graph import Key, Origin
from ..units import Dim
from .cells import text_cell
from .names import cell_name
from .formula import UNBOUNDED
from .validation import bounds, human_unit, number_format


def sheet_value(writer, target, key: Key) -> None:
    """A cell on its kind's sheet; a deployment's typed cell reads the Plan sheet in base units."""
    if writer.plan is not None and key in writer.plan.inputs:
        target.value = writer.plan.reference(key)
        rc = writer.program.cells[key]
        share = isinstance(rc.dim, Dim) and human_unit(rc.dim, bounds(writer.program, key)).unit == "%"
        target.number_format = "0%" if share else number_format(rc.dim, writer.values.get(key))
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
    """A cell's value as its twin column shows it: in GiB, GB/s, USD/h, or a block's name."""
    kind = writer.program.blocks[key[0]].kind
    value = writer.values.get(key)
    twin = writer.human[kind][key[1]]
    if twin.names and isinstance(value, str):
        return writer.choices[twin.names].get(value, value)
    if value is None or isinstance(value, (bool, str)):
        return value
    return stored_number(value / twin.unit.factor)


def human_cell(writer, ws, row: int, key: Key, base):
    """The twin of `base`: typed (yellow) when the block types the figure, else shown from it."""
    from openpyxl.styles import Font, PatternFill

    from .lists import id_of, name_of

    kind = writer.program.blocks[key[0]].kind
    twin = writer.human[kind][key[1]]
    shown = ws.cell(row, twin.column)
    shown.number_format = twin.unit.number_format
    if writer.human_input(key):
        if twin.names:
            text_cell(shown, human_value(writer, key))
            base.value = f"={id_of(twin.names, shown.coordinate)}"
        else:
            shown.value = human_value(writer, key)
            base.value = f"={shown.coordinate}{twin.unit.to_base()}"
        shown.fill, shown.font = input_style()
        base.fill, base.font = PatternFill(), Font()
    else:
        figure = name_of(twin.names, base.coordinate) if twin.names else f"{base.coordinate}{twin.unit.from_base()}"
        shown.value = f'=IF(ISNA({base.coordinate}),"n/a",{figure})' if twin.na else f"={figure}"
        if isinstance(writer.values.get(key), bool):
            writer.booleans.setdefault(ws.title, []).append(shown.coordinate)
    writer.formulas += 1
    return shown


def write_value(writer, target, key: Key) -> None:
    """The value or formula of a cell, as the spec gives it; one Excel refuses is an error at the text that made it."""
    try:
        _write_value(writer, target, key)
    except ExportError as exc:
        if exc.span is not None:
            raise
        raise at_cell(writer.program, key, exc) from None


def at_cell(program, key: Key, exc: ExportError) -> ExportError:
    """`exc`, unpositioned, at the cell `key`: its own line when a user wrote it; for a rule of the prelude
    run in a user's block, that block's name (the prelude's line is named in the message)."""
    rc, info = program.cells[key], program.blocks[key[0]]
    if info.prelude or not rc.span.path.startswith(PRELUDE_SHOWN):
        return ExportError(exc.message, rc.span, exc.hint)
    return ExportError(f"`{key[1]}` of {info.kind} `{key[0]}` (the prelude's rule at {rc.span.path}:{rc.span.line}): "
                       f"{exc.message}", info.block.name_span, exc.hint)


def _write_value(writer, target, key: Key) -> None:
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
        formula, note = writer.derived(("solved", key), lambda: _solved_formula(writer, key))
        target.value = stored_number(value) if formula is None else formula
        if note is not None:
            from openpyxl.comments import Comment

            target.comment = Comment(note[0], "kvdsl", **note[1])
        writer.formulas += formula is not None
        target.number_format = f'[>={UNBOUNDED}]"unbounded";' + number_format(rc.dim, value)
        return
    else:
        target.value = writer.rule_formula(key)
        writer.formulas += 1
    if isinstance(value, bool):
        writer.booleans.setdefault(target.parent.title, []).append(target.coordinate)
    elif rc.form == "input" and isinstance(rc.dim, Dim):
        unit = human_unit(rc.dim, bounds(writer.program, key))
        target.number_format = unit.number_format if unit.unit in ("%", "") else number_format(rc.dim, value)
    else:
        target.number_format = number_format(rc.dim, value, fractional=rc.form != "rule" or _may_be_fractional(rc.expr))


@functools.lru_cache(maxsize=None)
def input_style():
    """The fill and font of an input cell, made once and shared (openpyxl hashes each style it is given)."""
    from openpyxl.styles import Font, PatternFill

    return PatternFill("solid", fgColor="FFF2CC"), Font(color="1F4E79")


def _may_be_fractional(expr) -> bool:
    """Whether a rule's value may stop being whole: it divides, or multiplies by a number that is not whole."""
    from .. import model as m

    todo = [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, m.Binary) and node.op in ("/", "^"):
            return True
        if isinstance(node, m.Num) and node.value != int(node.value):
            return True
        if isinstance(node, m._Node):
            todo.extend(node.children())
    return False


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


def _solved_formula(writer, key: Key) -> tuple:
    """(formula, note) of a solved cell: its closed form over the cells it reads, or None when it has none (its
    number is written then); the note, when one is needed, as (text, the note's size)."""
    from ..errors import NoLiveForm, SolveError
    from ..solve_live import live_form

    try:
        expr, expander, _ = live_form(writer.program, key[0], key[1])
        try:
            return writer.expanded_formula(expr, expander, {}), None
        except ExportError:  # too long for Excel: drop the regimes of the cells that are 0 now
            formula, assumed = _shorter(writer, key, expr, expander)
            return formula, (f"Solved by kvdsl. The formula holds while these stay 0 (or false): {', '.join(assumed)}; "
                             "export again after changing them.", {})
    except (NoLiveForm, ExportError) as exc:  # no formula follows it, or none Excel holds: its number is written
        return None, (f"Solved by kvdsl: {exc.message}. This number does not follow the other inputs: export again "
                      "after changing them.", {"width": 300, "height": 90})
    except SolveError as exc:
        raise ExportError(exc.message, writer.program.cells[key].cell.span, exc.hint) from None


def _shorter(writer, key, expr, expander) -> tuple:
    """(formula, the names assumed 0) of a solved cell whose full formula is too long for Excel: the cells that
    are 0 (or false) now fixed there one at a time, those the formula names most often first, each kept when the
    formula still gives the answer, until it is short enough."""
    from collections import Counter

    from ..errors import SolveError
    from ..solve_live import live_form

    from ..evaluate import evaluate

    program = writer.program
    values = evaluate(program, unchecked=frozenset(k for k, rc in program.cells.items() if rc.form == "require"))
    zeros = [str(symbol) for symbol, k in expander.symbols.items() if k != key and (values.get(k) is False or (
        not isinstance(values.get(k), bool) and values.get(k) == 0))]
    too_long = ExportError(f"the formula of `{key[0]}.{key[1]}` is too long for Excel")
    try:  # every such cell fixed at once gives the shortest formula: when even that is too long, none will do
        writer.expanded_formula(*live_form(program, key[0], key[1], assume_zeros=frozenset(zeros))[:2], {})
    except SolveError:  # one of them changes the answer: the search below keeps it in the formula
        pass
    except ExportError:
        raise too_long from None
    text = str(expr)
    chosen: set = set()
    for name, _ in Counter({name: text.count(name) for name in zeros}).most_common():
        try:
            expr, expander, assumed = live_form(writer.program, key[0], key[1], assume_zeros=frozenset(chosen | {name}))
        except SolveError:  # the formula would no longer give the answer: that cell stays in it
            continue
        chosen.add(name)
        try:
            return writer.expanded_formula(expr, expander, {}), assumed
        except ExportError:
            continue
    raise too_long
