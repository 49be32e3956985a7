"""Solving, `?` cells, sweeps and explanations, on the shipped catalog.

Every answer of `kvdsl solve` is checked by substitution: the answer fits and
the next integer does not, re-evaluated with `--set`-style overrides through
`parse_setting`.  Worked examples are also computed by hand from the specs'
published numbers.  The deployments are discovered from the catalog, so a new
deployment is covered without editing this file.
"""

from __future__ import annotations

import csv
import io
import json
import re
import textwrap
from fractions import Fraction
from math import ceil, floor
from pathlib import Path

import pytest
from click.testing import CliRunner

import kvdsl
from cli_helpers import answered
from kvdsl.api import build_program, evaluate_paths, parse_setting
from kvdsl.cli import main
from kvdsl.solve import solve

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "specs"
CATALOG = str(SPECS / "catalog.kvspec")
PRELUDE = Path(kvdsl.__file__).resolve().parent / "prelude"

MIB, GIB = 2**20, 2**30
UTILIZATION = Fraction(9, 10)
JSON_KEYS = {"block", "cell", "expression", "value", "unit", "regimes", "message", "constraint", "windows"}


def _deployments() -> list:
    """The catalog's deployments, read without resolving it (tests are collected by every worker)."""
    from kvdsl.loader import load

    return sorted(block.name for block, prelude in load([CATALOG]).blocks if not prelude and block.kind == "deployment")


DEPLOYMENTS = _deployments()


def invoke(*args: str, ok: bool = True):
    result = CliRunner().invoke(main, [str(a) for a in args])
    if ok:
        assert answered(result), result.output
    return result


def solve_json(*args: str, spec: str = CATALOG) -> dict:
    return json.loads(invoke("solve", spec, *args, "--json").stdout)


def values_with(*settings: str, spec: str = CATALOG) -> dict:
    return evaluate_paths([spec], [parse_setting(s) for s in settings])[1]


def own_spec(deployment: str) -> str:
    """The deployment's own file, which the catalog imports: one deployment builds faster than 24."""
    path = SPECS / "deployments" / f"{deployment}.kvspec"
    assert path.exists(), path
    return str(path)


def check_contract(answer: dict) -> None:
    """The `solve --json` contract, exactly."""
    assert set(answer) == JSON_KEYS
    assert isinstance(answer["block"], str) and isinstance(answer["cell"], str)
    assert answer["value"] is None or (isinstance(answer["value"], (int, float)) and not isinstance(answer["value"], bool))
    if answer["value"] is not None and answer["message"] is None:
        assert isinstance(answer["expression"], str) and answer["expression"]
    if answer["expression"] is None and answer["value"] is not None:
        assert answer["message"].startswith("no closed form")
    else:
        assert answer["expression"] is None or isinstance(answer["expression"], str)
    assert answer["unit"] is None or isinstance(answer["unit"], str)
    assert answer["message"] is None or isinstance(answer["message"], str)
    assert isinstance(answer["regimes"], list)
    for regime in answer["regimes"]:
        assert set(regime) == {"condition", "expression", "active"}
        assert isinstance(regime["condition"], str)
        assert isinstance(regime["expression"], str)
        assert isinstance(regime["active"], bool)


# ---------------------------------------------------------------------------
# every deployment: context at batch 8, batch at 32K
# ---------------------------------------------------------------------------

QUESTIONS = {
    # cell solved for -> (the --set that fixes the other, the eval cell that must agree)
    "context": ("batch=8", "max_context"),
    "batch": ("context=32K", "max_batch"),
}


@pytest.fixture(scope="module")
def answers() -> dict:
    """{(cell, deployment): the answer as `solve --json` prints it}: one catalog program per question."""
    out = {}
    for cell, (setting, _) in QUESTIONS.items():
        program = build_program([CATALOG], [parse_setting(setting)])
        for d in DEPLOYMENTS:
            out[(cell, d)] = json.loads(json.dumps(solve(program, d, cell).to_json()))
    return out


