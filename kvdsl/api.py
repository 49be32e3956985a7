"""The library entry points: load specs (with `--set` overrides) and evaluate them."""

from __future__ import annotations

from fractions import Fraction
from typing import Iterable, Optional

from .errors import KvdslError, Span, UsageError, did_you_mean, flatten
from .build import build_program, forget_programs
from .graph import Program
from .settings import Setting, parse_setting, settings_as_usage_errors, settings_by_block  # noqa: F401  (entry points)


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


def evaluate_paths(paths: Iterable[str], settings: Iterable[Setting] = (), unanswered: Optional[list] = None):
    """(program, values) for the given specs; `?` cells are solved.

    A `?` that has no answer (no batch fits) is an error; with a list for
    `unanswered`, its error goes there instead, the cell's value is None and
    the rest of its block keeps the values it has without an answer (its
    verdict says why none fits).
    """
    from .evaluate import evaluate

    from .progress import stage

    program = build_program(paths, settings)
    with settings_as_usage_errors():
        stage(f"evaluating {len(program.cells):,} cells")
        base = evaluate(program)
        stage("solving the `?` cells")
        solved = solve_unknowns(program, base, unanswered)
        values = evaluate(program, solved, known=base) if solved else base
        for error in unanswered or ():
            values[error.key] = None
        return program, values


def solve_unknowns(program: Program, base: dict, unanswered: Optional[list] = None) -> dict:
    """Values for the `?` cells: each solved against its block's `fits`, or its workload's targets when
    the workload sets some (`base`: the values without them).  Those with no answer are errors, or
    go to `unanswered` (each error with the cell's `key`) when a list is given."""
    plain = bool(program.evaluated) and base == program.evaluated[0]
    if plain and program.solved is not None:
        return dict(program.solved)
    missed = [] if unanswered is not None else None
    solved = _solved(program, base, missed, program.kept_answers if plain else {})
    if missed:
        unanswered.extend(missed)
    elif plain:  # kept only when every `?` has its answer: `check` must still see the errors
        program.solved = dict(solved)
    return solved


def _solved(program: Program, base: dict, unanswered: Optional[list] = None, kept: Optional[dict] = None) -> dict:
    unknowns = [rc for rc in program.cells.values() if rc.form == "unknown" and not program.blocks[rc.block].prelude]
    if not unknowns:
        return {}
    from .errors import SolveError, raise_all
    from .windows import search_answer

    errors, solved, seen = [], {}, {}
    for rc in unknowns:
        if rc.block in seen:
            errors.append(SolveError(f"block `{rc.block}` has two unknowns, `{seen[rc.block]}` and `{rc.name}`: solve for one at a time",
                                     rc.cell.span))
        seen.setdefault(rc.block, rc.name)
    raise_all(errors)
    for rc in unknowns:
        if kept and rc.key in kept:  # the answer of a block the program it was rebuilt from had (`kvdsl/reuse.py`)
            solved[rc.key] = kept[rc.key]
            continue
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
            error = SolveError(f"cannot solve `{rc.block}.{rc.name}`: {solution.message}", rc.cell.span)
            error.key = rc.key
            (unanswered if unanswered is not None else errors).append(error)
        elif not solution.verified:
            errors.append(SolveError(f"cannot solve `{rc.block}.{rc.name}`: {solution.value} does not check out "
                                     f"when substituted back (is `fits` monotone in `{rc.name}`?)", rc.cell.span))
        else:
            solved[rc.key] = Fraction(solution.value)
    raise_all(errors)
    return solved


__all__ = ["Setting", "parse_setting", "build_program", "forget_programs", "evaluate_paths", "KvdslError", "Span", "flatten"]
