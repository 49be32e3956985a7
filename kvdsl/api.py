"""The library entry points: load specs (with `--set` overrides) and evaluate them."""

from __future__ import annotations

from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Optional

from .errors import OPTION_PREFIX, SETTING_PREFIX, KvdslError, Span, UsageError, did_you_mean, flatten
from .graph import Program, build, merged_blocks, with_literals
from .loader import load
from .model import Bool, Cell, Num


@dataclass(frozen=True)
class Setting:
    """One `--set [block.]cell=value`."""

    block: Optional[str]
    cell: Cell


def parse_setting(text: str, option: Optional[str] = None) -> Setting:
    """`context=32K` or `chat.gpus=8` -> a Setting whose cell is parsed as kvspec.

    `option` names the option that stands for this setting (`--context`), so
    that its errors name the option as typed, not `--set`.
    """
    from .parser import parse_cell

    target, sep, value = text.partition("=")
    target = target.strip()
    if not sep or not target or not value.strip():
        raise UsageError(f"--set needs NAME=VALUE, not `{text}`", hint="e.g. --set context=32K or --set chat.gpus=8")
    block, _, name = target.partition(".") if "." in target else ("", "", target)
    where = f"{option} {value.strip()}" if option else SETTING_PREFIX + text
    try:
        cell = parse_cell(f"{name} = {value.strip()}", where)
    except KvdslError as err:
        raise UsageError(err.message, err.span, err.hint) from None
    return Setting(block or None, cell)


# the programs built last, by what they were built from (most recent last),
# each with the cells it holds of its own; a Program is not changed once
# built, so one can be handed out again
_BUILT: "OrderedDict[tuple, tuple[Program, int]]" = OrderedDict()
BUILT_KEPT = 16
BUILT_CELLS_KEPT = 40_000  # about three catalogs, 90 MiB; the newest program is kept whatever its size


def build_program(paths: Iterable[str], settings: Iterable[Setting] = ()) -> Program:
    """Load specs and resolve them, applying settings; raise every error found.

    The same files (same texts) with the same settings give the same program:
    the last few built (up to BUILT_KEPT programs and BUILT_CELLS_KEPT cells)
    are kept and handed out again.
    """
    settings = list(settings)
    workspace = load(list(paths))
    key = (workspace.fingerprint, tuple((s.block, s.cell.source, s.cell.span.path) for s in settings))
    if key not in _BUILT:
        _keep(key, _build(workspace, settings))
    _BUILT.move_to_end(key)
    while len(_BUILT) > 1 and (len(_BUILT) > BUILT_KEPT or sum(own for _, own in _BUILT.values()) > BUILT_CELLS_KEPT):
        _BUILT.popitem(last=False)
    return _BUILT[key][0]


def _keep(key: tuple, program: Program) -> None:
    """Keep a program; one made by `with_literals` shares all but its settings' cells with another."""
    _BUILT[key] = (program, program.own_cells if program.own_cells is not None else len(program.cells))


def forget_programs() -> None:
    """Drop the programs kept by `build_program` (their memory can then be reused)."""
    _BUILT.clear()


def _build(workspace, settings: list) -> Program:
    if not settings:
        return build(workspace)
    if workspace.errors:
        raise_workspace(workspace)
    base = _BUILT.get((workspace.fingerprint, ()), (None,))[0]
    if base is None and all(_literal(s) for s in settings):
        base = _plain_program(workspace)
    blocks = base.blocks if base is not None else merged_blocks(workspace)
    overrides = settings_by_block(blocks, settings)
    program = with_literals(base, overrides) if base is not None else None
    if program is not None:
        return program
    with settings_as_usage_errors():
        return build(workspace, overrides)


def settings_by_block(blocks: dict, settings: list) -> dict:
    """block -> {cell name: the Cell a setting gives it}, for every block each setting changes."""
    overrides: dict[str, dict[str, Cell]] = {}
    for setting in settings:
        for block in _targets(blocks, setting):
            overrides.setdefault(block, {})[setting.cell.name] = setting.cell
    return overrides


def _literal(setting: Setting) -> bool:
    """A number or flag for a block's own cell: `with_literals` can likely apply it to the plain program."""
    return setting.cell.form == "rule" and isinstance(setting.cell.expr, (Num, Bool)) and "." not in setting.cell.name


def _plain_program(workspace) -> Optional[Program]:
    """The workspace's program without settings, built and kept, or None if it has errors.

    Settings that only change literals are applied to it (`with_literals`),
    which costs far less than resolving the whole workspace again.
    """
    try:
        program = build(workspace)
    except KvdslError:  # settings may supply what the spec lacks
        return None
    _keep((workspace.fingerprint, ()), program)
    return program


