"""`--set [block.]cell=value`: a setting parsed as kvspec, and the blocks it changes."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

from .errors import OPTION_PREFIX, SETTING_PREFIX, KvdslError, Span, UsageError, did_you_mean, flatten, remember_source
from .model import Bool, Cell, Num


@dataclass(frozen=True)
class Setting:
    """One `--set [block.]cell=value`."""

    block: Optional[str]
    cell: Cell
    block_span: Optional[Span] = None  # where the block's name is in the text typed


def parse_setting(text: str, option: Optional[str] = None) -> Setting:
    """`context=32K` or `chat.gpus=8` -> a Setting whose cell is parsed as kvspec.

    `option` names the option that stands for this setting (`--context`), so
    that its errors name the option as typed, not `--set`.  Errors quote the
    text as typed (`--set chat.gpus = x`, `--context 32 KK`), with the caret
    under its own characters: the text parsed is laid out to the same columns.
    """
    from .parser import parse_cell

    target, sep, value = text.partition("=")
    target = target.strip()
    if not sep or not target or not value.strip():
        where = (option + " " + value) if option else SETTING_PREFIX + text
        remember_source(where, where if option else text)
        raise UsageError(f"--set needs NAME=VALUE, not `{text}`", Span(where, 1, 1, 1, len(text) + 1),
                         hint="e.g. --set context=32K or --set chat.gpus=8")
    block, _, name = target.partition(".") if "." in target else ("", "", target)
    if option:
        where = shown = f"{option} {value.strip()}"
        head = " " * (len(option) - len(name)) + name  # the cell's name under the option's
        parsed = head + "=" + value.strip() if len(head) <= len(option) else f"{name} = {value.strip()}"
        if len(head) > len(option):
            shown = parsed
    else:
        where, shown = SETTING_PREFIX + text, text
        at = text.index(target)
        parsed = text[:at] + " " * (len(block) + 1 if block else 0) + text[at + (len(block) + 1 if block else 0):]
    block_span = Span(where, 1, text.index(target) + 1, 1, text.index(target) + 1 + len(block)) if block and not option else None
    try:
        cell = parse_cell(parsed, where)
    except KvdslError as err:
        raise UsageError(err.message, err.span, err.hint) from None
    finally:
        remember_source(where, shown)
    return Setting(block or None, cell, block_span)


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
            raise UsageError(f"no block named `{setting.block}`", setting.block_span, hint=did_you_mean(setting.block, blocks))
        if name not in _settable(info):
            raise UsageError(f"{info.kind} `{setting.block}` has no cell `{name}`", setting.cell.name_span,
                             hint=did_you_mean(name, _settable(info)))
        return [setting.block]
    found = [b for b, info in blocks.items() if name in _settable(info)]
    if setting.cell.form == "unknown":  # `NAME=?` means: solve it where there is something to solve against
        found = [b for b in found if "fits" in blocks[b].cells]
    if not found:
        every = {c for info in blocks.values() for c in _settable(info)}
        raise UsageError(f"no block has a cell `{name}`", setting.cell.name_span, hint=did_you_mean(name, every))
    return found


def _settable(info) -> list:
    """The cells `--set` may change in a block: an engine's are its rules."""
    return list(info.template) if info.template is not None else info.cells
