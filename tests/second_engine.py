"""A second spreadsheet engine for the tests: every formula of an exported workbook computed by the
`formulas` package (an independent implementation of Excel's formula semantics).

`formulas` parses each formula and computes it with its own implementation of
Excel's operators, functions, type coercions and error values.  Its workbook
model (`formulas.ExcelModel`) builds one dispatcher over every cell and name,
which takes it minutes on the catalog (the model's set-up, not the
arithmetic); so this module reads the workbook with openpyxl and walks the
references itself: each defined name and cell reference is resolved to the
cells it names (a range becomes a 2-D array, an empty cell `formulas`' empty
value), and each formula is computed by the function `formulas` compiles for
it.  Formulas of one shape (equal once their names and references are
numbered) are compiled once.

    book = SecondEngine(path)          # or an openpyxl workbook, formulas not values
    book.named("qwen3_8b.kv_bytes_per_sequence")
    book.set("'Plan'!B21", 65536)      # type a value; what depends on it is computed again
"""

from __future__ import annotations

import re

# a string literal, a sheet-qualified reference, a cell reference or range, or a name (not a function)
_TOKEN = re.compile(r"""
    (?P<string>"(?:[^"]|"")*")
  | (?P<ref>(?:'(?:[^']|'')+'|[A-Za-z_][A-Za-z0-9_.]*)!\$?[A-Za-z]{1,3}\$?\d+(?::\$?[A-Za-z]{1,3}\$?\d+)?)
  | (?<![A-Za-z0-9_.$\\])(?P<cell>\$?[A-Za-z]{1,3}\$?\d+(?::\$?[A-Za-z]{1,3}\$?\d+)?)(?![A-Za-z0-9_.(])
  | (?<![A-Za-z0-9_.$\\])(?P<name>[A-Za-z_\\][A-Za-z0-9_.]*)(?![A-Za-z0-9_.(!])
""", re.X)
_CELL = re.compile(r"^([A-Z]{1,3})(\d+)$")


def _shape(formula: str) -> tuple:
    """(the formula with each name or reference replaced by `_Pn_`, the names and references in order)."""
    tokens: list = []

    def number(match):
        if match.group("string"):
            return match.group(0)
        text = match.group(0)
        if match.group("name") and text.upper() in ("TRUE", "FALSE"):
            return text
        if text not in tokens:
            tokens.append(text)
        return f"_P{tokens.index(text)}_"

    return _TOKEN.sub(number, formula), tokens


def _split(ref: str, sheet: str) -> tuple:
    """(SHEET, 'A1' or 'A1:B2') of a reference written on `sheet`, upper-cased, without `$`."""
    if "!" in ref:
        sheet, ref = ref.rsplit("!", 1)
        sheet = sheet.strip("'").replace("''", "'")
    return sheet.upper(), ref.replace("$", "").upper()


def _cells(ref: str) -> list:
    """The rows of cell coordinates of 'A1' or 'A1:B2'."""
    from openpyxl.utils import column_index_from_string, get_column_letter

    first, _, last = ref.partition(":")
    (c1, r1), (c2, r2) = (_CELL.match(x).groups() for x in (first, last or first))
    cols = range(column_index_from_string(c1), column_index_from_string(c2) + 1)
    return [[f"{get_column_letter(c)}{r}" for c in cols] for r in range(int(r1), int(r2) + 1)]


