"""Specs to a program: loaded, resolved with their `--set` settings, and the last few kept.

Settings that only change numbers or flags are applied to the program built
without them (`with_literals`), which costs far less than resolving the whole
workspace again.  The program without settings is also kept on disk
(`kvdsl/cache.py`) once the same files have been built twice, with its
plain evaluation and `?` answers, and read back while none of its files changed.
After a change, the program kept before for the same paths is where the new
one starts: only the blocks of the changed files, and those that read them,
are resolved again (`kvdsl/reuse.py`).
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from typing import Iterable, Optional

from . import cache
from .errors import KvdslError
from .graph import Program, build, merged_blocks, with_literals
from .loader import fingerprint_of, load
from .settings import Setting, literal_setting, settings_as_usage_errors, settings_by_block


# the programs built last, by what they were built from (most recent last),
# each with the cells it holds of its own; a Program is not changed once
# built, so one can be handed out again
_BUILT: "OrderedDict[tuple, tuple[Program, int]]" = OrderedDict()
BUILT_KEPT = 16
BUILT_CELLS_KEPT = 40_000  # about three catalogs, 90 MiB; the newest program is kept whatever its size


def build_program(paths: Iterable[str], settings: Iterable[Setting] = (), leave_out: tuple = ()) -> Program:
    """Load specs and resolve them, applying settings; raise every error found.

    The same files (same texts) with the same settings give the same program:
    the last few built (up to BUILT_KEPT programs and BUILT_CELLS_KEPT cells)
    are kept and handed out again.  Blocks of the kinds in `leave_out` are
    read from the given files only, not from those they import.
    """
    from .progress import stage

    settings, paths, leave_out = list(settings), [str(p) for p in paths], tuple(leave_out)
    question = json.dumps([os.getcwd(), paths, leave_out])
    fingerprint = _known_fingerprint(question)
    if fingerprint is not None and (fingerprint, ()) not in _BUILT:
        stored = _read_program(fingerprint)
        if stored is not None:
            _keep((fingerprint, ()), stored)
            _ON_DISK.add(fingerprint)
    workspace = base = None
    if fingerprint is None or (fingerprint, ()) not in _BUILT:
        stage("reading the specs")
        if fingerprint is None:  # a file changed: what is built from here on may start from what was built before
            base = _base_of(question)
        workspace = load(paths, leave_out, base.sources[2] if base is not None and base.sources else None)
        fingerprint = workspace.fingerprint
        _remember_where(question, workspace)
    key = (fingerprint, tuple((s.block, s.cell.source, s.cell.span.path) for s in settings))
    stage("resolving the blocks")
    if key not in _BUILT:
        _keep(key, _build(workspace, settings, fingerprint, lambda: load(paths, leave_out), base))
    _BUILT.move_to_end(key)
    if fingerprint in _ON_DISK:
        _remember_kept(question, fingerprint)
    return _BUILT[key][0]


def _keep(key: tuple, program: Program) -> None:
    """Keep a program; one made by `with_literals` shares all but its settings' cells with another."""
    _BUILT[key] = (program, program.own_cells if program.own_cells is not None else len(program.cells))
    _BUILT.move_to_end(key)
    while len(_BUILT) > 1 and (len(_BUILT) > BUILT_KEPT or sum(own for _, own in _BUILT.values()) > BUILT_CELLS_KEPT):
        _BUILT.popitem(last=False)


def forget_programs() -> None:
    """Drop the programs kept by `build_program` (their memory can then be reused), once those due are on disk."""
    store_pending()
    _BUILT.clear()
    _WHERE.clear()
    _READ.clear()


def _build(workspace, settings: list, fingerprint: str, reload, before=None) -> Program:
    """The program of `workspace` (loaded by `reload()` when None: its plain program is kept) with `settings`;
    `before`: a program of the same files before a change, for `program_of` to start from."""
    if not settings:
        return program_of(workspace, before)
    base = _BUILT.get((fingerprint, ()), (None,))[0]
    if base is None and workspace.errors:
        raise_workspace(workspace)
    if base is None and all(literal_setting(s) for s in settings):
        base = _plain_program(workspace, before)
    blocks = base.blocks if base is not None else merged_blocks(workspace)
    overrides = settings_by_block(blocks, settings)
    program = with_literals(base, overrides) if base is not None else None
    if program is not None:
        return program
    workspace = workspace or reload()
    with settings_as_usage_errors():
        return build(workspace, overrides)


def _plain_program(workspace, before=None) -> Optional[Program]:
    """The workspace's program without settings, built and kept, or None if it has errors.

    Settings that only change literals are applied to it (`with_literals`),
    which costs far less than resolving the whole workspace again.
    """
    try:
        return program_of(workspace, before)
    except KvdslError:  # settings may supply what the spec lacks
        return None


