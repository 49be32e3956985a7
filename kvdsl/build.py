"""Specs to a program: loaded, resolved with their `--set` settings, and the last few kept.

Settings that only change numbers or flags are applied to the program built
without them (`with_literals`), which costs far less than resolving the whole
workspace again.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterable, Optional

from .errors import KvdslError
from .graph import Program, build, merged_blocks, with_literals
from .loader import load
from .settings import Setting, literal_setting, settings_as_usage_errors, settings_by_block


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
    from .progress import stage

    settings = list(settings)
    stage("reading the specs")
    workspace = load(list(paths))
    stage(f"resolving {len(workspace.blocks):,} blocks")
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
    if base is None and all(literal_setting(s) for s in settings):
        base = _plain_program(workspace)
    blocks = base.blocks if base is not None else merged_blocks(workspace)
    overrides = settings_by_block(blocks, settings)
    program = with_literals(base, overrides) if base is not None else None
    if program is not None:
        return program
    with settings_as_usage_errors():
        return build(workspace, overrides)


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


def raise_workspace(workspace) -> None:
    from .errors import raise_all

    raise_all(workspace.errors)
