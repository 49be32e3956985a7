"""The in-process CLI runner the robustness tests share."""

from __future__ import annotations

from click.testing import CliRunner

from kvdsl.cli import main


def cli(*args, code=None):
    """Run `kvdsl ARGS`; never a traceback or an internal error; check the exit status."""
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output, result.output[-3000:]
    assert "internal error" not in result.output, result.output[-3000:]
    if code is not None:
        assert result.exit_code == code, (result.exit_code, result.output[-3000:])
    return result


def timed(*args, code=None):
    """(the result of `kvdsl ARGS`, the CPU seconds this process spent on it).

    CPU time, not wall time: another process busy on the machine does not
    count, so the hang guards that compare two commands' costs hold on a
    loaded machine.
    """
    import time

    started = time.process_time()
    result = cli(*args, code=code)
    return result, time.process_time() - started


def check_seconds(path) -> float:
    """The CPU time of `kvdsl check PATH` now: the yardstick the hang guards measure a command against."""
    return timed("check", path, code=0)[1]


def answered(result) -> bool:
    """True when a command gave its answer: exit 0, or `eval`'s exit 1 after every block when a deployment
    does not fit (its last line on stderr names them)."""
    last = result.stderr.rstrip().rpartition("\n")[2]
    return result.exit_code == 0 or (result.exit_code == 1 and " not fit: " in last and bool(result.stdout))
