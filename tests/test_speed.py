"""`kvdsl eval` never imports SymPy.  How fast it is, against importing SymPy
and Lark, is measured by `benchmarks/cli_vs_import.py`, not here: a test must
not fail because the machine is busy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOG = str(ROOT / "specs" / "catalog.kvspec")


def test_eval_does_not_import_sympy():
    code = ("import sys\nfrom click.testing import CliRunner\nfrom kvdsl.cli import main\n"
            f"result = CliRunner().invoke(main, ['eval', {CATALOG!r}])\n"
            "assert result.exit_code in (0, 1) and result.stdout, result.output  # 1: a deployment does not fit\n"
            "print('sympy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT).stdout
    assert out.strip() == "False"
