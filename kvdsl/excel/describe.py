"""A cell's human label and one-sentence description, for headers and notes.

`kvdsl.labels.describe(cell) -> (label, description)` reads the
`## Label: One sentence.` comment above a prelude rule; where that module is
absent the same answer is made here from the cell's name and its comment.
"""

from __future__ import annotations

try:
    from ..labels import describe as _describe
except ImportError:  # an older checkout without labels
    _describe = None


def describe(cell) -> tuple[str, str]:
    """(label, description) of a spec cell (`kvdsl.model.Cell`)."""
    if _describe is not None:
        return _describe(cell)
    label = getattr(cell, "label", "") or _label_from_name(cell.name)
    description = getattr(cell, "description", "") or (cell.doc or "")
    return label, description


def has_own_label(cell) -> bool:
    """True when the spec gives the cell a label (not one made from its name)."""
    return bool(getattr(cell, "label", ""))


def _label_from_name(name: str) -> str:
    words = name.rsplit(".", 1)[-1].replace("_", " ").strip()
    return words[:1].upper() + words[1:] if words else name