@pytest.fixture(scope="module")
def neighbours(answers) -> dict:
    """{(cell, deployment): (fits at the answer, fits one past it, eval's max_* cell)}.

    Deployments do not depend on one another, so every deployment's answer is
    set in one program (and every answer + 1 in another).
    """
    out = {}
    for cell, (setting, eval_cell) in QUESTIONS.items():
        solved = {d: answers[(cell, d)]["value"] for d in DEPLOYMENTS if answers[(cell, d)]["value"] is not None}
        # a `batch = ?` the setting leaves without an answer gets a value, so that the others evaluate
        unsolved = [f"{d}.{c}=1" for d in DEPLOYMENTS for c in ("batch",) if d not in solved and _asks(d)]
        at = values_with(setting, *unsolved, *[f"{d}.{cell}={v}" for d, v in solved.items()])
        past = values_with(setting, *unsolved, *[f"{d}.{cell}={v + 1}" for d, v in solved.items()])
        plain = values_with(setting, *unsolved)
        for d in DEPLOYMENTS:
            condition = answers[(cell, d)]["constraint"]
            out[(cell, d)] = (at[(d, condition)] if d in solved else None,
                              past[(d, condition)] if d in solved else None,
                              plain[(d, eval_cell)], plain[(d, "shortfall_bytes_per_gpu")])
    return out


def _asks(deployment: str) -> bool:
    """Whether the deployment's own file names a workload (its `?` is solved against the workload's targets)."""
    return "workload =" in Path(own_spec(deployment)).read_text() if (SPECS / "deployments" / f"{deployment}.kvspec").exists() else False


@pytest.mark.parametrize("cell", sorted(QUESTIONS))
@pytest.mark.parametrize("d", DEPLOYMENTS)
def test_every_deployment_answer_fits_and_one_more_does_not(answers, neighbours, d, cell):
    answer = answers[(cell, d)]
    check_contract(answer)
    assert (answer["block"], answer["cell"]) == (d, cell)
    fits_at, fits_past, eval_value, shortfall = neighbours[(cell, d)]
    if answer["constraint"] == "meets_targets":
        # solved against the workload's targets: the answer meets them and one more does not, when there is one
        assert answer["value"] is None or (fits_at is True and fits_past is False), answer
        assert answer["value"] is not None or "meets the workload's targets" in answer["message"]
        return
    if shortfall == 0 and eval_value == 0:
        # the engine holds no sequence of this context: no number, and a sentence
        assert answer["value"] is None and answer["message"]
        return
    if shortfall > 0:
        # nothing fits: no number, a sentence that says why and by how much
        assert answer["value"] is None
        assert "weights" in answer["message"] and "GiB" in answer["message"]
        assert f"{float(shortfall / GIB):.2f} GiB" in answer["message"]
        assert eval_value == 0
        return
    assert isinstance(answer["value"], int) and answer["value"] >= 1
    assert fits_at is True, f"{d}: {cell}={answer['value']} does not fit"
    assert fits_past is False, f"{d}: {cell}={answer['value'] + 1} fits too"
    assert answer["value"] == eval_value  # solve and the prelude's max_* agree
    assert answer["unit"] == ("tokens" if cell == "context" else None)
    assert answer["message"] is None or answer["message"].startswith("no closed form")


def test_catalog_has_deployments():
    assert len(DEPLOYMENTS) >= 9
    assert {"gpt_oss_120b_h100", "llama_3_1_405b_a100x4", "qwen3_8b_rtx4090"} <= set(DEPLOYMENTS)


def test_gpt_oss_120b_context_lies_past_its_window(answers):
    answer = answers[("context", "gpt_oss_120b_h100")]
    # by hand: H100 81,559 MiB x 0.9 less the weights (2.1e9 bf16 + 114.7e9 MXFP4 at 4.25 bits)
    weights = (Fraction("116.8e9") - Fraction("114.7e9")) * 2 + Fraction("114.7e9") * Fraction(17, 32)
    budget = 81559 * MIB * UTILIZATION - weights
    per_token = 18 * 8 * 2 * 64 * 2          # 18 full (and 18 sliding) layers, 8 KV heads of 64, fp16
    tokens = (budget / 8 - per_token * 128) / per_token   # past the window the sliding layers hold 128
    assert answer["value"] == floor(tokens / 16) * 16 == 40_000
    assert answer["value"] > 128
    regimes = answer["regimes"]
    assert len(regimes) == 2
    inside = [r for r in regimes if r["condition"] == "context <= 128"]
    past = [r for r in regimes if r["condition"] != "context <= 128"]
    assert len(inside) == 1 and inside[0]["active"] is False
    assert len(past) == 1 and past[0]["active"] is True
    assert re.fullmatch(r"128 < context|context > 128", past[0]["condition"])
    # past the window only the full layers grow: the closed form subtracts the window's bytes
    assert "model.window" in past[0]["expression"] and "full_bytes_per_token" in past[0]["expression"]


