"""`kvdsl eval` of the catalog costs well under twice `import sympy, lark` (issue 2)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOG = str(ROOT / "specs" / "catalog.kvspec")


def fastest(args, runs=3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        times.append(time.perf_counter() - started)
    return min(times)


def test_eval_does_not_import_sympy():
    code = ("import sys\nfrom click.testing import CliRunner\nfrom kvdsl.cli import main\n"
            f"result = CliRunner().invoke(main, ['eval', {CATALOG!r}])\n"
            "assert result.exit_code == 0, result.output\n"
            "print('sympy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT).stdout
    assert out.strip() == "False"


def test_eval_costs_well_under_twice_importing_sympy_and_lark():
    baseline = fastest([sys.executable, "-c", "import sympy, lark"])
    evaluation = fastest([sys.executable, "-m", "kvdsl", "eval", CATALOG])
    assert evaluation < 1.5 * baseline, (evaluation, baseline)
