"""What the workbook's sheets share: the sheet names, the What-if contexts, columns and text cells."""

from __future__ import annotations

from .formula import XML_UNSAFE

SHEETS = {"deployment": "Deployments", "model": "Models", "hardware": "Hardware", "workload": "Workloads",
          "format": "Formats", "engine": "Engines"}
WHAT_IF_CONTEXTS = [1024 * 2**i for i in range(0, 9)]  # 1K .. 256K


def column_letter(index: int) -> str:
    """The letters of a column counted from 1: 1 -> A, 28 -> AB."""
    from openpyxl.utils import get_column_letter

    return get_column_letter(index)


def text_cell(cell, text: str):
    """Store text as text, even when it starts with =, +, - or @ (control characters become U+FFFD)."""
    if isinstance(text, str):
        text = XML_UNSAFE.sub("\ufffd", text)
    cell.value = text
    if isinstance(text, str) and text:
        cell.data_type = "s"
    return cell
