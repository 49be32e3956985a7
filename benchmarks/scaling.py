"""Costs that grow linearly: generated inputs, each against the catalog's per-cell cost.

Generates, in a temporary directory:

- one model block of 100,000 cells (`eval`);
- a chain of 20,000 cells, each reading the one before (`eval`);
- a flat sum and a flat `max` of 10,000 terms (`eval`);
- a spec of 20,000 cells to `export`;
- a 10,000,000-point sweep of the catalog's Mistral deployment to CSV;
- the compile step of a five-axis sweep (`sweep --json`, which reports it).

Each runs as its own process; the table gives wall and CPU seconds, peak
memory (`ru_maxrss`), and for `eval` the CPU cost per cell against the
catalog's.  The goals: `eval` of 100,000 cells within 20x the catalog's
per-cell cost, `export` of 20,000 cells within 60 s, the 10^7-point sweep
under 1 GiB.

    python benchmarks/scaling.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "specs" / "catalog.kvspec"
HEAD = 'model m "M" {\n    layers = 1; heads = 1; head_dim = 1; params = 1\n'
MISTRAL = ROOT / "specs" / "deployments" / "mistral_7b_l4.kvspec"


def block_spec(cells: int) -> str:
    """One block of `cells` cells, each a small rule over a few cells before it."""
    lines = [HEAD, "    let c0 = 1\n"]
    for i in range(1, cells):
        lines.append(f"    let c{i} = c{i // 2} + c{i - 1} * 2 - c{max(0, i - 7)}\n" if i % 3 else f"    let c{i} = {i}\n")
    return "".join(lines) + "}\n"


def chain_spec(cells: int) -> str:
    """A chain: every cell reads the one before it."""
    return HEAD + "    let c0 = 1\n" + "".join(f"    let c{i} = c{i - 1} + 1\n" for i in range(1, cells)) + "}\n"


def flat_spec(terms: int, form: str) -> str:
    """One cell whose rule is a flat sum (`form` "sum") or a flat `max` of `terms` terms."""
    values = [str(i % 97) for i in range(terms)]
    rule = " + ".join(values) if form == "sum" else f"max({', '.join(values)})"
    return HEAD + f"    let x = {rule}\n}}\n"


def export_spec(cells: int) -> str:
    """`cells` cells over 20 model blocks: numbers and rules, as a catalog has."""
    blocks, per = 20, cells // 20
    out = []
    for b in range(blocks):
        out.append(f'model m{b} "M{b}" {{\n    layers = 1; heads = 1; head_dim = 1; params = 1\n    let c0 = {b + 1}\n')
        for i in range(1, per):
            out.append(f"    let c{i} = c{i - 1} * 2 + c{i // 2} - {i}\n" if i % 4 else f"    let c{i} = {i}\n")
        out.append("}\n")
    return "".join(out)


CACHE = Path(tempfile.mkdtemp(prefix="kvdsl-scaling-cache-"))  # parsed files kept; programs removed before each run


def run(args: list) -> dict:
    """Wall and CPU seconds and peak memory (MiB) of one `kvdsl` process, resolving its specs."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), KVDSL_CACHE_DIR=str(CACHE))
    shutil.rmtree(CACHE / "programs", ignore_errors=True)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "kvdsl", *map(str, args)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"kvdsl {' '.join(map(str, args))} exited with {code}:\n{stderr[-2000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "mib": usage.ru_maxrss / 1024}


def catalog_cells() -> int:
    sys.path.insert(0, str(ROOT))
    from kvdsl.api import build_program

    return len(build_program([str(CATALOG)]).cells)


def cases(tmp: Path) -> dict:
    """name -> (kvdsl arguments, cells or None, goal text, check(result) or None)."""
    def spec(name, text):
        path = tmp / f"{name}.kvspec"
        path.write_text(text)
        return path

    sweep_axes = ["--vary", "batch=1:100", "--vary", "context=1K:100K:1K", "--vary", "gpus=1:1000"]
    five_axes = ["--vary", "batch=1:8", "--vary", "context=1K:8K:1K", "--vary", "gpus=1:4",
                 "--vary", "replicas=1:4", "--vary", "utilization=0.5:0.9:0.1"]
    return {
        "eval catalog": (["eval", CATALOG], "catalog", "", None),
        "eval block 100,000": (["eval", spec("block", block_spec(100_000))], 100_000, "20x catalog per cell", 20),
        "eval chain 20,000": (["eval", spec("chain", chain_spec(20_000))], 20_000, "", None),
        "eval flat sum 10,000": (["eval", spec("sum", flat_spec(10_000, "sum"))], 1, "", None),
        "eval flat max 10,000": (["eval", spec("max", flat_spec(10_000, "max"))], 1, "", None),
        "export 20,000 cells": (["export", spec("export", export_spec(20_000)), "-o", tmp / "x.xlsx", "--force"],
                                None, "60 s", ("wall", 60)),
        "sweep 10^7 to CSV": (["sweep", MISTRAL, *sweep_axes, "--out", tmp / "s.csv", "--force"], None, "1 GiB",
                              ("mib", 1024)),
        "compile 5-axis sweep": (["sweep", MISTRAL, *five_axes, "--json"], None, "", None),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="run only the cases whose name contains one of these words")
    only = parser.parse_args().only
    with tempfile.TemporaryDirectory() as tmp:
        table = cases(Path(tmp))
        run(["eval", CATALOG])  # warm the parse cache
        per_cell = None
        print(f"{'case':<24} {'wall s':>8} {'CPU s':>8} {'MiB':>7}  per cell vs catalog / goal")
        for name, (args, cells, goal, check) in table.items():
            if only and name != "eval catalog" and not any(word in name for word in only):
                continue
            result = run(args)
            note = ""
            if cells == "catalog":
                cells = catalog_cells()
                per_cell = result["cpu"] / cells
                note = f"{cells:,} cells, {per_cell * 1e6:.0f} us per cell"
            elif isinstance(check, int) and per_cell:
                ratio = result["cpu"] / cells / per_cell
                note = f"{ratio:.1f}x per cell (goal {check}x): " + ("ok" if ratio <= check else "OVER")
            elif isinstance(check, tuple):
                what, limit = check
                note = f"goal {goal}: " + ("ok" if result[what] <= limit else "OVER")
            print(f"{name:<24} {result['wall']:8.2f} {result['cpu']:8.2f} {result['mib']:7.0f}  {note}", flush=True)
    shutil.rmtree(CACHE, ignore_errors=True)


if __name__ == "__main__":
    main()
