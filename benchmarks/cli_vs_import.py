"""CLI commands against the floor they cannot beat: `python -c "import sympy, lark"`.

Runs each command and the floor alternately, best of N, in one process, and
prints the ratio of their CPU times (user + system).  The goals: `eval` and `check` of the catalog under 1.5x the
floor, `solve` of one deployment under 1.3x.  The parse cache is warmed first, as it is for a user's second run.

    python benchmarks/cli_vs_import.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOG = str(ROOT / "specs" / "catalog.kvspec")
DEPLOYMENT = str(ROOT / "specs" / "deployments" / "mistral_7b_l4.kvspec")
FLOOR = [sys.executable, "-c", "import sympy, lark"]
COMMANDS = {
    "eval catalog": [sys.executable, "-m", "kvdsl", "eval", CATALOG],
    "check catalog": [sys.executable, "-m", "kvdsl", "check", CATALOG],
    "eval --json catalog": [sys.executable, "-m", "kvdsl", "eval", "--json", CATALOG],
    "solve one deployment": [sys.executable, "-m", "kvdsl", "solve", DEPLOYMENT, "--for", "batch"],
}
GOALS = {"eval catalog": 1.5, "check catalog": 1.5, "solve one deployment": 1.3}


def seconds(args) -> float:
    """CPU seconds (user + system) of one run: a busy machine disturbs it less than wall time."""
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    for args in COMMANDS.values():  # warm the parse cache and the OS file cache
        seconds(args)
    best = {name: float("inf") for name in ["floor", *COMMANDS]}
    for _ in range(runs):
        best["floor"] = min(best["floor"], seconds(FLOOR))
        for name, args in COMMANDS.items():
            best[name] = min(best[name], seconds(args))
    print(f"{'floor (import sympy, lark)':<28} {best['floor']:.3f} s CPU")
    for name in COMMANDS:
        ratio = best[name] / best["floor"]
        goal = GOALS.get(name)
        verdict = "" if goal is None else ("  ok" if ratio <= goal else f"  OVER the {goal}x goal")
        print(f"{name:<28} {best[name]:.3f} s CPU  {ratio:.2f}x{verdict}")


if __name__ == "__main__":
    main()
