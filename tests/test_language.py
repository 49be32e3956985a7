"""Every construct of the kvspec language, checked through exact evaluation.

Each test writes a small spec into `tmp_path` and evaluates it with
`kvdsl.api.evaluate_paths`, which gives exact values: Fractions for numbers,
bools for conditions, strings for text and block references, None for `?`.
Only cells written by the tests (or the few prelude cells whose meaning the
language itself fixes, such as `window` and `layers`) are asserted, so the
tests do not break when the prelude's formulas change.
"""

from __future__ import annotations

import textwrap
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvdsl.api import evaluate_paths, parse_setting
from kvdsl.cli import main
from kvdsl.errors import (
    CycleError,
    DimensionError,
    ImportFailure,
    KvdslError,
    MissingCellError,
    ReferenceKindError,
    UnknownNameError,
    UsageError,
    flatten,
)

GIB = 2**30

# The four cells every model must set (the prelude declares them `: number`).
REQUIRED = "layers = 2\nheads = 4\nhead_dim = 8\nparams = 1e9\n"


def write(directory: Path, text: str, name: str = "spec.kvspec") -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def model(cells: str = "", name: str = "m", title: str = "M", required: str = REQUIRED) -> str:
    """A model block with the required cells plus `cells`."""
    body = textwrap.indent(required + textwrap.dedent(cells), "    ")
    return f'model {name} "{title}" {{\n{body}}}\n'


HARDWARE = 'hardware h "H" {\n    memory = 80 GiB\n    bandwidth = 3.35 TB/s\n}\n'


def run(tmp_path: Path, text: str, settings=(), name: str = "spec.kvspec"):
    """(program, values) for one spec text."""
    path = write(tmp_path, text, name)
    return evaluate_paths([str(path)], [parse_setting(s) for s in settings])


def values_of(tmp_path: Path, text: str, settings=()):
    return run(tmp_path, text, settings)[1]


def errors_of(tmp_path: Path, text: str, settings=(), files=None) -> list:
    """Every error the spec produces (it must produce at least one)."""
    for name, content in (files or {}).items():
        write(tmp_path, content, name)
    with pytest.raises(KvdslError) as info:
        run(tmp_path, text, settings)
    return flatten(info.value)


def unit(program, block: str, cell: str):
    dim = program.cells[(block, cell)].dim
    return dim.unit() if hasattr(dim, "unit") else None


def exact(value) -> Fraction:
    """A number value, checked to be an exact Fraction (never a float or bool)."""
    assert isinstance(value, Fraction) and not isinstance(value, bool), repr(value)
    return value


# ---- inputs and units -------------------------------------------------------

UNITS = [
    ("1 B", 1, "bytes"),
    ("3 bytes", 3, "bytes"),
    ("2 KB", 2000, "bytes"),
    ("2 MB", 2 * 10**6, "bytes"),
    ("2 GB", 2 * 10**9, "bytes"),
    ("2 TB", 2 * 10**12, "bytes"),
    ("2 KiB", 2 * 1024, "bytes"),
    ("2 MiB", 2 * 1024**2, "bytes"),
    ("2 GiB", 2 * 1024**3, "bytes"),
    ("2 TiB", 2 * 1024**4, "bytes"),
    ("12 bits", Fraction(3, 2), "bytes"),
    ("1 bit", Fraction(1, 8), "bytes"),
    ("7 tokens", 7, "tokens"),
    ("1 token", 1, "tokens"),
    ("32K tokens", 32768, "tokens"),
    ("32K", 32768, "tokens"),
    ("1M tokens", 1048576, "tokens"),
    ("2M", 2 * 1048576, "tokens"),
    ("5 elements", 5, "elements"),
    ("2 s", 2, "seconds"),
    ("3 seconds", 3, "seconds"),
    ("5 ms", Fraction(5, 1000), "seconds"),
    ("10 B/s", 10, "bytes/s"),
    ("2 GB/s", 2 * 10**9, "bytes/s"),
    ("3.35 TB/s", 3350 * 10**9, "bytes/s"),
    ("1 KiB/s", 1024, "bytes/s"),
    ("3 elements/token", 3, "elements/token"),
    ("90%", Fraction(9, 10), None),
    ("12.5%", Fraction(1, 8), None),
    ("42", 42, None),
    ("1_000_000", 10**6, None),
    (".5", Fraction(1, 2), None),
    ("1e3", 1000, None),
    ("2.5e-3", Fraction(1, 400), None),
]