def test_block_rounding_in_the_context_answer(answers):
    paged = answers[("context", "llama_3_1_70b_h100x4_fp8")]["value"]
    assert paged % 16 == 0
    # by hand: (81,559 MiB x 0.9 - 70.55e9 x 2 / 4) / 8 sequences / (80 layers x 2 heads x 256 x 1 B)
    budget = 81559 * MIB * UTILIZATION - Fraction("70.55e9") * 2 / 4
    assert paged == floor(budget / 8 / (80 * 2 * 256) / 16) * 16 == 127_232
    unpaged = answers[("context", "qwen3_8b_rtx4090")]["value"]
    assert unpaged % 16 != 0
    budget = 24564 * MIB * UTILIZATION - Fraction("8.19e9") * 2
    assert unpaged == floor(budget / 8 / (36 * 8 * 256)) == 11_531


def test_library_solution_matches_the_cli(answers):
    program = build_program([CATALOG], [parse_setting("batch=8")])
    solution = solve(program, "gpt_oss_120b_h100", "context")
    assert solution.value == answers[("context", "gpt_oss_120b_h100")]["value"]
    assert isinstance(solution.value, int)
    assert solution.verified is True
    assert solve_json("--for", "context", "--set", "batch=8", "--block", "gpt_oss_120b_h100") == solution.to_json()
    nothing = solve(program, "llama_3_1_405b_a100x4", "context")
    assert nothing.value is None and nothing.verified is False
    assert "weights" in nothing.message


# ---------------------------------------------------------------------------
# worked examples: GPUs needed, bytes per element allowed
# ---------------------------------------------------------------------------

def test_solve_for_gpus_llama_405b():
    d = "llama_3_1_405b_a100x4"
    answer = solve_json("--for", "gpus", "--block", d, spec=own_spec(d))
    check_contract(answer)
    n = answer["value"]
    # by hand: the smallest n whose weights share and one 8K sequence fit in 80 GiB x 0.9;
    # KV heads per GPU are ceil(max(8 / n, 1)), 126 layers x heads x 256 x 8,192 x 2 B
    usable = 81920 * MIB * UTILIZATION
    hand = next(g for g in range(1, 100)
                if Fraction("405.9e9") * 2 / g + 126 * ceil(max(Fraction(8, g), 1)) * 256 * 8192 * 2 <= usable)
    assert n == hand == 11
    assert values_with(f"{d}.gpus={n}", spec=own_spec(d))[(d, "fits")] is True
    assert values_with(f"{d}.gpus={n - 1}", spec=own_spec(d))[(d, "fits")] is False
    # the boundary of the regimes is the KV-head count
    assert len(answer["regimes"]) == 2
    assert all(re.search(r"\b8\b", r["condition"]) for r in answer["regimes"])
    assert [r["active"] for r in answer["regimes"]].count(True) == 1
    active = next(r for r in answer["regimes"] if r["active"])
    assert re.fullmatch(r"8 <= gpus|gpus >= 8", active["condition"])


def test_solve_for_kv_bytes_per_element():
    d = "llama_3_1_70b_h100x4_fp8"
    answer = solve_json("--for", "kv_bytes_per_element", "--block", d, "--set", "batch=64", spec=own_spec(d))
    check_contract(answer)
    assert answer["unit"] == "bytes/element"
    # by hand: the KV budget over 64 sequences x 32K tokens x 80 layers x 2 heads x 256 elements
    budget = 81559 * MIB * UTILIZATION - Fraction("70.55e9") * 2 / 4
    hand = budget / (64 * 32768 * 80 * 2 * 256)
    assert answer["value"] == pytest.approx(float(hand), rel=1e-12)
    program = build_program([own_spec(d)], [parse_setting("batch=64")])
    exact = solve(program, d, "kv_bytes_per_element").value
    assert exact == hand
    for factor, fits in [(1, True), (Fraction(101, 100), False)]:
        value = exact * factor
        values = values_with("batch=64", f"{d}.kv_bytes_per_element={value.numerator}/{value.denominator} * 1 B/element",
                             spec=own_spec(d))
        assert values[(d, "kv_bytes_per_element")] == value
        assert values[(d, "fits")] is fits


# ---------------------------------------------------------------------------
# the JSON contract and --symbolic
# ---------------------------------------------------------------------------

