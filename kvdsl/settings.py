"""`--set [block.]cell=value`: a setting parsed as kvspec, and the blocks it changes."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

from .errors import OPTION_PREFIX, SETTING_PREFIX, KvdslError, UsageError, did_you_mean, flatten
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


def settings_by_block(blocks: dict, settings: list) -> dict:
    """block -> {cell name: the Cell a setting gives it}, for every block each setting changes."""
    overrides: dict[str, dict[str, Cell]] = {}
    for setting in settings:
        for block in _targets(blocks, setting):
            overrides.setdefault(block, {})[setting.cell.name] = setting.cell
    return overrides


def literal_setting(setting: Setting) -> bool:
    """A number or flag for a block's own cell: `with_literals` can likely apply it to the plain program."""
    return setting.cell.form == "rule" and isinstance(setting.cell.expr, (Num, Bool)) and "." not in setting.cell.name


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