@pytest.mark.parametrize("literal, expected, expected_unit", UNITS, ids=[u[0] for u in UNITS])
def test_input_units(tmp_path, literal, expected, expected_unit):
    program, values = run(tmp_path, model(f"let x = {literal}\n"))
    assert exact(values[("m", "x")]) == expected
    assert unit(program, "m", "x") == expected_unit
    assert program.cells[("m", "x")].form == "input"


def test_units_convert_in_arithmetic(tmp_path):
    program, values = run(tmp_path, model("""
        let a = 1 GiB + 512 MiB
        let b = 1 GB - 1 MB
        let c = 16 bits / 1 element
        let d = 80 GiB / (2 TB/s)
        let e = 3 GiB / 1 GiB
    """))
    assert values[("m", "a")] == 3 * GIB // 2
    assert values[("m", "b")] == 999 * 10**6
    assert values[("m", "c")] == 2 and unit(program, "m", "c") == "bytes/element"
    assert values[("m", "d")] == Fraction(80 * GIB, 2 * 10**12) and unit(program, "m", "d") == "seconds"
    assert values[("m", "e")] == 3 and unit(program, "m", "e") is None


# ---- arithmetic and precedence -------------------------------------------------

ARITHMETIC = [
    ("-2^2", -4),
    ("2^3^2", 512),
    ("(2^3)^2", 64),
    ("(-2)^2", 4),
    ("2^-1", Fraction(1, 2)),
    ("2 + 3 * 4", 14),
    ("(2 + 3) * 4", 20),
    ("2 * 3 ^ 2", 18),
    ("10 - 4 - 3", 3),
    ("10 - (4 - 3)", 9),
    ("12 / 4 / 3", 1),
    ("12 / (4 / 2)", 6),
    ("1 / 3", Fraction(1, 3)),
    ("-2 * 3", -6),
    ("- -2", 2),
    ("7 - -2", 9),
    ("2 * (3 + (4 - 1)) / 4", 3),
    ("min(3, 1, 2)", 1),
    ("max(3, 1, 2)", 3),
    ("min(5)", 5),
    ("floor(7 / 2)", 3),
    ("floor(-7 / 2)", -4),
    ("ceil(7 / 2)", 4),
    ("ceil(-7 / 2)", -3),
    ("abs(-5)", 5),
    ("abs(3 - 10) + 1", 8),
    ("max(min(4, 9), floor(5 / 2))", 4),
]


@pytest.mark.parametrize("expr, expected", ARITHMETIC, ids=[a[0] for a in ARITHMETIC])
def test_arithmetic(tmp_path, expr, expected):
    values = values_of(tmp_path, model(f"let x = {expr}\n"))
    assert exact(values[("m", "x")]) == expected


def test_functions_keep_units(tmp_path):
    program, values = run(tmp_path, model("""
        let a = min(3 GiB, 2 GiB)
        let b = max(1 GB, 1 GiB)
        let c = ceil(100 tokens / 16 tokens) * 16 tokens
        let d = abs(-5 GiB)
        let e = floor(10 GB / 3)
    """))
    assert values[("m", "a")] == 2 * GIB and unit(program, "m", "a") == "bytes"
    assert values[("m", "b")] == GIB
    assert values[("m", "c")] == 112 and unit(program, "m", "c") == "tokens"
    assert values[("m", "d")] == 5 * GIB
    assert values[("m", "e")] == 3333333333 and unit(program, "m", "e") == "bytes"


