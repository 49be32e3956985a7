"""CLI commands against the floor they cannot beat: `python -c "import sympy, lark"`.

Runs the floor and each command alternately N times, each as its own
process, and prints the median CPU time (user + system, from `wait4`) and
wall time of each, and the median of the ratios of each pair (a command's
run against the floor's run just before it).  CPU time is what the goals
compare: a busy machine disturbs it less than wall time.  The goals: `eval`
of the catalog at most 1.5x the floor, `check` at most 1.3x, `solve` of one
deployment at most 1.3x.

Before timing, kvdsl's bytecode is compiled (as `pip install` does) and
each command runs twice in a cache folder of its own: the first run keeps the
parsed files, the second the built program (`kvdsl/cache.py`), as for a
user who runs a command again on files that did not change.  With
`--first-build` the kept programs are removed before every run, so each run
resolves its specs (the parsed files are still kept): what a command costs
when no program was kept.  With `--one-edit` the commands read a copy of the
specs, and before every run one deployment of it changes (a new `utilization`
in `gpt_oss_120b_h100`): what a command costs right after a user edited a
deployment, its program built from the one kept before the edit.

    python benchmarks/cli_vs_import.py [--runs 7] [--first-build | --one-edit]
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOG = str(ROOT / "specs" / "catalog.kvspec")
DEPLOYMENT = str(ROOT / "specs" / "deployments" / "gpt_oss_120b_h100.kvspec")
FLOOR = [sys.executable, "-c", "import sympy, lark"]
COMMANDS = {
    "eval catalog": [sys.executable, "-m", "kvdsl", "eval", CATALOG],
    "check catalog": [sys.executable, "-m", "kvdsl", "check", CATALOG],
    "eval --json catalog": [sys.executable, "-m", "kvdsl", "eval", "--json", CATALOG],
    "solve one deployment": [sys.executable, "-m", "kvdsl", "solve", DEPLOYMENT, "--for", "context"],
}
GOALS = {"eval catalog": 1.5, "check catalog": 1.3, "solve one deployment": 1.3}
DONE = (0, 1)  # 1: done, and a deployment does not fit (the catalog has one that does not)


def measure(args, env: dict, ok: tuple = (0,)) -> tuple:
    """(CPU seconds, wall seconds) of one run, which must exit with a status in `ok`."""
    started = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) not in ok:
        raise SystemExit(f"{' '.join(args)} failed")
    return usage.ru_utime + usage.ru_stime, wall


def kvdsl_environment(folder: str) -> dict:
    """The environment of the runs: this clone's kvdsl, a cache folder of its own."""
    return dict(os.environ, PYTHONPATH=str(ROOT), KVDSL_CACHE_DIR=folder)


def compile_bytecode() -> None:
    """Compile kvdsl's bytecode, as `pip install` does (with PYTHONDONTWRITEBYTECODE every run would compile it)."""
    compileall.compile_dir(str(ROOT / "kvdsl"), quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--first-build", action="store_true",
                        help="remove the kept programs before every run: each run resolves its specs")
    parser.add_argument("--one-edit", action="store_true",
                        help="change one deployment of a copy of the specs before every run")
    args = parser.parse_args()
    compile_bytecode()
    with tempfile.TemporaryDirectory() as folder:
        env = kvdsl_environment(folder)
        commands, edited = COMMANDS, None
        if args.one_edit:
            shutil.copytree(ROOT / "specs", Path(folder) / "specs")
            commands = {name: [str(Path(folder) / Path(a).relative_to(ROOT)) if a.startswith(str(ROOT / "specs")) else a
                               for a in command] for name, command in COMMANDS.items()}
            edited = Path(folder) / Path(DEPLOYMENT).relative_to(ROOT)
            original = edited.read_text()
        for command in commands.values():  # keep the parsed files, then the program
            measure(command, env, ok=DONE)
            measure(command, env, ok=DONE)
        times = {name: [] for name in ["floor", *commands]}
        ratios = {name: [] for name in commands}
        for run in range(args.runs):
            for number, (name, command) in enumerate(commands.items()):
                floor = measure(FLOOR, env)
                times["floor"].append(floor)
                if args.first_build:
                    shutil.rmtree(Path(folder) / "programs", ignore_errors=True)
                if edited is not None:  # a value no run had before
                    edited.write_text(original.replace("{", "{\n    utilization = 0.9%02d%02d" % (run, number + 1), 1))
                times[name].append(measure(command, env, ok=DONE))
                ratios[name].append(times[name][-1][0] / floor[0])
    how = ", every run resolving its specs" if args.first_build else ", one deployment edited before every run" if edited else ""
    print(f"medians of {args.runs} paired runs" + how)
    for name in ["floor", *COMMANDS]:
        cpu = statistics.median(t[0] for t in times[name])
        wall = statistics.median(t[1] for t in times[name])
        line = f"{name if name != 'floor' else 'floor (import sympy, lark)':<28} {cpu:6.3f} s CPU  {wall:6.3f} s wall"
        if name in ratios:
            ratio = statistics.median(ratios[name])
            goal = GOALS.get(name)
            verdict = "" if goal is None else ("  ok" if ratio <= goal else f"  OVER the {goal}x goal")
            line += f"  {ratio:5.2f}x{verdict}"
        print(line)


if __name__ == "__main__":
    main()
