"""Run generated cases through every kvdsl command in-process and judge each result.

A case fails on a Python traceback, an internal error (exit 3), an exit status
other than 0, 1 or 2, a hang (more than the per-case timeout), a positioned
error whose quoted line is not that line of the file, an imported config that
writes anything but one model block, or a workbook exported although two of
its names differ only by case.
"""

from __future__ import annotations

import contextlib
import os
import json
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from click.testing import CliRunner

from . import mutators as m
from .judge import judge, quoted_lines_agree  # noqa: F401  (quoted_lines_agree: tests)

ROOT = Path(__file__).resolve().parents[2]
CATEGORIES = ("spec", "set", "args", "config", "odd_file", "collide", "repetition", "fmt", "lsp")
WEIGHTS = (45, 12, 10, 20, 5, 8, 12, 8, 2)


class Hang(BaseException):
    """Raised in the main thread when a case runs past its timeout."""


@dataclass
class Report:
    cases: Counter = field(default_factory=Counter)
    failures: list = field(default_factory=list)  # (index, category, what, description, excerpt)
    hangs: int = 0
    slowest: tuple = (0.0, None, "", 0.0)  # CPU seconds, case number, description, wall seconds
    exits: Counter = field(default_factory=Counter)
    last: tuple = (0.0, "")

    def summary(self) -> str:
        lines = [f"cases: {sum(self.cases.values()):,} (" + ", ".join(f"{k} {v:,}" for k, v in sorted(self.cases.items())) + ")",
                 "exit statuses: " + ", ".join(f"{k}: {v:,}" for k, v in sorted(self.exits.items())),
                 f"failures: {len(self.failures)} (internal errors {sum(1 for f in self.failures if f[2] == 'internal error')}, "
                 f"hangs {self.hangs})",
                 f"slowest case: {self.slowest[0]:.2f} CPU s ({self.slowest[3]:.2f} s wall), #{self.slowest[1]}: {self.slowest[2]}"]
        for index, category, what, description, excerpt in self.failures[:50]:
            lines.append(f"FAIL #{index} [{category}] {what}: {description}\n    " + excerpt.replace("\n", "\n    "))
        return "\n".join(lines)