def test_operator_may_end_a_line(tmp_path):
    values = values_of(tmp_path, model("""
        let x = 2 *
            3 +
            4
        let y = max(1,
                2)
        let z = 1 + \\
            1
    """))
    assert values[("m", "x")] == 10
    assert values[("m", "y")] == 2
    assert values[("m", "z")] == 2


def test_semicolons_separate_cells_and_comments_are_ignored(tmp_path):
    values = values_of(tmp_path, model("let a = 1; let b = 2   # a comment\n# a whole-line comment\nlet c = a + b\n"))
    assert values[("m", "c")] == 3


def test_crlf_line_endings(tmp_path):
    text = model("let x = layers * 3\n").replace("\n", "\r\n")
    path = tmp_path / "crlf.kvspec"
    path.write_bytes(text.encode())
    _, values = evaluate_paths([str(path)])
    assert values[("m", "x")] == 6


def test_order_of_cells_does_not_matter(tmp_path):
    values = values_of(tmp_path, model("""
        let c = b * 2
        let b = a + 1
        let a = layers * 10
    """))
    assert values[("m", "c")] == 42


# ---- conditions, booleans, comparisons -------------------------------------------

CONDITIONS = [
    ("1 < 2", True),
    ("2 < 1", False),
    ("2 <= 2", True),
    ("3 <= 2", False),
    ("2 > 1", True),
    ("1 > 2", False),
    ("2 >= 2", True),
    ("1 >= 2", False),
    ("2 == 2", True),
    ("2 == 3", False),
    ("2 != 3", True),
    ("2 != 2", False),
    ("1 GiB > 1 GB", True),
    ("1024 MiB == 1 GiB", True),
    ("32K == 32768 tokens", True),
    ("true", True),
    ("false", False),
    ("not true", False),
    ("not not true", True),
    ("true and false", False),
    ("true and true", True),
    ("false or true", True),
    ("false or false", False),
    ("true or false and false", True),  # `and` binds tighter than `or`
    ("(true or false) and false", False),
    ("not true or true", True),  # `not` binds tighter than `or`
    ("not (true or true)", False),
    ("1 + 2 < 4 and 3 > 2", True),  # comparison binds tighter than `and`
    ("not 1 > 2", True),
    ("true == false", False),
    ("true != false", True),
]


@pytest.mark.parametrize("expr, expected", CONDITIONS, ids=[c[0] for c in CONDITIONS])
def test_conditions(tmp_path, expr, expected):
    program, values = run(tmp_path, model(f"let x = {expr}\n"))
    assert values[("m", "x")] is expected
    assert unit(program, "m", "x") is None


def test_boolean_cells_feed_conditions(tmp_path):
    values = values_of(tmp_path, model("""
        let flag = true
        let other = not flag
        let pick = if flag and not other then 1 else 2
    """))
    assert values[("m", "flag")] is True
    assert values[("m", "other")] is False
    assert values[("m", "pick")] == 1


def test_if_then_else(tmp_path):
    program, values = run(tmp_path, model("""
        let a = if layers > 1 then 10 else 20
        let b = if layers > 5 then 10 else 20
        let c = if layers == 2 then 4 GiB else 8 GiB
        let d = 1 + (if true then 2 else 3) * 10
    """))
    assert values[("m", "a")] == 10
    assert values[("m", "b")] == 20
    assert values[("m", "c")] == 4 * GIB and unit(program, "m", "c") == "bytes"
    assert values[("m", "d")] == 21


@pytest.mark.parametrize("x, expected", [(20, 1), (5, 2), (2, 3), (0, 4)])
def test_else_if_chain_across_lines(tmp_path, x, expected):
    values = values_of(tmp_path, model(f"""
        let x = {x}
        let c = if x > 10 then 1
            else if x > 3 then 2
            else if x > 1
                then 3
            else
                4
    """))
    assert values[("m", "c")] == expected


def test_only_the_chosen_branch_is_evaluated(tmp_path):
    values = values_of(tmp_path, model("""
        let z = 0
        let safe = if z == 0 then 0 else 5 / z
        let lazy = z == 0 or 5 / z > 1
        let lazy_and = z != 0 and 5 / z > 1
    """))
    assert values[("m", "safe")] == 0
    assert values[("m", "lazy")] is True
    assert values[("m", "lazy_and")] is False


