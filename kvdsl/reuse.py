"""A program built again after some files changed, from the program built before them.

Editing a deployment and running again changes one file: the blocks of the
other files resolve to the same cells as before, with the same values and
`?` answers.  `rebuilt_blocks` says which blocks must be resolved again: those
of the changed files, and every block whose names were looked up in one of
those (`Program.consulted`) or that extends one, and so on.  The others are
taken from the program built before (`graph.rebuild`), with their values and
answers (`carry_over`).  So are the cells of the blocks resolved again that
are made from the same definitions as before (a deployment's prelude and
engine rules, when one of its own lines changed), as long as the cells
resolved again keep their dimensions and the blocks they name.

Only a change that leaves everything else as it was qualifies: the same files
in the same order (no import added or removed, no file moved), the same
blocks of the same kinds in the same order, no prelude file changed, and no
changed file (before or after) holding a `defaults`, a `fn` or an engine,
which every block of a kind reads.  Otherwise, and whenever the blocks
resolved again have a mistake, the program is built in full, as before.
"""

from __future__ import annotations

from typing import Optional

from . import model as m
from .program import Program


def rebuilt_blocks(ws, base: Program) -> Optional[set]:
    """The blocks of the workspace `ws` to resolve again, the others being taken from `base`, or None
    when `ws` must be built in full."""
    if ws.errors or base.sources is None:
        return None
    leave_out, order, texts = base.sources
    if leave_out != ws.leave_out or order != [(shown, prelude) for _, _, shown, prelude in ws.sources]:
        return None
    changed = set()
    for shown, prelude in order:
        new, old = ws.texts.get(shown), texts.get(shown)
        if new is None or old is None:
            return None
        if new[0] != old[0]:
            if prelude or not (new[1] and old[1]):  # a prelude file, or a `defaults` or `fn` in it
                return None
            changed.add(shown)
    if not changed or [(b.name, b.kind) for b, _ in ws.blocks] != [(i.name, i.kind) for i in base.blocks.values()]:
        return None
    rebuilt = {b.name for b, _ in ws.blocks if b.span.path in changed}
    if any(base.blocks[name].kind in m.INSTANCED for name in rebuilt):  # every deployment runs an engine's rules
        return None
    dependents: dict = {}  # block -> the blocks that read it, or extend it
    for block, others in base.consulted.items():
        for other in others:
            dependents.setdefault(other, set()).add(block)
    for info in base.blocks.values():
        if info.block.extends:
            dependents.setdefault(info.block.extends, set()).add(info.name)
    todo = list(rebuilt)
    while todo:
        for block in dependents.get(todo.pop(), ()):
            if block not in rebuilt:
                rebuilt.add(block)
                todo.append(block)
    return rebuilt


def carry_over(program: Program, base: Program, rebuilt: set) -> None:
    """Give `program`, rebuilt from `base`, the plain values and `?` answers of the blocks it took from `base`.

    A value depends only on the cells it reads, all kept; an answer also on the
    requirements of the blocks that read its block, so it is kept only when
    none of those was rebuilt.
    """
    from .evaluate import plain_values

    if base.evaluated:
        before = base.evaluated[0]
        program.evaluated = plain_values(program, {key: before.get(key) for key in program.cells if key[0] not in rebuilt})
    if base.solved:
        program.kept_answers = {key: value for key, value in base.solved.items()
                                if not program.reading_blocks(key[0]) & rebuilt}