class Workspace:
    """A private copy of specs/ and tests/configs/, and a private parse cache."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="kvdsl-fuzz-"))
        shutil.copytree(ROOT / "specs", self.root / "specs")
        shutil.copytree(ROOT / "tests" / "configs", self.root / "configs")
        (self.root / "out").mkdir()
        os.mkfifo(self.root / "fifo")
        os.symlink(self.root / "loop", self.root / "loop")
        self.server = None  # the language server, started by the first `lsp` case
        self.specs = sorted(p for p in (self.root / "specs").rglob("*.kvspec") if p.name != "catalog.kvspec")
        self.configs = sorted((self.root / "configs").glob("*.json"))
        self.texts = {p: p.read_text(encoding="utf-8") for p in self.specs + self.configs}
        self._env = os.environ.get("KVDSL_CACHE_DIR")

    def __enter__(self):
        import kvdsl.cache

        os.environ["KVDSL_CACHE_DIR"] = str(self.root / "cache")
        kvdsl.cache.directory.cache_clear()
        return self

    def __exit__(self, *exc):
        import kvdsl.cache

        if self.server is not None:
            self.server.close()

        if self._env is None:
            os.environ.pop("KVDSL_CACHE_DIR", None)
        else:
            os.environ["KVDSL_CACHE_DIR"] = self._env
        kvdsl.cache.directory.cache_clear()
        shutil.rmtree(self.root, ignore_errors=True)

    def clean_out(self):
        for p in (self.root / "out").iterdir():
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink()


def spec_command(rng: random.Random, path: Path, out: Path) -> list[str]:
    """A command over one spec, chosen by what the spec holds."""
    p = str(path)
    kind = path.parent.name
    if kind != "deployments" and kind != "engine_logs":
        return rng.choice([["check", p], ["eval", p], ["eval", p, "--json"], ["table", p], ["table", p, "--csv"],
                           ["explain", p, rng.choice(["layers", "kv_heads", "params", "memory", "bytes"])],
                           ["export", p, "-o", str(out / "w.xlsx")]])
    return rng.choice([["check", p], ["eval", p], ["eval", p, "--json", "--all"],
                       ["solve", p, "--for", rng.choice(["batch", "context", "gpus"])],
                       ["sweep", p, "--vary", rng.choice(["batch=1:4", "context=1K:8K:x2", "gpus=1:8", "utilization=0.5:0.9:0.1"])],
                       ["explain", p, rng.choice(["batch", "kv_cache_per_sequence", "context", "fits"])],
                       ["compare", p], ["compare", p, "--json"], ["export", p, "-o", str(out / "w.xlsx")]])


def make_case(ws: Workspace, index: int, seed: int):
    """Case number `index`: (category, description, files to write {path: bytes}, argument list)."""
    rng = random.Random(f"{seed}:{index}")
    category = rng.choices(CATEGORIES, WEIGHTS)[0]
    out = ws.root / "out"
    if category in ("spec", "set", "args", "collide"):
        original = rng.choice(ws.specs)
        target = original.with_name("fuzz_case.kvspec")
        text = ws.texts[original]
        if category == "spec":
            edits = []
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                text, edit = m.mutate_text(rng, text)
                edits.append(edit)
            args = spec_command(rng, target, out)
            what = f"{'+'.join(edits)} of {original.relative_to(ws.root)}"
        elif category == "collide":
            text = m.collide_names(rng, text)
            args = rng.choice([["export", str(target), "-o", str(out / "w.xlsx")], ["check", str(target)]])
            what = f"case-colliding names in {original.relative_to(ws.root)}"
        elif category == "set":
            args = spec_command(rng, target, out)
            for _ in range(rng.randint(1, 2)):
                args += ["--set", rng.choice(m.JUNK_SETS)]
            what = f"junk --set on {original.relative_to(ws.root)}"
        else:
            command = rng.choice(["solve", "sweep", "explain", "compare", "eval", "table", "export"])
            args = [command, str(target)]
            junk = {"solve": lambda: ["--for", rng.choice(m.CELLS)], "sweep": lambda: ["--vary", rng.choice(m.VARY)],
                    "explain": lambda: [rng.choice(m.CELLS), "--depth", str(rng.choice([-1, 0, 1, 10**30]))],
                    "export": lambda: ["-o", rng.choice([str(out / "w.xlsx"), str(out), str(out / "x.txt"), "/nonexistent/w.xlsx"])],
                    "table": lambda: [rng.choice(["--context", "--kv-dtype"]), rng.choice(m.NUMBERS + m.TOKENS + ["FP8", "q4_0"])],
                    "eval": lambda: ["--set", rng.choice(m.JUNK_SETS), "--set", rng.choice(m.JUNK_SETS)]}
            if command == "solve" and rng.random() < 0.5:
                args += ["--symbolic", rng.choice(m.CELLS)]
            args += junk.get(command, lambda: [])()
            args += rng.choice([[], ["--block", rng.choice(["nope", "l4", "fp8", "", "A" * 300])],
                                ["--set", rng.choice(m.JUNK_SETS)], ["--vary", "batch=1:2"], ["--nope"]])
            what = f"junk arguments on {original.relative_to(ws.root)}"
        return category, what, {target: m.dumps_text(text)}, args, None
    if category == "fmt":
        original = rng.choice(ws.specs)
        text = m.reflow(rng, ws.texts[original]) if rng.random() < 0.8 else m.mutate_text(rng, ws.texts[original])[0]
        source, formatted = original.with_name("fuzz_case.kvspec"), original.with_name("fuzz_fmt.kvspec")
        data = m.dumps_text(text)
        return category, f"fmt of {original.relative_to(ws.root)}", {source: data, formatted: data}, ["fmt", str(formatted)], None
    if category == "lsp":
        from .lsp import lsp_messages

        what, messages = lsp_messages(rng, {p: ws.texts[p] for p in ws.specs}, ws.root,
                                      (ws.root / "specs" / "deployments" / "mistral_7b_l4.kvspec").as_uri(), index)
        return category, what, {}, ["lsp", f"{len(messages)} messages"], messages
    if category == "repetition":
        target = out / "repetition.kvspec"
        members = ["sq[1]", "sq[2]", "tot[3]", "x0", "x1"]
        args = rng.choice([["check", str(target)], ["eval", str(target), "--json"], ["eval", str(target)],
                           ["explain", str(target), rng.choice(members)], ["fmt", "--check", str(target)],
                           ["fmt", "--diff", str(target)], ["export", str(target), "-o", str(out / "w.xlsx")],
                           ["eval", str(target), "--cells", rng.choice(members), "--set", f"{rng.choice(members)}=3"],
                           ["sweep", str(target), "--vary", rng.choice(["layers=1:4", "sq[1]=1:3"])]])
        return category, "functions, families and for", {target: m.dumps_text(m.repetition_spec(rng))}, args, None
    if category == "config":
        original = rng.choice(ws.configs)
        text, edit = m.mutate_config(rng, None, ws.texts[original])
        target = original.with_name("fuzz_case.json")
        args = ["import", str(target)]
        if rng.random() < 0.3:
            args += ["--name", m.odd_name(rng)]
        if rng.random() < 0.3:
            args += ["--title", m.odd_name(rng)]
        if rng.random() < 0.3:
            args += ["--strict"]
        written = None
        if rng.random() < 0.5:
            written = out / "imported.kvspec"
            args += ["-o", str(written)]
        return category, f"{edit} of {original.name}", {target: m.dumps_text(text)}, args, written
    # odd files
    odd = out / "odd.kvspec"
    kind = rng.choice(["empty", "binary", "nul", "bom", "latin1", "long_line", "directory", "fifo", "loop",
                       "missing", "dev_null", "only_comment", "cr_only"])
    command = rng.choice(["check", "eval", "table", "import", "explain", "compare", "solve", "sweep", "export"])
    extra = {"explain": ["batch"], "solve": ["--for", "batch"], "sweep": ["--vary", "batch=1:2"],
             "export": ["-o", str(out / "w.xlsx")]}.get(command, [])
    contents = {"empty": b"", "binary": bytes(rng.randrange(256) for _ in range(300)), "nul": b"model a {\0}\n",
                "bom": b"\xef\xbb\xbfmodel m \"M\" {\n layers = 1\n}\n", "latin1": "let caf\xe9 = 1\n".encode("latin-1"),
                "long_line": b"let x = " + b"1 + " * 50000 + b"1\n", "only_comment": b"# nothing here",
                "cr_only": b"let a = 1\rlet b = a +\rlet c = 2\r"}
    files = {}
    if kind in contents:
        files[odd] = contents[kind]
        path = str(odd)
    elif kind == "directory":
        path = str(ws.root / "specs")
    elif kind == "fifo":
        with contextlib.suppress(FileExistsError):
            os.mkfifo(odd)
        path = str(odd)
    elif kind == "loop":
        with contextlib.suppress(FileExistsError):
            os.symlink(odd, odd)
        path = str(odd)
    elif kind == "missing":
        path = str(out / "missing.kvspec")
    else:
        path = "/dev/null"
    return category, f"{kind} file to {command}", files, [command, path, *extra], None


class Watchdog:
    """Interrupts a case that runs past its timeout in CPU seconds, or five times that in wall seconds.

    CPU time (SIGPROF) measures the case, not the machine: a busy or niced run
    does not turn slow cases into hangs.  The wall-clock timer (SIGALRM) catches
    a case blocked in a system call, which uses no CPU.  A thread ends the
    process if even those signals do not return control.
    """

    WALL_FACTOR = 5

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.deadline = None
        self.label = ""
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self):
        while True:
            time.sleep(1)
            deadline = self.deadline
            if deadline is not None and time.monotonic() > deadline + 2 * self.WALL_FACTOR * self.timeout:
                sys.stderr.write(f"\nfuzz: HANG (not interruptible) in {self.label}\n")
                sys.stderr.flush()
                os._exit(4)

    @contextlib.contextmanager
    def watch(self, label: str):
        def expire(signum, frame):
            raise Hang()

        previous = {sig: signal.signal(sig, expire) for sig in (signal.SIGALRM, signal.SIGPROF)}
        self.label, self.deadline = label, time.monotonic()
        signal.setitimer(signal.ITIMER_PROF, self.timeout)
        signal.setitimer(signal.ITIMER_REAL, self.WALL_FACTOR * self.timeout)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.setitimer(signal.ITIMER_REAL, 0)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.deadline = None


def execute(runner, main, ws: Workspace, case, timeout: float):
    """Run one case: (the last command's result, or None for the language server; what is wrong, or None)."""
    category, what, files, args, written = case
    if category == "lsp":
        from .lsp import Server, run_case

        if ws.server is None:
            ws.server = Server(ws.root)
        failure = run_case(ws.server, written, timeout)
        if failure:  # the next case starts with a server of its own
            ws.server.close()
            ws.server = None
        return None, failure
    result = runner.invoke(main, args)
    failure = judge(result, case)
    if category != "fmt" or failure or result.exit_code != 0:
        return result, failure
    return fmt_round_trip(runner, main, case)


def fmt_round_trip(runner, main, case):
    """A formatted spec formats to itself and evaluates as its source did."""
    category, what, files, args, written = case
    source, formatted = list(files)
    again = runner.invoke(main, ["fmt", "--check", str(formatted)])
    if again.exit_code != 0:
        return again, judge(again, case) or "fmt's output does not format to itself: " + again.output[-300:]
    results = [runner.invoke(main, ["eval", "--json", "--all", str(path)]) for path in (source, formatted)]
    for result in results:
        failure = judge(result, case)
        if failure:
            return result, failure
    before, after = results
    if before.exit_code != after.exit_code:
        return after, f"the formatted spec exits {after.exit_code}, its source {before.exit_code}"
    if before.stdout.strip() and json.loads(before.stdout) != json.loads(after.stdout):
        return after, "the formatted spec evaluates differently from its source"
    return after, None


def run(cases: int, seed: int = 0, timeout: float = 20.0, start: int = 0, progress=None) -> Report:
    """Run cases number start .. start+cases-1 of the run `seed`."""
    from kvdsl.cli import main

    report = Report()
    runner = CliRunner()
    dog = Watchdog(timeout)
    with Workspace() as ws:
        for index in range(start, start + cases):
            case = make_case(ws, index, seed)
            category, what, files, args, written = case
            shown = " ".join(a if len(a) < 60 else a[:57] + "..." for a in args)
            description = f"{what}: kvdsl {shown}".replace(str(ws.root) + "/", "")
            for path, data in files.items():
                path.write_bytes(data)
            began, began_cpu = time.perf_counter(), time.process_time()
            try:
                with dog.watch(f"#{index} {description}"):
                    result, failure = execute(runner, main, ws, case, timeout)
                excerpt = result.output[-600:] if result is not None else ""
            except Hang:
                failure, excerpt = "hang", f"more than {timeout:g} CPU seconds or {Watchdog.WALL_FACTOR * timeout:g} wall seconds"
                result = None
                if ws.server is not None and category == "lsp":  # the next case gets a server of its own
                    ws.server.close()
                    ws.server = None
            if failure and failure.startswith("hang"):
                report.hangs += 1
            elapsed, cpu = time.perf_counter() - began, time.process_time() - began_cpu
            report.cases[category] += 1
            report.last = (elapsed, description)
            if result is not None:
                report.exits[result.exit_code] += 1
            if cpu > report.slowest[0]:
                report.slowest = (cpu, index, description, elapsed)
            if failure:
                report.failures.append((index, category, failure, description, excerpt.replace(str(ws.root) + "/", "")))
            for path in files:
                with contextlib.suppress(OSError):
                    path.unlink()
            ws.clean_out()
            if progress:
                progress(index, report)
    return report
