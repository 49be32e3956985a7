"""A short, deterministic fuzz run: mutated specs, configs, odd files and junk
arguments through every command.  No case may end in a traceback, an internal
error, a hang or an error quoting the wrong line.  The long run for
developers is `python -m tests.fuzz --cases 100000 --seed N`.
"""

from __future__ import annotations

import pytest

from fuzz import CATEGORIES, run
from fuzz.runner import judge, quoted_lines_agree

CASES = 250


@pytest.fixture(scope="module")
def report():
    return run(CASES, seed=15, timeout=60)


def test_no_case_fails(report):
    assert not report.failures, report.summary()


def test_every_category_ran(report):
    assert sum(report.cases.values()) == CASES
    assert set(report.cases) == set(CATEGORIES), report.cases
    assert {0, 1, 2} <= set(report.exits), report.exits


def test_a_wrong_quoted_line_is_caught(tmp_path):
    spec = tmp_path / "s.kvspec"
    spec.write_bytes(b"let a = 1\r\nlet b = nope\r\n")
    good = f"{spec}:2:9: error: unknown name `nope`\n    let b = nope\n            ^^^^\n"
    assert quoted_lines_agree(good) is None
    assert quoted_lines_agree(good.replace("    let b = nope\n", "    let a = 1\n"))


class _Result:
    def __init__(self, code, output, exception=None):
        self.exit_code, self.output, self.stderr, self.exception = code, output, output, exception


def test_internal_errors_and_tracebacks_are_failures():
    case = ("spec", "", {}, ["check"], None)
    assert judge(_Result(3, "internal error: KeyError"), case) == "internal error"
    assert judge(_Result(1, "", ValueError("x")), case).startswith("traceback")
    assert judge(_Result(2, "error: no block named `x`"), case) is None  # the command line: no position
    assert "no position" in judge(_Result(1, "error: `x` is not a number"), case)  # a spec's mistake needs one
    assert "Python object" in judge(_Result(1, "x.kvspec:1:1: error: not <kvdsl.dims._Zero object at 0x7f12>"), case)