# ---- text and unknown cells --------------------------------------------------------


def test_text_cells(tmp_path):
    program, values = run(tmp_path, model('''
        source = "meta-llama/x config.json"
        let quoted = "say \\"hi\\" = 1"
        let empty = ""
    '''))
    assert values[("m", "source")] == "meta-llama/x config.json"
    assert values[("m", "quoted")] == 'say "hi" = 1'
    assert values[("m", "empty")] == ""
    assert unit(program, "m", "source") is None


def test_block_title_with_escaped_quotes(tmp_path):
    program, _ = run(tmp_path, model(title='Big \\"M\\"'))
    assert program.blocks["m"].title == 'Big "M"'


def test_unknown_cells_have_no_value_before_solving(tmp_path):
    from kvdsl.api import build_program
    from kvdsl.evaluate import evaluate

    path = write(tmp_path, model("""
        let u = ?
        let du = u + 1
        let cu = u > 3
        let independent = layers + 1
    """))
    program = build_program([str(path)])
    values = evaluate(program)
    assert values[("m", "u")] is None
    assert values[("m", "du")] is None
    assert values[("m", "cu")] is None
    assert values[("m", "independent")] == 3


def test_unknown_keeps_the_dimension_it_overrides(tmp_path):
    from kvdsl.api import build_program

    program = build_program([str(write(tmp_path, model("context = ?\n")))])
    assert program.cells[("m", "context")].form == "unknown"
    assert unit(program, "m", "context") == "tokens"


DEPLOYMENT = model(required="layers = 80\nheads = 64\nkv_heads = 8\nhead_dim = 128\nparams = 70.55e9\n") + HARDWARE + (
    'deployment d "D" {\n    model = m\n    hardware = h\n    gpus = 4\n    kv_dtype = fp8\n    context = 32K\n    batch = BATCH\n}\n')


def test_unknown_batch_is_solved_against_fits(tmp_path):
    program, values = run(tmp_path, DEPLOYMENT.replace("BATCH", "?"))
    assert program.cells[("d", "batch")].form == "unknown"
    assert values[("d", "batch")] == values[("d", "max_batch")] == 31
    assert values[("d", "fits")] is True


def test_solved_value_is_a_fraction(tmp_path):
    _, values = run(tmp_path, DEPLOYMENT.replace("BATCH", "?"))
    exact(values[("d", "batch")])


def test_unknown_without_fits_cannot_be_solved(tmp_path):
    from kvdsl.errors import SolveError

    errors = errors_of(tmp_path, model("let u = ?\n"))
    assert errors and all(isinstance(e, SolveError) for e in errors)
    assert any("`u = ?` needs a `fits` constraint" in e.message for e in errors)


# ---- declarations and defaults ---------------------------------------------------


def test_declared_cells_are_required(tmp_path):
    text = "defaults model {\n    vocab: number\n    spill: bytes\n}\n" + model("vocab = 5\nspill = 100\n")
    program, values = run(tmp_path, text)
    assert values[("m", "vocab")] == 5
    assert values[("m", "spill")] == 100
    assert unit(program, "m", "spill") == "bytes"  # a bare number takes the declared unit


def test_missing_declared_cell_is_an_error(tmp_path):
    errors = errors_of(tmp_path, "defaults model {\n    vocab: number\n}\n" + model())
    assert len(errors) == 1
    assert isinstance(errors[0], MissingCellError)
    assert "vocab" in errors[0].message and "`m`" in errors[0].message


def test_prelude_requires_layers(tmp_path):
    errors = errors_of(tmp_path, model(required="heads = 4\nhead_dim = 8\nparams = 1e9\n"))
    assert [type(e) for e in errors] == [MissingCellError]
    assert "`layers`" in errors[0].message
    assert errors[0].span.path.endswith("spec.kvspec")