class SecondEngine:
    """The values of an xlsx workbook's cells as the `formulas` package computes them."""

    _compiled: dict = {}  # shape -> compiled function, shared by every workbook

    def __init__(self, source):
        import openpyxl

        wb = source if hasattr(source, "worksheets") else openpyxl.load_workbook(source)
        self.cells: dict = {}
        for ws in wb.worksheets:
            sheet = ws.title.upper()
            for row in ws.iter_rows():
                for c in row:
                    if c.value is not None:
                        self.cells[(sheet, c.coordinate)] = c.value
        self.names = {}
        for name, defined in wb.defined_names.items():
            (sheet, ref), = defined.destinations
            self.names[name.upper()] = _split(f"'{sheet}'!{ref}", "")
        self.values: dict = {}
        self.dependents: dict = {}  # (sheet, cell) -> cells whose formula reads it
        self.compiled = 0

    # ---- reading -------------------------------------------------------------

    def named(self, name: str):
        """The value of the one cell the defined name `name` points at (Excel's name rule applied)."""
        from kvdsl.excel.names import excel_name

        sheet, ref = self.names[excel_name(name).upper()]
        return self.value(sheet, ref)

    def value(self, sheet: str, coordinate: str):
        """A cell's value: a number, text, True/False, an error's text (`#N/A`) or None when empty."""
        key = (sheet.upper(), coordinate.replace("$", "").upper())
        if key not in self.values:
            self._compute(key)
        return _plain(self.values[key])

    def set(self, reference: str, value) -> None:
        """Type `value` into the cell `'Sheet'!A1`; the cells that depend on it are computed again."""
        key = _split(reference, "")
        self.cells[key] = value
        stale, todo = set(), [key]
        while todo:
            cell = todo.pop()
            if cell in stale:
                continue
            stale.add(cell)
            todo.extend(self.dependents.get(cell, ()))
        for cell in stale:
            self.values.pop(cell, None)

    def formula_cells(self) -> list:
        """The keys (SHEET, 'A1') of every formula cell."""
        return [key for key, content in self.cells.items() if isinstance(content, str) and content.startswith("=")]

    def compute_all(self) -> dict:
        """Every formula cell computed: {(SHEET, 'A1'): value as `value` gives it}."""
        return {key: self.value(*key) for key in self.formula_cells()}

    def seed(self, computed: dict) -> None:
        """Take the values `compute_all` gave for this workbook (errors as their text) instead of computing them."""
        from formulas.tokens.operand import XlError

        errors = {str(e): e for e in _errors()}
        for key in self.formula_cells():
            value = computed[key]
            self.values[key] = errors[value] if isinstance(value, str) and value in errors else _constant(value)
            self._note_reads(key, self._reads(key)[1])
        assert all(not isinstance(v, XlError) or str(v) in errors for v in self.values.values())

    # ---- computing -------------------------------------------------------------

    def _reads(self, key) -> tuple:
        """(the formula's shape, {placeholder: the cell it reads, or rows of cells for a range})."""
        shape, tokens = _shape(self.cells[key])
        reads = {}
        for i, token in enumerate(tokens):
            target = self.names.get(token.upper()) or _split(token, key[0])
            rows = [[(target[0], c) for c in row] for row in _cells(target[1])]
            reads[f"_P{i}_".upper()] = rows if ":" in target[1] else rows[0][0]
        return shape, reads

    def _note_reads(self, key, reads: dict) -> None:
        for read in reads.values():
            for cell in _flat(read):
                self.dependents.setdefault(cell, set()).add(key)

    def _function(self, shape: str):
        import formulas

        function = self._compiled.get(shape)
        if function is None:
            function = self._compiled[shape] = formulas.Parser().ast(shape)[1].compile()
            self.compiled += 1
        return function

    def _compute(self, start) -> None:
        """Compute `start` and every cell it needs, without recursion (chains run thousands of cells deep)."""
        stack = [start]
        pending: dict = {}
        while stack:
            key = stack[-1]
            if key in self.values:
                stack.pop()
                continue
            content = self.cells.get(key)
            if not (isinstance(content, str) and content.startswith("=")):
                self.values[key] = _constant(content)
                stack.pop()
                continue
            if key not in pending:
                shape, reads = self._reads(key)
                self._note_reads(key, reads)
                function = self._function(shape)
                pending[key] = function, [reads[name] for name in function.inputs]
            function, reads = pending[key]
            missing = [c for read in reads for c in _flat(read) if c not in self.values]
            if missing:
                if any(c in pending for c in missing):
                    raise ValueError(f"circular reference at {key}")
                stack.extend(missing)
                continue
            args = [self.values[r] if isinstance(r, tuple) else _array([[self.values[c] for c in row] for row in r])
                    for r in reads]
            self.values[key] = _scalar(function(*args))
            del pending[key]
            stack.pop()


def _flat(read) -> list:
    """The cells a read covers: one cell, or every cell of a range's rows."""
    return [read] if isinstance(read, tuple) else [c for row in read for c in row]


def _errors() -> list:
    """The error values `formulas` knows (`#N/A`, `#DIV/0!`, ...)."""
    from formulas.tokens.operand import Error

    return list(Error.errors.values())


def _constant(content):
    """A typed cell as `formulas` reads it: empty, a number, text or a boolean."""
    import schedula as sh

    if content is None:
        return sh.EMPTY
    return content


def _array(rows):
    import numpy as np

    out = np.empty((len(rows), len(rows[0])), dtype=object)
    for i, row in enumerate(rows):
        out[i, :] = row
    return out


def _scalar(result):
    """A formula's result as one value (`formulas` gives 0-d or 1x1 arrays)."""
    import numpy as np

    while isinstance(result, np.ndarray):
        result = result.item() if result.size == 1 else result.ravel()[0]
    if isinstance(result, np.generic):
        result = result.item()
    return result


def _plain(value):
    """A value as openpyxl reads a recalculated cell: errors as their text, empty as None."""
    import schedula as sh
    from formulas.tokens.operand import XlError

    if value is sh.EMPTY:
        return None
    if isinstance(value, XlError):
        return str(value)
    return value


def shared_catalog_values(tmp_path_factory) -> tuple:
    """(the catalog workbook's path, every formula cell of it computed by `formulas`), once per test run and
    shared by every module and worker (the first computes, the others wait and read its file)."""
    import fcntl
    import pickle

    from workbook_helpers import shared_catalog_export

    result, path = shared_catalog_export(tmp_path_factory)
    assert result.exit_code == 0, result.output
    stored = path.parent.parent / "second-engine.pickle"
    with open(path.parent.parent / "second-engine.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stored.exists():
            computed = SecondEngine(path).compute_all()
            stored.write_bytes(pickle.dumps(computed))
    return path, pickle.loads(stored.read_bytes())