def program_of(workspace, base=None) -> Program:
    """The program of a loaded workspace without settings: kept in this process, read from disk, or built.

    A program is built from one built before (`base`, if given, else the last
    one built in this process) when only a few of its files changed
    (`kvdsl/reuse.py`).  A program built for the second time (the first
    leaves a mark on disk) is written to disk by `store_pending`, once the
    command is done with it.
    """
    key = (workspace.fingerprint, ())
    if key not in _BUILT:
        program = _read_program(workspace.fingerprint)
        if program is None:
            program = _rebuilt(workspace, base) or build(workspace)
            if cache.seen(workspace.fingerprint):
                if len(_PENDING) >= PENDING_KEPT:  # a library's caller may never say it is done
                    store_pending()
                _PENDING[workspace.fingerprint] = program
                _ON_DISK.add(workspace.fingerprint)
            else:
                cache.mark_seen(workspace.fingerprint)
        else:
            _ON_DISK.add(workspace.fingerprint)
        _keep(key, program)
    _BUILT.move_to_end(key)
    return _BUILT[key][0]


def _rebuilt(workspace, base: Optional[Program]) -> Optional[Program]:
    """The program of `workspace` built from `base` (or the last plain program built here), resolving only the
    blocks that changed and those that read them; None when it must be built in full."""
    from .graph import rebuild
    from .reuse import carry_over, rebuilt_blocks

    if base is None:
        base = next((p for (_, settings), (p, _) in reversed(_BUILT.items()) if not settings), None)
    blocks = rebuilt_blocks(workspace, base) if base is not None else None
    program = rebuild(workspace, base, blocks) if blocks is not None else None
    if program is not None:
        carry_over(program, base, blocks)
    return program


# ---- where a question's files are ---------------------------------------------------

# question (working directory, paths, kinds left out) -> the header of the files it loaded last
_WHERE: dict = {}


def _known_fingerprint(question: str) -> Optional[str]:
    """The fingerprint of the files `question` loaded last, if none of them changed since (read, not parsed)."""
    header = _WHERE.get(question) or cache.load_where(question)
    if header is None:
        return None
    _WHERE[question] = header
    if fingerprint_of(header["sources"], header["leave_out"]) != header["fingerprint"]:
        return None
    return header["fingerprint"]


def _remember_where(question: str, workspace) -> None:
    before = _WHERE.get(question) or {}
    header = {"fingerprint": workspace.fingerprint, "sources": workspace.sources, "leave_out": workspace.leave_out,
              "kept": before.get("kept")}
    if before != header:
        _WHERE[question] = header
        cache.store_where(question, header)


def _remember_kept(question: str, fingerprint: str) -> None:
    """The program of `question`'s files with this fingerprint is on disk: a later build after a change starts from it."""
    header = _WHERE.get(question)
    if header is not None and header.get("kept") != fingerprint:
        header = _WHERE[question] = dict(header, kept=fingerprint)
        cache.store_where(question, header)


def _base_of(question: str) -> Optional[Program]:
    """The program `question` last had on disk (the files may have changed since), or None."""
    kept = (_WHERE.get(question) or {}).get("kept")
    if kept is None:
        return None
    if (kept, ()) in _BUILT:
        return _BUILT[(kept, ())][0]
    return cache.load_program(kept)


# the fingerprints whose programs are on disk, or will be once the command is done (`_PENDING`)
_ON_DISK: set = set()


# fingerprint -> a program to write to disk once the command is done with it (its evaluation included)
_PENDING: dict = {}
PENDING_KEPT = 4


# fingerprint -> how many things a workbook derived of its program (`Program.derived`) when it was read from disk
_READ: dict = {}


def _read_program(fingerprint: str) -> Optional[Program]:
    program = cache.load_program(fingerprint)
    if program is not None:
        _READ[fingerprint] = len(program.derived)
    return program


def store_pending() -> None:
    """Write the programs built for the second time to disk, with what was computed of them (`evaluated`, `solved`,
    what a workbook `derived` of them), and write again those read back to which an export added some."""
    for fingerprint, held in _READ.items():
        program = _BUILT.get((fingerprint, ()), (None,))[0]
        if program is not None and len(program.derived) > held:
            _READ[fingerprint] = len(program.derived)
            _PENDING[fingerprint] = program
    while _PENDING:
        fingerprint, program = _PENDING.popitem()
        cache.store_program(fingerprint, program)


def raise_workspace(workspace) -> None:
    from .errors import raise_all

    raise_all(workspace.errors)