def test_declared_dimension_is_enforced(tmp_path):
    errors = errors_of(tmp_path, "defaults model {\n    spill: bytes\n}\n" + model("spill = 5 tokens\n"))
    assert any(isinstance(e, DimensionError) for e in errors)


def test_override_with_wrong_unit_points_at_the_override(tmp_path):
    errors = errors_of(tmp_path, model("window = 5 GiB\n"))
    assert all(e.span.path.endswith("spec.kvspec") for e in errors), [e.render() for e in errors]


def test_user_defaults_override_the_prelude_for_every_block(tmp_path):
    text = (
        "defaults model {\n    context = 8K\n    kv_dtype = fp8\n    let extra = layers * 100\n}\n"
        + model(name="a")
        + model(name="b", required="layers = 3\nheads = 1\nhead_dim = 1\nparams = 1\n")
        + model("context = 1K\n", name="c")
    )
    program, values = run(tmp_path, text)
    for block in ("a", "b"):
        assert values[(block, "context")] == 8192
        assert unit(program, block, "context") == "tokens"
        assert values[(block, "kv_dtype")] == "fp8"
    assert values[("c", "context")] == 1024  # a block's own cell beats every default
    assert values[("c", "kv_dtype")] == "fp8"
    assert values[("a", "extra")] == 200 and values[("b", "extra")] == 300
    assert values[("a", "kv_heads")] == 4  # the prelude's other defaults still apply


def test_defaults_for_deployments(tmp_path):
    text = model() + HARDWARE + (
        "defaults deployment {\n    gpus = 8\n}\n"
        'deployment d "D" {\n    model = m\n    hardware = h\n}\n'
        'deployment e "E" {\n    model = m\n    hardware = h\n    gpus = 2\n}\n'
    )
    values = values_of(tmp_path, text)
    assert values[("d", "gpus")] == 8
    assert values[("e", "gpus")] == 2


def test_bare_number_override_takes_the_unit_of_the_cell(tmp_path):
    text = model("window = 4096\ncontext = 1000\n") + HARDWARE + (
        'deployment d "D" {\n    model = m\n    hardware = h\n    context = 8192\n}\n'
    )
    program, values = run(tmp_path, text)
    assert values[("m", "window")] == 4096 and unit(program, "m", "window") == "tokens"
    assert values[("m", "context")] == 1000 and unit(program, "m", "context") == "tokens"
    assert values[("d", "context")] == 8192 and unit(program, "d", "context") == "tokens"


# ---- extends ------------------------------------------------------------------------


def test_extends_changes_a_few_cells(tmp_path):
    text = model("let x = layers * kv_heads\n") + (
        'model m2 "M2" extends m {\n    kv_heads = 1\n}\n'
        'model m3 "M3" extends m2 {\n    layers = 6\n    let note = "third"\n}\n'
    )
    program, values = run(tmp_path, text)
    assert values[("m", "x")] == 8
    assert values[("m2", "x")] == 2  # the parent's rule, recomputed with the child's cells
    assert values[("m2", "layers")] == 2 and values[("m2", "head_dim")] == 8
    assert values[("m3", "x")] == 6  # kv_heads from m2, layers of its own
    assert values[("m3", "note")] == "third"
    assert program.blocks["m3"].title == "M3"
    assert values[("m", "kv_heads")] == 4  # the parent is unchanged


def test_extends_cycle_is_an_error(tmp_path):
    text = 'model a "A" extends b {\n    layers = 1\n}\nmodel b "B" extends a {\n    heads = 1\n}\n'
    errors = errors_of(tmp_path, text)
    cycles = [e for e in errors if isinstance(e, CycleError)]
    assert cycles and all("a" in e.message and "b" in e.message for e in cycles)


def test_extends_unknown_block_is_an_error(tmp_path):
    errors = errors_of(tmp_path, model() + 'model m2 "M2" extends mm {\n    kv_heads = 1\n}\n')
    unknown = [e for e in errors if isinstance(e, UnknownNameError)]
    assert len(unknown) == 1
    assert "mm" in unknown[0].message and unknown[0].hint == "did you mean `m`?"


