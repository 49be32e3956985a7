"""`kvdsl sweep`: a grid of what-ifs, evaluated as whole NumPy arrays.

The exact rules of the cells that depend on a varied cell are evaluated
vectorized, in chunks of the grid; every other cell keeps its exact value.
Nothing is compiled symbolically and nothing is solved per point, so every
axis costs the same whatever its rules branch on.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .errors import UsageError
from .graph import Key, Program
from .vector import VectorEvaluator, _floats

CHUNK = 65_536  # points per pass: every affected cell holds an array this long
MAX_POINTS = 10_000_000  # points in one grid (its CSV is written one chunk at a time)


@dataclass(frozen=True)
class Axis:
    name: str
    values: object  # a NumPy array of floats, in base units


def parse_bound(name: str, text: str):
    """One bound or step of a range, as kvspec (`32K`, `80 GiB`, `0.5`), in base units."""
    from .settings import parse_setting

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
    if sep and name.strip() and len(parts) == 1 and spec.strip():  # `gpus=1,2,4,8`: the values listed
        import numpy as np

        values = [parse_value(name.strip(), item) for item in spec.split(",")]
        return Axis(name.strip(), np.asarray([float(v) for v in values], dtype=float))
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


def prepare(program: Program, block: str, texts: list, also: tuple = ()) -> "CompiledSweep":
    """Check the `--vary` ranges against the block and compile the sweep.

    `also`: the cells set to one of a listed axis's values (a format, a block,
    a flag) in this program: the cells that depend on them are results too.
    """
    from .evaluate import evaluate
    from .search import find_key
    from .units import Dim

    axes = [parse_range(text) for text in texts]
    names = [a.name for a in axes]
    if len(set(names)) != len(names):
        raise UsageError(f"--vary names `{next(n for n in names if names.count(n) > 1)}` twice")
    for axis in axes:
        rc = program.cells[find_key(program, block, axis.name)]
        if rc.form not in ("input", "rule", "unknown") or not isinstance(rc.dim, Dim):
            raise UsageError(f"--vary {axis.name}: only a number can vary over a range, and `{axis.name}` is not one",
                             hint=f"list its values instead: --vary {axis.name}=A,B,...")
    unknown = [n for n in program.blocks[block].cells if program.cells[(block, n)].form == "unknown" and n not in names]
    if unknown:
        raise UsageError(f"block `{block}` has `{unknown[0]} = ?`: give it a value to sweep", hint=f"--set {unknown[0]}=...")
    total = math.prod(a.values.size for a in axes)
    if total > MAX_POINTS:
        raise UsageError(f"the grid has {total:,} points, more than {MAX_POINTS:,}")
    return CompiledSweep(program, block, axes, evaluate(program), also)


def prepare_sweep(paths: list, settings: list, block, texts: list):
    """The sweep `kvdsl sweep` runs: the block chosen, ranges and lists of numbers vectorized, and a
    list of anything else (formats, blocks, true/false: `kv_dtype=fp16,fp8`) as one program per value,
    whose rows come one value after another (listed axes vary slowest, before the numbers)."""
    import itertools

    from .api import Setting, build_program, choose_block

    program = build_program(paths, settings)
    block = choose_block(program, texts[0].partition("=")[0].strip(), block)
    listed, numeric = [], []
    for text in texts:
        name, sep, spec = text.partition("=")
        items = [item.strip() for item in spec.split(",")] if sep and ":" not in spec else []
        if items and not all(_numeric_text(name.strip(), item) for item in items):
            listed.append((name.strip(), [_listed_cell(text, i) for i in range(len(items))]))
        else:
            numeric.append(text)
    if not listed:
        return prepare(program, block, numeric)
    names = [name for name, _ in listed]
    if len(set(names)) != len(names):
        raise UsageError(f"--vary names `{next(n for n in names if names.count(n) > 1)}` twice")
    parts = []
    for combination in itertools.product(*(cells for _, cells in listed)):
        extra = [Setting(block, cell) for cell in combination]
        compiled = prepare(build_program(paths, list(settings) + extra), block, numeric, also=tuple(names))
        if parts:
            compiled.choose(parts[0][1].results)
        written = [cell.source.split("=", 1)[1].strip() for cell in combination]
        parts.append(([{"true": True, "false": False}.get(item, item) for item in written], compiled))
    return ListedSweep([Axis(name, None) for name in names], parts)


def _listed_cell(text: str, index: int):
    """Item `index` of `--vary NAME=A,B,...` as the cell it sets, its errors quoting the option as typed."""
    from .errors import KvdslError, remember_source
    from .parser import parse_cell

    shown = f"--vary {text}"
    name, _, spec = text.partition("=")
    items = spec.split(",")
    offset = len("--vary ") + len(name) + 1 + sum(len(i) + 1 for i in items[:index])
    parsed = " " * (len("--vary ") + len(name) - len(name.lstrip())) + name.strip() + "="
    parsed += " " * (offset - len(parsed)) + items[index]
    try:
        return parse_cell(parsed, shown)
    except KvdslError as err:
        raise UsageError(err.message, err.span, err.hint) from None
    finally:
        remember_source(shown, shown)


def _numeric_text(name: str, item: str) -> bool:
    try:
        parse_bound(name, item)
    except UsageError:
        return False
    return True


class ListedSweep:
    """A sweep over listed values that are not numbers: one CompiledSweep per combination, in turn.

    It answers as a CompiledSweep does; its listed columns come first, and
    hold the values as written (`fp8`, `true`).
    """

    def __init__(self, listed: list, parts: list):
        self.listed, self.parts = listed, parts
        first = parts[0][1]
        self.block, self.axes, self.results = first.block, listed + first.axes, first.results

    def size(self) -> int:
        return sum(compiled.size() for _, compiled in self.parts)

    def choose(self, cells: list) -> None:
        for _, compiled in self.parts:
            compiled.choose(cells)
        self.results = list(cells)

    def chunks(self, progress=None, chunk: int = CHUNK):
        import numpy as np

        for values, compiled in self.parts:
            for inputs, results in compiled.chunks(progress, chunk):
                size = results[0].size if results else (inputs[0].size if inputs else 1)
                yield [np.full(size, value, dtype=object) for value in values] + inputs, results

    def run(self, progress=None):
        import numpy as np

        parts = list(self.chunks(progress))
        inputs = [np.concatenate([p[0][i] for p in parts]) for i in range(len(self.axes))]
        results = [np.concatenate([p[1][i] for p in parts]) for i in range(len(self.results))]
        return inputs, results


class CompiledSweep:
    """Result cells of one block, evaluated over the grid as NumPy arrays.

    The exact rules are evaluated vectorized, cell by cell in dependency
    order: only the cells that depend on a varied cell are computed per
    point; every other value stays the exact number `eval` gives.  A
    division by zero at a point gives inf or nan there, as NumPy does.
    """

    def __init__(self, program: Program, block: str, axes: list, values: dict, also: tuple = ()):
        from .search import depends_on

        self.block = block
        self.axes = axes
        self.keys = [self._key(program, block, a.name) for a in axes]
        affected = set().union(*(depends_on(program, k) for k in self.keys + [self._key(program, block, n) for n in also]))
        self.results = [
            name for name in program.blocks[block].cells
            if (block, name) in affected and (block, name) not in self.keys
            and program.cells[(block, name)].form == "rule" and _is_number(program.cells[(block, name)].dim)
        ]
        self.program = program
        self.values = values
        self.order = [k for k in program.in_order(affected) if k not in self.keys
                      and program.cells[k].form in ("input", "rule")]
        self.bools = [program.cells[(block, n)].dim == "bool" for n in self.results]

    def choose(self, cells: list) -> None:
        """Keep only the result columns `cells` (`--cells`), in that order."""
        from .errors import did_you_mean

        for name in cells:
            if name not in self.results:
                why = ("it does not depend on " + ", ".join(a.name for a in self.axes)
                       if name in self.program.blocks[self.block].cells else f"`{self.block}` has no such cell")
                hint = did_you_mean(name, self.results) or "the columns: " + ", ".join(self.results)
                raise UsageError(f"--cells: `{name}` is not a result of this sweep: {why}", hint=hint)
        self.bools = [self.bools[self.results.index(n)] for n in cells]
        self.results = list(cells)

    @staticmethod
    def _key(program: Program, block: str, name: str) -> Key:
        from .search import find_key

        return find_key(program, block, name)

    def size(self) -> int:
        total = 1
        for axis in self.axes:
            total *= len(axis.values)
        return total

    def grid(self, start: int = 0, stop=None):
        """The varied values at points start..stop of the grid (row-major, the last axis fastest)."""
        import numpy as np

        stop = self.size() if stop is None else stop
        if not self.axes:  # only listed values vary: one point
            import numpy as np

            return [np.zeros(stop - start)]
        shape = [len(a.values) for a in self.axes]
        indices = np.unravel_index(np.arange(start, stop), shape)
        return [axis.values[i] for axis, i in zip(self.axes, indices)]

    def evaluate(self, part: list) -> dict:
        """Values of every cell at the points `part` (one array per varied cell)."""
        values = dict(self.values)
        values.update(zip(self.keys, part))  # (with no axis, the one point's zero stands for nothing)
        visit = VectorEvaluator(values).visit
        for key in self.order:
            values[key] = visit(self.program.cells[key].expr)
        return values

    def chunks(self, progress=None, chunk: int = CHUNK):
        """(inputs, results) for each run of `chunk` points in turn: lists of NumPy arrays.

        Only one chunk is held at a time, so memory stays bounded however
        large the grid.
        """
        import numpy as np

        n = self.size()
        for start in range(0, n, chunk):
            part = self.grid(start, min(n, start + chunk))
            with np.errstate(all="ignore"):  # a point that divides by zero gives inf or nan, not a warning
                values = self.evaluate(part)
                results = [np.broadcast_to(_floats(values[(self.block, name)]), part[0].shape).astype(bool if b else float)
                           for name, b in zip(self.results, self.bools)]
            if progress is not None:
                progress(part[0].size)
            yield part, results

    def run(self, progress=None):
        """(inputs, results): lists of NumPy arrays over the whole grid."""
        import numpy as np

        parts = list(self.chunks(progress))
        inputs = [np.concatenate([p[0][i] for p in parts]) for i in range(len(self.axes))]
        results = [np.concatenate([p[1][i] for p in parts]) for i in range(len(self.results))]
        return inputs, results


def _is_number(dim) -> bool:
    from .units import Dim

    return dim == "bool" or isinstance(dim, Dim)


NOT_FINITE = re.compile(r"(?<![^,\n])(?:-?inf|nan)(?![^,\n])")
CSV_ROWS = 65_536  # rows formatted per pass


def write_csv(stream, sweep: CompiledSweep, inputs, results) -> None:
    """Rows of the grid: varied names, then every result cell.

    A value that is not a finite number (an unbounded answer, say the longest
    context when nothing grows with it, or a division by zero) is an empty field.
    """
    write_csv_chunks(stream, sweep, [(inputs, results)])


def write_csv_chunks(stream, sweep: CompiledSweep, chunks) -> None:
    """`write_csv` for (inputs, results) pairs that come one chunk at a time (`CompiledSweep.chunks`)."""
    import io

    import numpy as np

    header = [a.name for a in sweep.axes] + sweep.results
    stream.write(",".join(header) + "\n")
    for inputs, results in chunks:
        listed = [c for c in inputs if c.dtype == object]  # the same listed values on every row of a chunk
        prefix = "".join(_listed_text(c[0]) + "," for c in listed)
        columns = [c for c in inputs if c.dtype != object] + [r.astype(int) if r.dtype == bool else r for r in results]
        if not columns:
            stream.write(prefix[:-1] + "\n")
            continue
        table = np.column_stack(columns)
        for start in range(0, len(table), CSV_ROWS):
            rows = table[start : start + CSV_ROWS]
            if np.isfinite(rows).all() and not prefix:
                np.savetxt(stream, rows, delimiter=",", fmt="%.15g")
                continue
            text = io.StringIO()
            np.savetxt(text, rows, delimiter=",", fmt="%.15g")
            lines = NOT_FINITE.sub("", text.getvalue())
            stream.write("".join(prefix + line for line in lines.splitlines(keepends=True)) if prefix else lines)


def _listed_text(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


MAX_JSON_POINTS = 100_000  # points `sweep --json` lists; a larger grid goes to --out FILE.csv


def sweep_json(sweep: CompiledSweep, inputs, results, out=None) -> dict:
    """The `sweep --json` document: what was varied, the result columns, and the points as rows.

    `rows` holds one list per point (varied values, then results; `null`
    where a value is not a finite number); it is `null`, with `rows_note`
    saying where the points are, when they went to a CSV file or number
    more than MAX_JSON_POINTS.
    """
    import numpy as np

    total = sweep.size()
    doc = {"block": sweep.block, "points": total, "varied": [a.name for a in sweep.axes], "results": list(sweep.results),
           "columns": [a.name for a in sweep.axes] + list(sweep.results), "rows": None}
    if out is not None:
        doc["rows_note"] = f"the points are in {out}"
    elif total > MAX_JSON_POINTS:
        doc["rows_note"] = (f"{total:,} points are more than --json lists ({MAX_JSON_POINTS:,}): "
                            "write them with --out FILE.csv")
    else:
        columns = [np.asarray(c).tolist() for c in inputs + results]
        doc["rows"] = [[_json_cell(v) for v in row] for row in zip(*columns)]
    return doc


def _json_cell(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    return value