def test_json_contract_of_several_answers(answers):
    for answer in answers.values():
        check_contract(answer)
    raw = invoke("solve", CATALOG, "--for", "batch", "--block", "mistral_7b_l4", "--json").stdout
    assert list(json.loads(raw)) == ["block", "cell", "expression", "value", "unit", "regimes", "message", "constraint", "windows"]


def test_symbolic_keeps_the_named_cell():
    d = "llama_3_1_70b_h100x4_fp8"
    answer = solve_json("--for", "context", "--block", d, "--symbolic", "batch", spec=own_spec(d))
    assert re.search(r"\bbatch\b", answer["expression"])
    assert answer["value"] == 42_400
    # a cell that is 0 drops out of the closed form unless it is kept
    d = "llama_3_1_405b_a100x4"
    plain = solve_json("--for", "gpus", "--block", d, spec=own_spec(d))
    kept = solve_json("--for", "gpus", "--block", d, "--symbolic", "reserve_bytes", spec=own_spec(d))
    assert "reserve_bytes" not in plain["expression"]
    assert "reserve_bytes" in kept["expression"]
    assert kept["value"] == plain["value"] == 11


def test_solve_text_keeps_every_line_indented():
    out = invoke("solve", CATALOG, "--for", "context", "--set", "batch=8", "--block", "jamba_a100x2").stdout
    lines = out.splitlines()
    assert lines[0] == "jamba_a100x2.context"
    assert all(line.startswith("  ") for line in lines[1:]), out


def test_max_batch_past_the_context_limit():
    d = "mistral_7b_l4"
    values = values_with(f"{d}.context=64K", spec=own_spec(d))
    max_batch = values[(d, "max_batch")]
    assert max_batch == 0 or values_with(f"{d}.context=64K", f"{d}.batch={max_batch}", spec=own_spec(d))[(d, "fits")] is True


# ---------------------------------------------------------------------------
# `?` cells
# ---------------------------------------------------------------------------

def unknown_spec(tmp_path: Path, body: str, model: str = "llama_3_1_70b", hardware: str = "h100_sxm") -> Path:
    path = tmp_path / "unknown.kvspec"
    path.write_text(textwrap.dedent(f"""\
        import "{SPECS / 'models' / (model + '.kvspec')}"
        import "{SPECS / 'hardware' / (hardware + '.kvspec')}"

        deployment q "Q" {{
            model = {model}
            hardware = {hardware}
        """) + textwrap.indent(textwrap.dedent(body), "    ") + "}\n", encoding="utf-8")
    return path


def test_unknown_batch_is_max_batch(tmp_path):
    path = unknown_spec(tmp_path, """\
        gpus = 4
        kv_dtype = fp8
        context = 32K
        batch = ?
    """)
    data = json.loads(invoke("eval", path, "--json").stdout)["blocks"]["q"]["cells"]
    assert data["batch"]["value"] == data["max_batch"]["value"] == 31
    assert data["fits"]["value"] is True
    text = invoke("eval", path).stdout
    assert re.search(r"^\s+batch\s+31(\s{2,}Concurrent sequences)?$", text, re.M)
    assert "=> fits: 31 sequences of 32,768 tokens (31 fit)" in text


def test_unknown_context(tmp_path):
    path = unknown_spec(tmp_path, """\
        gpus = 4
        kv_dtype = fp8
        batch = 24
        context = ?
    """)
    cells = json.loads(invoke("eval", path, "--json").stdout)["blocks"]["q"]["cells"]
    assert cells["context"]["value"] == cells["max_context"]["value"] == 42_400


def test_two_unknowns_in_one_block_is_an_error(tmp_path):
    path = unknown_spec(tmp_path, """\
        gpus = 4
        context = ?
        batch = ?
    """)
    result = invoke("eval", path, ok=False)
    assert result.exit_code == 1
    assert "two unknowns" in result.stderr
    assert "unknown.kvspec:9:5: error:" in result.stderr


def test_two_unknowns_report_one_error(tmp_path):
    path = unknown_spec(tmp_path, """\
        gpus = 4
        context = ?
        batch = ?
    """)
    result = invoke("eval", path, ok=False)
    assert result.stderr.count("error:") == 1, result.stderr


def test_unsolvable_unknown_is_a_positioned_error(tmp_path):
    path = unknown_spec(tmp_path, """\
        gpus = 4
        context = 8K
        batch = ?
    """, model="llama_3_1_405b", hardware="a100_80gb")
    result = invoke("eval", path, ok=False)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert re.match(r".*unknown\.kvspec:9:5: error: cannot solve `q\.batch`", lines[0]), result.stderr
    assert "weights" in lines[0] and "117.01 GiB" in lines[0]
    assert lines[1].strip() == "batch = ?"
    assert lines[2].strip().startswith("^")