def test_extends_a_block_of_another_kind_is_an_error(tmp_path):
    errors = errors_of(tmp_path, model() + 'hardware h "H" extends m {\n    memory = 1 GiB\n}\n')
    assert any(isinstance(e, ReferenceKindError) for e in errors)


@pytest.mark.parametrize("text", [
    'model a "A" extends b {\n    layers = 1\n}\nmodel b "B" extends a {\n    heads = 1\n}\n',
    model() + 'model m2 "M2" extends mm {\n    kv_heads = 1\n}\n',
], ids=["cycle", "unknown"])
def test_broken_extends_reports_no_missing_cells(tmp_path, text):
    errors = errors_of(tmp_path, text)
    assert not any(isinstance(e, MissingCellError) for e in errors), [e.render() for e in errors]


# ---- imports ----------------------------------------------------------------------------


def test_import_relative_paths_once(tmp_path, monkeypatch):
    write(tmp_path, HARDWARE, "lib/hw/h.kvspec")
    write(tmp_path, 'import "hw/h.kvspec"\n' + model(), "lib/m.kvspec")
    main_spec = write(tmp_path, (
        'import "lib/m.kvspec"\n'
        'import "lib/hw/h.kvspec"\n'
        'import "./lib/hw/../hw/h.kvspec"\n'
        'deployment d "D" {\n    model = m\n    hardware = h\n    let x = model.layers + hardware.memory / 1 GiB\n}\n'
    ), "plan/../main.kvspec")
    monkeypatch.chdir(tmp_path / "lib")  # imports are relative to the importing file, not the cwd
    program, values = evaluate_paths([str(main_spec)])
    assert values[("d", "x")] == 82
    assert sorted(b.name for b in program.user_blocks()) == ["d", "h", "m"]


def test_a_file_given_twice_is_loaded_once(tmp_path):
    path = write(tmp_path, model())
    program, _ = evaluate_paths([str(path), str(path)])
    assert [b.name for b in program.user_blocks()] == ["m"]


def test_import_cycle_is_reported(tmp_path):
    write(tmp_path, 'import "spec.kvspec"\n' + HARDWARE, "other.kvspec")
    errors = errors_of(tmp_path, 'import "other.kvspec"\n' + model())
    assert len(errors) == 1 and isinstance(errors[0], ImportFailure)
    assert "import cycle" in errors[0].message
    assert "spec.kvspec" in errors[0].message and "other.kvspec" in errors[0].message


def test_missing_import_is_reported(tmp_path):
    errors = errors_of(tmp_path, 'import "nope/missing.kvspec"\n' + model())
    assert len(errors) == 1 and isinstance(errors[0], ImportFailure)
    assert "missing.kvspec" in errors[0].message and "not found" in errors[0].message
    assert errors[0].span.line == 1


# ---- layer patterns --------------------------------------------------------------------

PATTERN_REQUIRED = "heads = 4\nhead_dim = 8\nparams = 1\n"


def test_layer_pattern(tmp_path):
    program, values = run(tmp_path, model("layer_kinds = [sliding(128), full] * 12\n", required=PATTERN_REQUIRED))
    assert values[("m", "sliding_layers")] == 12
    assert values[("m", "full_layers")] == 12
    assert values[("m", "layers")] == 24
    assert values[("m", "window")] == 128 and unit(program, "m", "window") == "tokens"
    assert values[("m", "layer_kinds")] == "[sliding(128), full] * 12"


def test_nested_layer_pattern(tmp_path):
    values = values_of(tmp_path, model(
        "layer_kinds = [[sliding(1024)] * 5, full] * 10 + [sliding(1024)] * 2\n", required=PATTERN_REQUIRED))
    assert values[("m", "layers")] == 62
    assert values[("m", "sliding_layers")] == 52
    assert values[("m", "full_layers")] == 10
    assert values[("m", "window")] == 1024


