"""Run the test suite against the oldest versions setup.cfg allows: `python tests/oldest_versions.py`.

It makes a new environment with the oldest Python that `python_requires`
allows (`--python`, default `python3.11`), installs every dependency and test
dependency at its lower bound (`openpyxl>=3.1` installs openpyxl 3.1.0), installs
kvdsl itself from this clone (not editable), and runs the tests from a copy of
the clone (its files staged in a new git repository, as the tests list a
clone's files with git) against that installation: without LibreOffice by default
(`--pytest-args` changes what runs).  It needs the package index and takes
minutes, so it is not part of the suite; CI may run it on its own.

Exit status: that of the test run (0 when every test passes), 2 when the
environment cannot be made.
"""

from __future__ import annotations

import argparse
import configparser
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lower_bounds() -> list[str]:
    """`name==lowest` for every requirement of install_requires and the test extra, from setup.cfg."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = config["options"]["install_requires"].splitlines() + config["options.extras_require"]["test"].splitlines()
    pins = {}
    for line in filter(None, (line.strip() for line in lines)):
        found = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9][^,;\s]*)(?:\s*,\s*<\s*[0-9][^,;\s]*)?", line)
        if not found:
            raise SystemExit(f"setup.cfg: `{line}` has no lower bound `>=`")
        pins[found.group(1).lower()] = found.group(2)
    return [f"{name}=={version}" for name, version in pins.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default="python3.11", help="the interpreter of the new environment")
    parser.add_argument("--pytest-args", default='-q -m "not libreoffice" -p no:cacheprovider',
                        help="what the test run is given")
    parser.add_argument("--keep", action="store_true", help="keep the environment and the copy (their folder is printed)")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kvdsl-oldest-"))
    env_dir, clone = work / "env", work / "clone"
    try:
        pins = lower_bounds()
        print("pins: " + " ".join(pins), flush=True)
        subprocess.run([options.python, "-m", "venv", str(env_dir)], check=True)
        python = str(env_dir / "bin" / "python")
        pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run(pip + ["--only-binary=:all:", *pins], check=True)
        files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
        for name in files:
            if (ROOT / name).is_file():
                (clone / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, clone / name)
        # the copy is a git repository with those files staged: the tests list a clone's files with `git ls-files`
        subprocess.run(["git", "init", "-q", str(clone)], check=True)
        subprocess.run(["git", "add", "-A"], cwd=clone, check=True)
        subprocess.run(pip + ["--no-deps", str(clone)], check=True)
    except (subprocess.CalledProcessError, OSError) as exc:
        print(f"cannot make the environment: {exc}", file=sys.stderr)
        return 2
    versions = subprocess.run([python, "-m", "pip", "freeze"], capture_output=True, text=True).stdout
    print("installed: " + " ".join(versions.split()), flush=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(f"{python} -m pytest {options.pytest_args}", shell=True, cwd=clone, env=env)
    if options.keep:
        print(f"kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