# ---------------------------------------------------------------------------
# sweep
# ---------------------------------------------------------------------------

SWEEP_BLOCK = "llama_3_1_70b_h100x4_fp8"


@pytest.fixture(scope="module")
def sweep_rows():
    out = invoke("sweep", CATALOG, "--block", SWEEP_BLOCK, "--vary", "context=1K:128K:x2", "--vary", "batch=1:8").stdout
    reader = csv.reader(io.StringIO(out))
    header = next(reader)
    return header, [dict(zip(header, row)) for row in reader]


def test_sweep_grid_shape(sweep_rows):
    header, rows = sweep_rows
    assert header[:2] == ["context", "batch"]
    assert {"max_batch", "fits", "max_context", "kv_bytes_per_gpu"} <= set(header[2:])
    assert len(rows) == 8 * 8
    contexts = sorted({float(r["context"]) for r in rows})
    assert contexts == [1024 * 2**i for i in range(8)]
    assert sorted({float(r["batch"]) for r in rows}) == list(range(1, 9))


def test_sweep_rows_by_hand(sweep_rows):
    _, rows = sweep_rows
    budget = 81559 * MIB * UTILIZATION - Fraction("70.55e9") * 2 / 4
    for row in rows:
        context, batch = int(float(row["context"])), int(float(row["batch"]))
        sequence = 80 * 2 * 256 * 1 * context  # per GPU, fp8; every context here is a multiple of 16
        assert int(float(row["max_batch"])) == floor(budget / sequence)
        assert row["fits"] == ("1" if batch * sequence <= budget else "0")
        assert float(row["kv_bytes_per_gpu"]) == batch * sequence


@pytest.mark.parametrize("context,batch", [(1024, 1), (8192, 3), (32768, 8), (65536, 5), (131072, 1), (131072, 8)])
def test_sweep_rows_equal_eval(sweep_rows, context, batch):
    _, rows = sweep_rows
    row = next(r for r in rows if int(float(r["context"])) == context and int(float(r["batch"])) == batch)
    values = values_with(f"{SWEEP_BLOCK}.context={context}", f"{SWEEP_BLOCK}.batch={batch}", spec=own_spec(SWEEP_BLOCK))
    assert int(float(row["max_batch"])) == values[(SWEEP_BLOCK, "max_batch")]
    assert row["fits"] == ("1" if values[(SWEEP_BLOCK, "fits")] else "0")
    assert int(float(row["max_context"])) == values[(SWEEP_BLOCK, "max_context")]


def test_sweep_row_equals_cli_eval(sweep_rows):
    _, rows = sweep_rows
    row = next(r for r in rows if int(float(r["context"])) == 65536 and int(float(r["batch"])) == 8)
    out = invoke("eval", CATALOG, "--json", "--set", f"{SWEEP_BLOCK}.context=64K", "--set", f"{SWEEP_BLOCK}.batch=8").stdout
    cells = json.loads(out)["blocks"][SWEEP_BLOCK]["cells"]
    assert int(float(row["max_batch"])) == cells["max_batch"]["value"]
    assert row["fits"] == ("1" if cells["fits"]["value"] else "0")


def test_sweep_out_refuses_to_overwrite(tmp_path):
    target = tmp_path / "sweep.csv"
    target.write_text("keep me\n")
    args = ["sweep", CATALOG, "--block", SWEEP_BLOCK, "--vary", "batch=1:4", "--out", target]
    refused = invoke(*args, ok=False)
    assert refused.exit_code != 0
    assert "--force" in refused.stderr
    assert target.read_text() == "keep me\n"
    invoke(*args, "--force")
    lines = target.read_text().splitlines()
    assert lines[0].startswith("batch,") and len(lines) == 1 + 4
    fresh = tmp_path / "fresh.csv"
    invoke("sweep", CATALOG, "--block", SWEEP_BLOCK, "--vary", "batch=1:4", "--out", fresh)
    assert fresh.read_text() == target.read_text()


def test_sweep_of_a_million_points():
    out = invoke("sweep", CATALOG, "--block", SWEEP_BLOCK, "--vary", "context=1:1000000", "--json").stdout
    summary = json.loads(out)
    assert summary["points"] == 1_000_000
    assert summary["varied"] == ["context"]
    assert {"fits", "max_batch"} <= set(summary["results"])