def test_layer_pattern_with_units_and_matching_layers(tmp_path):
    values = values_of(tmp_path, model(
        "layer_kinds = [sliding(4K tokens), full]\nlayers = 2\n", required=PATTERN_REQUIRED))
    assert values[("m", "layers")] == 2
    assert values[("m", "window")] == 4096


def test_layer_pattern_mismatching_layers_is_an_error(tmp_path):
    errors = errors_of(tmp_path, model("layer_kinds = [sliding(128), full] * 12\nlayers = 20\n", required=PATTERN_REQUIRED))
    assert len(errors) == 1
    assert "24" in errors[0].message and "20" in errors[0].message


def test_layer_pattern_mismatching_layers_expression_is_an_error(tmp_path):
    errors_of(tmp_path, model("layer_kinds = [sliding(128), full] * 12\nlayers = 10 + 10\n", required=PATTERN_REQUIRED))


def test_child_pattern_replaces_parent_pattern(tmp_path):
    text = model("layer_kinds = [sliding(128), full] * 12\n", required=PATTERN_REQUIRED) + (
        'model m2 "M2" extends m {\n    layer_kinds = [full] * 4\n}\n')
    values = values_of(tmp_path, text)
    assert values[("m2", "layers")] == 4
    assert values[("m2", "full_layers")] == 4
    assert values[("m2", "sliding_layers")] == 0


def test_unknown_layer_kind_is_an_error(tmp_path):
    errors_of(tmp_path, model("layer_kinds = [sliding(128), fulll] * 2\n", required=PATTERN_REQUIRED))


def test_pattern_window_in_bytes_points_at_the_pattern(tmp_path):
    errors = errors_of(tmp_path, model("layer_kinds = [sliding(128 GiB), full] * 2\n", required=PATTERN_REQUIRED))
    assert all(e.span.path.endswith("spec.kvspec") for e in errors), [e.render() for e in errors]


# ---- references ---------------------------------------------------------------------------


def test_references_across_blocks_and_through_reference_cells(tmp_path):
    text = model("let hw = h\nlet per_layer = h.memory / layers\nlet via = hw.memory\n") + HARDWARE + (
        'deployment d "D" {\n'
        "    model = m\n    hardware = h\n    kv_dtype = fp8\n"
        "    let a = model.layers * 10\n"
        "    let b = m.heads\n"
        "    let c = model.kv_dtype.payload_bits\n"  # two hops: d.model -> m, m.kv_dtype -> fp16
        "    let e = kv_dtype.payload_bits\n"
        "    let f = model.hw.memory\n"
        "}\n"
    )
    program, values = run(tmp_path, text)
    assert values[("m", "hw")] == "h"
    assert values[("m", "per_layer")] == 40 * GIB and unit(program, "m", "per_layer") == "bytes"
    assert values[("m", "via")] == 80 * GIB
    assert values[("d", "model")] == "m" and values[("d", "hardware")] == "h"
    assert values[("d", "a")] == 20
    assert values[("d", "b")] == 4
    assert values[("d", "c")] == 16
    assert values[("d", "e")] == 8
    assert values[("d", "f")] == 80 * GIB


# ---- exactness ------------------------------------------------------------------------------


def test_exact_arithmetic(tmp_path):
    values = values_of(tmp_path, model("""
        let usable = 0.9 * 80 GiB
        let big = 70.55e9
        let third = 1 / 3 * 3
        let tenth = 0.1 + 0.2
        let pct = 90% * 80 GiB
    """))
    assert exact(values[("m", "usable")]) == Fraction("0.9") * 80 * 2**30
    assert values[("m", "usable")] == 77309411328
    assert exact(values[("m", "big")]) == 70550000000 and values[("m", "big")].denominator == 1
    assert values[("m", "third")] == 1
    assert values[("m", "tenth")] == Fraction(3, 10)
    assert values[("m", "pct")] == values[("m", "usable")]


# ---- --set ---------------------------------------------------------------------------------

