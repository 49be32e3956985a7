"""`kvdsl sweep`: a grid of what-ifs, compiled once to vectorized NumPy.

Every result cell is expanded into the varied inputs (everything else
substituted by its value) and `sympy.lambdify`-ed once; the grid is then
evaluated in chunks of whole arrays.  Nothing is solved per point.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .errors import UsageError
from .graph import Key, Program

CHUNK = 250_000
MAX_POINTS = 10_000_000  # the grid is held in memory: about 8 bytes x columns x points


@dataclass(frozen=True)
class Axis:
    name: str
    values: object  # a NumPy array of floats, in base units


def parse_bound(name: str, text: str):
    """One bound or step of a range, as kvspec (`32K`, `80 GiB`, `0.5`), in base units."""
    from .api import parse_setting

    try:
        cell = parse_setting(f"{name}={text}").cell
    except UsageError:
        cell = None
    if cell is None or cell.form != "rule" or not hasattr(cell.expr, "value"):
        raise UsageError(f"--vary {name}: `{text}` is not a number", hint="e.g. --vary context=1K:128K:x2")
    return cell.expr.value


def parse_range(text: str, parse_value=parse_bound) -> Axis:
    """`context=1K:128K:x2` or `batch=1:64` or `batch=1:64:4` -> an Axis.

    STOP is included when the steps land on it.  `parse_value(name, text)`
    turns one bound into a Fraction in base units.
    """
    name, sep, spec = text.partition("=")
    parts = spec.split(":")
    if not sep or len(parts) not in (2, 3) or not name.strip():
        raise UsageError(f"--vary needs NAME=START:STOP[:STEP] or NAME=START:STOP:xFACTOR, not `{text}`")
    name = name.strip()
    start, stop = parse_value(name, parts[0]), parse_value(name, parts[1])
    step_text = parts[2].strip() if len(parts) == 3 else "1"
    import numpy as np

    values = []
    if re.fullmatch(r"x\d+(\.\d+)?", step_text):
        factor = float(step_text[1:])
        if factor <= 1 or start <= 0:
            raise UsageError(f"--vary {name}: a factor must exceed 1 and START must be positive")
        count = int(math.floor(math.log(float(stop) / float(start)) / math.log(factor) + 1e-9)) + 1 if stop >= start else 0
        if count > MAX_POINTS:
            raise UsageError(f"--vary {name}: {count:,} values is too many (at most {MAX_POINTS:,})")
        values = float(start) * factor ** np.arange(max(count, 0), dtype=float)
    else:
        if not step_text:
            raise UsageError(f"--vary {name}: STEP is empty", hint="NAME=START:STOP[:STEP] or NAME=START:STOP:xFACTOR")
        step = parse_value(name, step_text)
        if step <= 0:
            raise UsageError(f"--vary {name}: STEP must be positive")
        count = int((stop - start) / step) + 1
        if count > MAX_POINTS:
            raise UsageError(f"--vary {name}: {count:,} values is too many")
        values = np.arange(max(count, 0), dtype=float) * float(step) + float(start)
    values = np.asarray(values, dtype=float)
    if not values.size:
        raise UsageError(f"--vary {name}: the range is empty")
    return Axis(name, values)


def prepare(program: Program, block: str, texts: list) -> "CompiledSweep":
    """Check the `--vary` ranges against the block and compile the sweep."""
    from .evaluate import evaluate
    from .search import find_key
    from .units import Dim

    axes = [parse_range(text) for text in texts]
    names = [a.name for a in axes]
    if len(set(names)) != len(names):
        raise UsageError(f"--vary names `{next(n for n in names if names.count(n) > 1)}` twice")
    for axis in axes:
        rc = program.cells[find_key(program, block, axis.name)]
        if rc.form not in ("input", "rule") or not isinstance(rc.dim, Dim):
            raise UsageError(f"--vary {axis.name}: only a number can vary, and `{axis.name}` is not one")
    unknown = [n for n in program.blocks[block].cells if program.cells[(block, n)].form == "unknown" and n not in names]
    if unknown:
        raise UsageError(f"block `{block}` has `{unknown[0]} = ?`: give it a value to sweep", hint=f"--set {unknown[0]}=...")
    total = math.prod(a.values.size for a in axes)
    if total > MAX_POINTS:
        raise UsageError(f"the grid has {total:,} points, more than {MAX_POINTS:,}")
    return CompiledSweep(program, block, axes, evaluate(program))


class CompiledSweep:
    """Result cells of one block as NumPy functions of the varied cells."""

    def __init__(self, program: Program, block: str, axes: list, values: dict):
        import sympy as sp

        from .search import depends_on
        from .symbolic import Expander, to_rational

        self.block = block
        self.axes = axes
        self.keys = [self._key(program, block, a.name) for a in axes]
        affected = set().union(*(depends_on(program, k) for k in self.keys))
        self.results = [
            name for name in program.blocks[block].cells
            if (block, name) in affected and (block, name) not in self.keys
            and program.cells[(block, name)].form == "rule"
        ]
        symbols = [sp.Symbol(f"v{i}") for i in range(len(axes))]
        expander = Expander(program, stop=lambda key: key not in affected, rename=dict(zip(self.keys, symbols)))
        exprs = [expander.expand((block, name)) for name in self.results]
        env = {s: to_rational(values[k]) for s, k in expander.symbols.items() if values.get(k) is not None}
        exprs = [e.subs(env) for e in exprs]
        self.functions = [sp.lambdify(symbols, e, modules="numpy") for e in exprs]
        self.bools = [program.cells[(block, n)].dim == "bool" for n in self.results]

    @staticmethod
    def _key(program: Program, block: str, name: str) -> Key:
        from .search import find_key

        return find_key(program, block, name)

    def size(self) -> int:
        total = 1
        for axis in self.axes:
            total *= len(axis.values)
        return total

    def grid(self):
        import numpy as np

        arrays = [a.values for a in self.axes]
        mesh = np.meshgrid(*arrays, indexing="ij")
        return [g.ravel() for g in mesh]

    def run(self, progress=None):
        """(inputs, results): lists of NumPy arrays over the whole grid."""
        import numpy as np

        inputs = self.grid()
        n = inputs[0].size
        results = [np.empty(n, dtype=bool if b else float) for b in self.bools]
        with np.errstate(all="ignore"):  # a point that divides by zero gives inf or nan, not a warning
            for start in range(0, n, CHUNK):
                part = [x[start : start + CHUNK] for x in inputs]
                for out, fn in zip(results, self.functions):
                    value = fn(*part)
                    out[start : start + CHUNK] = np.broadcast_to(value, part[0].shape)
                if progress is not None:
                    progress(min(CHUNK, n - start))
        return inputs, results


def write_csv(stream, sweep: CompiledSweep, inputs, results) -> None:
    """Rows of the grid: varied names, then every result cell."""
    import numpy as np

    header = [a.name for a in sweep.axes] + sweep.results
    stream.write(",".join(header) + "\n")
    columns = inputs + [r.astype(int) if r.dtype == bool else r for r in results]
    table = np.column_stack(columns)
    np.savetxt(stream, table, delimiter=",", fmt="%.15g")