# ---------------------------------------------------------------------------
# explain
# ---------------------------------------------------------------------------

def _prelude_line(name: str, cell: str):
    """(line number, text after `=`) of `cell`'s rule in prelude file `name`."""
    for number, line in enumerate((PRELUDE / name).read_text().splitlines(), 1):
        if re.match(rf"\s*{cell}\s*=", line):
            return number, line.split("=", 1)[1].split("#")[0].strip()
    raise AssertionError(f"{cell} not in {name}")


@pytest.fixture(scope="module")
def explanation() -> str:
    return invoke("explain", CATALOG, "max_batch", "--block", SWEEP_BLOCK).stdout


def test_explain_shows_the_formula_where_it_is_written(explanation):
    lines = explanation.splitlines()
    assert lines[0] == f"{SWEEP_BLOCK}.max_batch = 31"
    assert lines.pop(1).startswith("Concurrent users that fit: ")  # its label
    # the deployment's max_batch is what its engine's cache holds, at most its scheduler's limit (here the ideal
    # accounting's, which has none)
    number, formula = next((i, line.split("=", 1)[1].strip()) for i, line in enumerate((PRELUDE / "engines.kvspec").read_text().splitlines(), 1)
                           if line.strip().startswith("max_batch = if") and "engine_max_batch_size" in line)
    assert lines[1].startswith(f"max_batch = {formula}")
    assert f"engines.kvspec:{number}]" in lines[1]
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("ideal_max_batch = "))
    number, formula = _prelude_line("deployment.kvspec", "ideal_max_batch")
    assert lines[at].strip().startswith(f"ideal_max_batch = {formula}")
    assert f"deployment.kvspec:{number}]" in lines[at]
    # the branch the values take (32,768 tokens is within the context limit), substituted,
    # then the value (by hand: 38.83 GiB budget, 80 x 512 x 32,768 x 1 B = 1.25 GiB)
    budget = 81559 * MIB * UTILIZATION - Fraction("70.55e9") * 2 / 4
    assert lines[at + 1].strip() == (f"= max(floor({float(budget / GIB):.2f} GiB / {80 * 512 * 32768 / GIB:.2f} GiB), 0) * 1"
                                     "  (as 32,768 tokens <= 131,072 tokens)")
    assert lines[at + 2].strip() == "= 31"
    for cell in ("kv_budget_bytes_per_gpu", "kv_bytes_per_sequence_per_gpu", "paged_context"):
        number, _ = _prelude_line("deployment.kvspec", cell)
        assert re.search(rf"^\s+{cell} = .*deployment\.kvspec:{number}\]$", explanation, re.M), cell


def test_explain_follows_into_the_model_spec(explanation):
    model_file = "llama_3_1_70b.kvspec"
    for cell, literal in (("layers", "80"), ("kv_heads", "8"), ("head_dim", "128"), ("params", "70,550,000,000")):
        number = next(i for i, line in enumerate((SPECS / "models" / model_file).read_text().splitlines(), 1)
                      if re.match(rf"\s*{cell}\s*=", line))
        assert re.search(rf"^\s+model\.{cell} = {literal}  \(input\) \[.*{model_file}:{number}\]$", explanation, re.M), cell
    assert re.search(r"^\s+hardware\.memory = 79\.65 GiB  \(input\) \[.*h100_sxm\.kvspec:\d+\]$", explanation, re.M)
    # prelude defaults the model inherits point at the prelude's model.kvspec
    assert re.search(r"model\.sliding_layers = 0  \(input\) \[.*model\.kvspec:\d+\]", explanation)


@pytest.mark.parametrize("op", ["<", "<=", ">", ">="])
@pytest.mark.parametrize("a, b", [(3, -24), (-3, 24), (2, 5), (-7, -1), ("1/3", "-5/2"), (1, 0)])
def test_a_linear_regime_bound_reads_as_sympy_writes_it(op, a, b):
    import sympy as sp

    from kvdsl.solve_algebra import linear_bound

    x = sp.Symbol("gpus")
    condition = sp.Rel(sp.Rational(a) * x + sp.Rational(b), 0, op)
    expected = sp.solve_univariate_inequality(condition, x, relational=True)
    expected = expected.subs({sp.Lt(x, sp.oo): sp.true, sp.Lt(-sp.oo, x): sp.true})
    assert sp.sstr(linear_bound(condition, x)) == sp.sstr(expected)