SET_SPEC = model() + model(name="n", required="layers = 3\nheads = 2\nhead_dim = 4\nparams = 1\n") + HARDWARE + (
    'deployment d "D" {\n    model = m\n    hardware = h\n    let x = hardware.memory / 1 GiB\n}\n')


def test_set_global_applies_to_every_block_with_the_cell(tmp_path):
    program, values = run(tmp_path, SET_SPEC, ["context=8192"])
    for block in ("m", "n", "d"):
        assert values[(block, "context")] == 8192
        assert unit(program, block, "context") == "tokens"


def test_set_one_block(tmp_path):
    values = values_of(tmp_path, SET_SPEC, ["n.context=32K", "d.gpus=4"])
    assert values[("n", "context")] == 32768
    assert values[("d", "gpus")] == 4


def test_set_only_touches_the_named_block(tmp_path):
    values = values_of(tmp_path, SET_SPEC, ["n.context=1234"])
    assert values[("n", "context")] == 1234
    assert values[("m", "context")] != 1234


def test_set_with_units_and_format_names(tmp_path):
    values = values_of(tmp_path, SET_SPEC, ["h.memory=40 GiB", "kv_dtype=fp8"])
    assert values[("h", "memory")] == 40 * GIB
    assert values[("d", "x")] == 40
    for block in ("m", "n", "d"):
        assert values[(block, "kv_dtype")] == "fp8"


def test_set_last_one_wins(tmp_path):
    values = values_of(tmp_path, SET_SPEC, ["gpus=2", "gpus=4"])
    assert values[("d", "gpus")] == 4


def test_set_expression(tmp_path):
    values = values_of(tmp_path, SET_SPEC, ["m.heads=layers * 8"])
    assert values[("m", "heads")] == 16


@pytest.mark.parametrize("setting, fragment, hint", [
    ("let contxt=8192", "no block has a cell `contxt`", "did you mean `context`?"),
    ("d.contxt=8192", "deployment `d` has no cell `contxt`", "did you mean `context`?"),
    ("dd.context=8192", "no block named `dd`", "did you mean `d`?"),
])
def test_set_unknown_cell_or_block(tmp_path, setting, fragment, hint):
    with pytest.raises(UsageError) as info:
        run(tmp_path, SET_SPEC, [setting])
    assert fragment in info.value.message
    assert info.value.hint == hint


@pytest.mark.parametrize("setting, fragment", [
    ("let contxt=8192", "did you mean `context`?"),
    ("d.contxt=1", "did you mean `context`?"),
    ("dd.gpus=1", "did you mean `d`?"),
    ("context", "--set needs NAME=VALUE"),
    ("context=", "--set needs NAME=VALUE"),
    ("context=$", "unexpected character"),
])
def test_set_usage_errors_exit_2(tmp_path, setting, fragment):
    path = write(tmp_path, SET_SPEC)
    result = CliRunner().invoke(main, ["eval", str(path), "--set", setting])
    assert result.exit_code == 2, result.output
    assert fragment in result.stderr
    assert "Traceback" not in result.output


def test_set_through_the_cli(tmp_path):
    path = write(tmp_path, SET_SPEC)
    result = CliRunner().invoke(main, ["eval", str(path), "--json", "--set", "d.gpus=2", "--set", "h.memory=40 GiB"])
    assert result.exit_code == 0, result.output
    assert '"gpus": {\n          "value": 2,' in result.stdout


def test_set_with_wrong_unit_is_a_usage_error(tmp_path):
    path = write(tmp_path, SET_SPEC)
    result = CliRunner().invoke(main, ["eval", str(path), "--set", "context=1 GiB"])
    assert result.exit_code == 2
    assert result.stderr.startswith("--set context=1 GiB: error: `context` is tokens, but this is bytes")
    assert result.stderr.count(": error:") == 1, result.stderr


def test_set_unknown_format_is_one_usage_error(tmp_path):
    path = write(tmp_path, SET_SPEC)
    result = CliRunner().invoke(main, ["eval", str(path), "--set", "kv_dtype=fp9"])
    assert result.exit_code == 2
    assert result.stderr.count(": error:") == 1, result.stderr
