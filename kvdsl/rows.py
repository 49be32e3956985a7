"""Many deployments that differ only in what they are set to, evaluated at once as NumPy arrays.

A template block reads its model, GPU and formats through stand-in blocks
(`model = rows__model`); each row puts a real block in a stand-in's place
(every cell of the stand-in takes that block's value) and sets any other cell
it names.  The cells the outputs read that depend on what the rows set are
evaluated once, over every row together (`vector_value`); every other cell
keeps its exact value.  `benchmarks/calibrate.py` computes every published
measurement of `benchmarks/data/` this way, in one program.
"""

from __future__ import annotations

from fractions import Fraction

from .program import Program


class Rows:
    """The `outputs` of `block` over rows that set `varied` cells (keys) and put blocks in the stand-ins' places.

    `stand_ins` maps a reference cell of `block` (`model`) to the stand-in block it names.
    """

    def __init__(self, program: Program, base: dict, block: str, outputs, varied, stand_ins: dict):
        from .search import ancestors, depends_on

        self.program, self.base, self.block = program, base, block
        self.stand_ins = dict(stand_ins)
        varied = set(varied) | {(block, cell) for cell in stand_ins}
        for stand_in in self.stand_ins.values():
            varied |= {(stand_in, cell) for cell in program.blocks[stand_in].cells}
        self.varied = varied
        affected = set().union(*(depends_on(program, key) for key in varied))
        self.outputs = [(block, cell) if isinstance(cell, str) else cell for cell in outputs]
        wanted = ancestors(program, self.outputs, affected)
        self.order = [k for k in program.in_order(wanted) if k not in varied and program.cells[k].form in ("rule", "input")]

    def columns(self, rows: list) -> dict:
        """(block, cell) -> a NumPy array over the rows: what each row sets, its blocks' cells in the stand-ins'."""
        import numpy as np

        columns: dict = {}
        for i, row in enumerate(rows):
            for key, value in self._settings(row).items():
                columns.setdefault(key, [None] * len(rows))[i] = value
        out = {}
        for key, column in columns.items():
            known = [v for v in column if v is not None]
            if known and all(isinstance(v, bool) for v in known):
                out[key] = np.asarray([bool(v) for v in column], dtype=bool)
            elif known and all(isinstance(v, str) for v in known):
                out[key] = np.asarray(column, dtype=object)
            else:
                out[key] = np.asarray([float(v) if isinstance(v, (int, float, Fraction)) and not isinstance(v, bool)
                                       else np.nan for v in column])
        return out

    def _settings(self, row: dict) -> dict:
        values = {}
        for cell, stand_in in self.stand_ins.items():
            real = row.get(cell)
            if real is None:
                continue
            values[(self.block, cell)] = real
            for name in self.program.blocks[stand_in].cells:
                if (real, name) in self.base:
                    values[(stand_in, name)] = self.base[(real, name)]
        for key, value in row.items():
            if key in self.stand_ins:
                continue
            values[(self.block, key) if isinstance(key, str) else key] = value
        return values

    def evaluate(self, columns: dict) -> dict:
        """Every output over the rows: (block, cell) -> an array (or the exact value where nothing varies)."""
        import numpy as np

        from .vector import vector_value

        values = dict(self.base)
        values.update(columns)
        with np.errstate(all="ignore"):
            for key in self.order:
                values[key] = vector_value(self.program.cells[key].expr, values)
        return {key: values[key] for key in self.outputs}