@contextmanager
def settings_as_usage_errors():
    """A mistake in a `--set` value is a usage error (exit 2), not a spec error."""
    try:
        yield
    except KvdslError as exc:
        from_set = [e for e in flatten(exc) if e.span is not None and e.span.path.startswith(OPTION_PREFIX)]
        if from_set and not isinstance(exc, UsageError):
            first = from_set[0]
            raise UsageError(first.message, first.span, first.hint) from None
        raise


def raise_workspace(workspace) -> None:
    from .errors import raise_all

    raise_all(workspace.errors)


def _targets(blocks: dict, setting: Setting) -> list[str]:
    """The blocks a `--set` changes: the one it names, or every block that has the cell."""
    name = setting.cell.name
    if setting.block is not None:
        info = blocks.get(setting.block)
        if info is None:
            raise UsageError(f"--set: no block named `{setting.block}`", hint=did_you_mean(setting.block, blocks))
        if name not in _settable(info):
            raise UsageError(f"--set: {info.kind} `{setting.block}` has no cell `{name}`", hint=did_you_mean(name, _settable(info)))
        return [setting.block]
    found = [b for b, info in blocks.items() if name in _settable(info)]
    if setting.cell.form == "unknown":  # `NAME=?` means: solve it where there is something to solve against
        found = [b for b in found if "fits" in blocks[b].cells]
    if not found:
        every = {c for info in blocks.values() for c in _settable(info)}
        raise UsageError(f"--set: no block has a cell `{name}`", hint=did_you_mean(name, every))
    return found


def _settable(info) -> list:
    """The cells `--set` may change in a block: an engine's are its rules."""
    return list(info.template) if info.template is not None else info.cells


def choose_block(program: Program, cell: str, block: Optional[str], needs: Optional[str] = None) -> str:
    """The block a command works in: the one given, or the only one that has `cell` (and `needs`)."""
    if block is not None:
        if block not in program.blocks:
            raise UsageError(f"no block named `{block}`", hint=did_you_mean(block, program.blocks))
        return block
    head = cell if any(cell in b.cells for b in program.user_blocks()) else cell.split(".")[0]
    candidates = [b.name for b in program.user_blocks() if head in b.cells and (needs is None or needs in b.cells)]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        also = f" and a `{needs}` constraint" if needs else ""
        raise UsageError(f"no block has a cell `{cell}`{also}")
    raise UsageError(f"{len(candidates)} blocks have `{cell}`: choose one with --block", hint=", ".join(candidates))


def evaluate_paths(paths: Iterable[str], settings: Iterable[Setting] = ()):
    """(program, values) for the given specs; `?` cells are solved."""
    from .evaluate import evaluate

    program = build_program(paths, settings)
    with settings_as_usage_errors():
        base = evaluate(program)
        solved = solve_unknowns(program, base)
        return program, evaluate(program, solved, known=base) if solved else base


def solve_unknowns(program: Program, base: dict) -> dict:
    """Values for the `?` cells: each solved against its block's `fits`, or its workload's targets when
    the workload sets some (`base`: the values without them)."""
    unknowns = [rc for rc in program.cells.values() if rc.form == "unknown" and not program.blocks[rc.block].prelude]
    if not unknowns:
        return {}
    from .errors import SolveError, raise_all
    from .search import search_answer

    errors, solved, seen = [], {}, {}
    for rc in unknowns:
        if rc.block in seen:
            errors.append(SolveError(f"block `{rc.block}` has two unknowns, `{seen[rc.block]}` and `{rc.name}`: solve for one at a time",
                                     rc.cell.span))
        seen.setdefault(rc.block, rc.name)
    raise_all(errors)
    for rc in unknowns:
        if ("fits" not in program.blocks[rc.block].cells):
            errors.append(SolveError(f"`{rc.name} = ?` needs a `fits` constraint in block `{rc.block}` to solve against", rc.cell.span))
            continue
        if program.cells[(rc.block, "fits")].dim == "bool" and program.cells[rc.key].dim != "bool":
            found = search_answer(program, rc.block, rc.name, base)
            if found.value is not None and found.verified:
                solved[rc.key] = found.value
                continue
        from .solve import solve  # the symbolic path: it says why when there is no answer

        try:
            solution = solve(program, rc.block, rc.name)
        except SolveError as exc:
            errors.append(SolveError(exc.message, exc.span or rc.cell.span, exc.hint))
            continue
        if solution.value is None:
            errors.append(SolveError(f"cannot solve `{rc.block}.{rc.name}`: {solution.message}", rc.cell.span))
        elif not solution.verified:
            errors.append(SolveError(f"cannot solve `{rc.block}.{rc.name}`: {solution.value} does not check out "
                                     f"when substituted back (is `fits` monotone in `{rc.name}`?)", rc.cell.span))
        else:
            solved[rc.key] = Fraction(solution.value)
    raise_all(errors)
    return solved


__all__ = ["Setting", "parse_setting", "build_program", "evaluate_paths", "KvdslError", "Span", "flatten"]
