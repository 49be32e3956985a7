"""The long fuzz run: `python -m tests.fuzz --cases 100000 --seed 1`."""

from __future__ import annotations

import argparse
import sys
import time

from .runner import run


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="the first case number (to replay one case: --start N --cases 1)")
    parser.add_argument("--timeout", type=float, default=20.0, help="CPU seconds a case may take before it counts as a hang (five times as many wall seconds)")
    parser.add_argument("--verbose", action="store_true", help="print each case and its time")
    options = parser.parse_args()
    began = time.time()

    def progress(index, report):
        done = index - options.start + 1
        if len(report.failures) > progress.shown:
            for failure in report.failures[progress.shown:]:
                print("FAIL #{} [{}] {}: {}\n    {}".format(*failure[:4], failure[4].replace("\n", "\n    ")), file=sys.stderr, flush=True)
            progress.shown = len(report.failures)
        if options.verbose:
            print(f"#{index} {report.last[0]:.2f} s {report.last[1]}", file=sys.stderr, flush=True)
        if done % 500 == 0:
            head = "\n  ".join(report.summary().split("\n")[:4])
            print(f"[{time.time() - began:7.0f} s] {done:,} cases\n  {head}", file=sys.stderr, flush=True)

    progress.shown = 0
    report = run(options.cases, options.seed, options.timeout, options.start, progress)
    print(report.summary())
    print(f"wall time: {time.time() - began:.0f} s")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
