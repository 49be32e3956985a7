"""What a release and CI need: a deterministic export, one list of dependencies, an sdist without tests."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from cli_helpers import cli

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "specs" / "deployments" / "mistral_7b_l4.kvspec"


def test_export_twice_gives_the_same_bytes(tmp_path):
    first, second = tmp_path / "a.xlsx", tmp_path / "b.xlsx"
    cli("export", SPEC, "-o", first, code=0)
    cli("export", SPEC, "-o", second, code=0)
    assert first.read_bytes() == second.read_bytes()


def test_export_has_fixed_timestamps(tmp_path):
    out = tmp_path / "a.xlsx"
    cli("export", SPEC, "-o", out, code=0)
    with zipfile.ZipFile(out) as archive:
        assert archive.testzip() is None
        assert {info.date_time for info in archive.infolist()} == {(2000, 1, 1, 0, 0, 0)}
        core = archive.read("docProps/core.xml").decode()
    assert core.count("2000-01-01T00:00:00Z") == 2  # created and modified


def test_numpy_is_listed_once():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lists = [config["options"]["install_requires"]] + list(config["options.extras_require"].values())
    mentions = [line for text in lists for line in text.splitlines() if line.strip().startswith("numpy")]
    assert len(mentions) == 1, mentions


def test_ci_installs_libreoffice_and_pdftotext():
    script = (ROOT / ".ci" / "run").read_text()
    assert "pdftotext" in script and "soffice" in script
    install = next(line for line in script.splitlines() if "apt-get install" in line)
    assert "libreoffice-calc-nogui" in install and "poppler-utils" in install


def clone_tree(tmp_path) -> Path:
    """The files a clone has (those git tracks), copied to `tmp_path/tree`."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    tree = tmp_path / "tree"
    for name in files:
        source = ROOT / name
        if source.is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_bytes(source.read_bytes())
    return tree


def test_sdist_holds_the_package_and_no_tests(tmp_path):
    tree = clone_tree(tmp_path)
    subprocess.run([sys.executable, "-c", "from setuptools import setup; setup()", "-q", "sdist", "-d", str(tmp_path / "dist")],
                   cwd=tree, capture_output=True, check=True)
    (archive,) = (tmp_path / "dist").glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        members = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert "kvdsl/kvspec.lark" in members and "kvdsl/prelude/deployment.kvspec" in members
    assert "specs/hardware/h200.kvspec" in members and "specs/models/llama_3_1_8b.kvspec" in members  # the catalog
    assert not [m for m in members if m.startswith(("tests/", "specs/deployments/"))]


def test_an_installed_package_has_the_catalog(tmp_path):
    """`pip install .` (not editable) into a new environment: outside the clone, the catalog is there."""
    tree = clone_tree(tmp_path)
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(env)], check=True)
    python = env / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(tree)],  # built as pip builds it
                   check=True, capture_output=True)
    shutil.rmtree(tree)  # nothing of the clone is left to read
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "mine.kvspec").write_text(
        'import "catalog:hardware/h200.kvspec"\nimport "catalog:models/qwen3_8b.kvspec"\n\ndeployment mine "Mine" {\n'
        "    model = qwen3_8b\n    hardware = h200\n    gpus = 1\n    context = 8K\n    batch = 4\n}\n")
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed package, not this clone's
    where = subprocess.run([str(python), "-c", "import kvdsl; print(kvdsl.__file__)"], cwd=elsewhere, capture_output=True,
                           text=True, check=True, env=clean).stdout
    assert where.startswith(str(env)), where
    done = subprocess.run([str(env / "bin" / "kvdsl"), "check", "mine.kvspec"], cwd=elsewhere, capture_output=True, text=True,
                          env=clean)
    assert done.returncode == 0 and done.stdout.startswith("ok: 1 hardware, 1 model, 1 deployment"), done.stdout + done.stderr
