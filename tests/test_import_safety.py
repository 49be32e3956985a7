"""`kvdsl import` writes only what it means to: no text of a config.json becomes kvspec,
no option makes a spec that cannot load, and only regular files of sane size are read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvdsl.cli import main
from kvdsl.errors import ConfigError, KvdslError, UsageError
from kvdsl.hf import MAX_NAME, import_all, import_config, prelude_blocks, visible
from kvdsl.model import Block
from kvdsl.parser import parse_text

from cli_helpers import cli as shared_cli

ROOT = Path(__file__).resolve().parents[1]

BASE = {"model_type": "llama", "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
        "hidden_size": 512, "intermediate_size": 1024, "vocab_size": 1000, "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16"}
MOE = dict(BASE, model_type="mixtral", num_local_experts=4, num_experts_per_tok=2)
MAMBA = {"model_type": "mamba", "num_hidden_layers": 2, "hidden_size": 256, "intermediate_size": 512, "state_size": 16,
         "conv_kernel": 4, "vocab_size": 1000, "torch_dtype": "float32"}

# Each ends a comment or a string one way or another: line breaks of every kind a reader
# may split lines at, `#`, quotes, backslashes, NUL, and a whole block to smuggle in.
NASTY = [
    "org/M\ndefaults deployment {\n    utilization = 1\n}\n#",
    'a"b\\c # d\\',
    "x\x00y",
    'x\u2028import "/etc/passwd"\u2029y',
    "x\x85y\x0bz\x0cw\x1cq\x1dr\x1es\rt\x1fu\tv",
    '"}\nmodel evil "e" {\n    layers = 1\n}\n# ',
    "x\ud800y\u202ez\ufeff",
]


def configs_carrying(text: str):
    """(label, config) pairs that put `text` in every string the importer reads."""
    yield "_name_or_path", dict(BASE, _name_or_path=text)
    yield "_name_or_path after org/", dict(BASE, _name_or_path="org/" + text)
    yield "model_type", dict(BASE, model_type=text)
    yield "architectures", {**{k: v for k, v in BASE.items() if k != "model_type"}, "architectures": [text]}
    yield "torch_dtype", dict(BASE, torch_dtype=text)
    yield "dtype", {**{k: v for k, v in BASE.items() if k != "torch_dtype"}, "dtype": text}
    yield "quant_method", dict(BASE, quantization_config={"quant_method": text})
    yield "compressed-tensors scheme", dict(BASE, quantization_config={
        "quant_method": "compressed-tensors", "config_groups": {text: {"weights": {"num_bits": 8, "type": text, "strategy": text}}}})
    yield "topk_method", dict(MOE, topk_method=text)
    yield "a key nothing reads", dict(BASE, model_type="brand_new", **{f"layer_{text}": 3})
    yield "text_config.model_type", {"model_type": text, "text_config": dict(BASE, model_type=text)}
    yield "text_config key", {"model_type": "gemma3", "text_config": dict(BASE, model_type="x", **{f"kv_{text}": 1})}
    yield "mamba expand", dict(MAMBA, expand=text)


def parsed_items(text: str):
    return parse_text(text, "imported.kvspec").items


def assert_one_model_block(spec: str, label: str):
    items = parsed_items(spec)
    assert len(items) == 1 and isinstance(items[0], Block) and items[0].kind == "model", (label, spec)
    assert all(ch.isprintable() for line in spec.split("\n") for ch in line), (label, spec)
    return items[0]


@pytest.mark.parametrize("text", NASTY, ids=range(len(NASTY)))
def test_no_string_of_a_config_becomes_kvspec(tmp_path, text):
    for label, data in configs_carrying(text):
        path = tmp_path / "org__Model-7B.json"
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")
        try:
            model = import_all([str(path)])[0]    # also loads and evaluates the spec, as the command does
        except KvdslError as exc:                 # refused: then the message is one clean line per error
            assert "does not evaluate" not in exc.render(), (label, exc.render())
            assert all(ch.isprintable() for ch in exc.render().split("\n")[0]), (label, exc.render())
            continue
        block = assert_one_model_block(model.render(), label)
        assert block.title == visible(model.title), label    # quotes and backslashes survive the string


def test_the_injection_of_issue_16(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(BASE, _name_or_path="org/M\ndefaults deployment {\n    utilization = 1\n}\n#")))
    result = CliRunner().invoke(main, ["import", str(path)])
    assert result.exit_code == 0, result.output
    block = assert_one_model_block(result.stdout, "issue 16")
    assert block.title == "M\\ndefaults deployment {\\n    utilization = 1\\n}\\n#"
    assert "\ndefaults" not in result.stdout


@pytest.mark.parametrize("name", ["org__M\nx", "org__M\u2028x", 'org__M"x\\', "org__M\rdefaults model {\r}\r#"])
def test_file_names_are_text_too(tmp_path, name):
    path = tmp_path / (name + ".json")
    path.write_text(json.dumps(BASE))
    spec = import_all([str(path)])[0].render()
    assert_one_model_block(spec, name)


@pytest.mark.parametrize("text", NASTY[:5], ids=range(5))
def test_error_only_strings_are_shown_on_one_line(tmp_path, text):
    layer_types = dict(BASE, layer_types=["full_attention", text, "full_attention", "full_attention"])
    nemotron = dict(BASE, model_type="nemotron_h", hybrid_override_pattern=text)
    for data in (layer_types, nemotron):
        path = tmp_path / "c.json"
        path.write_text(json.dumps(data))
        with pytest.raises(ConfigError) as caught:
            import_config(str(path))
        assert all(ch.isprintable() for ch in caught.value.render().split("\n")[0]), caught.value.render()


# ---------------------------------------------------------------- the options

def cli(*args, code):
    return shared_cli(*args, code=code).output


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "org__Model-7B.json"
    path.write_text(json.dumps(BASE))
    return path


@pytest.mark.parametrize("title", ["x\ny", "x\ry", "x\x00y", "x\u2028y", "x\x0by", "x\u0085y", "x\x1ey"])
def test_a_title_of_more_than_one_line_is_refused_at_the_option(config, title):
    output = cli("import", config, "--title", title, code=2)
    assert output.startswith("error: --title `x\\") and "one line of printable text" in output
    assert "does not evaluate" not in output and "kvdsl-import-" not in output


@pytest.mark.parametrize("name", ["a\x00b", "a\nb", "a\u2028b", "model\u00e9"])
def test_a_name_with_odd_characters_is_refused_at_the_option(config, name):
    output = cli("import", config, "--name", name, code=2)
    assert output.startswith(f"error: --name `{visible(name)}` is not a kvspec name")
    assert "\x00" not in output


def test_a_name_the_prelude_uses_is_refused_up_front(tmp_path):
    taken = prelude_blocks()
    assert {"fp16", "fp8"} <= set(taken)
    missing = tmp_path / "not-read.json"       # refused before the config is looked at
    for name in sorted(taken):
        output = cli("import", missing, "--name", name, code=2)
        assert f"--name `{name}` is already a {taken[name]} of kvdsl's prelude" in output
    assert "does not evaluate" not in output


def test_a_model_called_like_a_prelude_block_gets_another_name(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(BASE, _name_or_path="org/FP8")))
    model = import_all([str(path)])[0]
    assert (model.name, model.title) == ("fp8_model", "FP8")


@pytest.mark.parametrize("option, limit", [("--name", "at most 100"), ("--title", "at most 200")])
def test_a_very_long_name_or_title_is_refused_clearly(config, tmp_path, option, limit):
    output = cli("import", config, option, "a" * 5000, "-o", tmp_path, code=2)
    assert f"error: {option} is 5,000 characters long" in output and limit in output
    assert "File name too long" not in output


def test_a_very_long_published_name_still_imports(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(BASE, _name_or_path="org/" + "M" * 5000)))
    out = tmp_path / "out"
    out.mkdir()
    cli("import", path, "-o", out, code=0)
    [written] = out.glob("*.kvspec")
    assert len(written.stem) <= MAX_NAME
    assert_one_model_block(written.read_text(), "long name")


# ---------------------------------------------------------------- numbers Python will not read

def test_an_integer_of_thousands_of_digits_is_an_error_at_its_key(tmp_path):
    path = tmp_path / "c.json"
    text = json.dumps(BASE, indent=2).replace('"num_hidden_layers": 4', '"num_hidden_layers": ' + "9" * 5000)
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        import_config(str(path))
    message = caught.value.render()
    assert message.startswith(f"{path}:3:3: error: `num_hidden_layers` is a number of 5,000 digits")
    output = cli("import", path, code=1)
    assert "5,000 digits" in output


def test_a_long_integer_nothing_reads_is_harmless(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(BASE)[:-1] + ', "rope_theta": -' + "1" * 10000 + ', "quantization_config": {"quant_method": '
                    + "2" * 5000 + "}}")
    model = import_config(str(path))
    assert any("a number of 5,000 digits" in a.message for a in model.assumptions)


# ---------------------------------------------------------------- what is read

def run_kvdsl(*args, timeout=30):
    """The command in a fresh process: a read that never ends fails the test instead of hanging it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        return subprocess.run([sys.executable, "-m", "kvdsl", *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`kvdsl {' '.join(map(str, args))}` did not finish in {timeout} s")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_a_device_is_not_read(device):
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    result = run_kvdsl("import", device)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: cannot read `{device}`: not a regular file")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
def test_a_named_pipe_is_not_waited_on(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    result = run_kvdsl("import", fifo)
    assert result.returncode == 2 and "not a regular file" in result.stderr, result.stderr
    with pytest.raises(UsageError, match="not a regular file"):
        import_config(str(fifo))
    folder = tmp_path                           # in a folder, what is not a file is passed over
    (folder / "org__Model-7B.json").write_text(json.dumps(BASE))
    (folder / "zero.json").symlink_to("/dev/zero")
    result = run_kvdsl("import", folder)
    assert result.returncode == 0 and result.stdout.startswith("# Model-7B"), result.stderr


def test_a_file_too_large_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as stream:
        stream.truncate(1 << 30)                # 1 GiB, sparse
    result = run_kvdsl("import", big)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(f"{big}:1:1: error: the file is larger than 16 MiB: not a config.json")


def test_a_folder_given_to_the_library_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="a folder"):
        import_config(str(tmp_path))


def test_a_hub_id_is_not_fetched(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    output = cli("import", "meta-llama/Llama-3.2-3B", code=2)
    assert "nor in the Hugging Face hub cache" in output and "kvdsl does not fetch models" in output
    assert "download it first" in output and "or pass its config.json" in output
    assert "not found" in cli("import", "meta-llama/nope.json", code=2)


def test_crlf_and_unicode_line_breaks_keep_positions(tmp_path):
    path = tmp_path / "c.json"
    text = '{\r\n  "_name_or_path": "org/a\u2028b\u0085c",\r\n  "num_hidden_layers": 0,\r\n' + json.dumps(BASE)[1:].replace(
        '"num_hidden_layers": 4, ', "")
    path.write_bytes(text.encode("utf-8"))
    with pytest.raises(ConfigError) as caught:
        import_config(str(path))
    lines = caught.value.render().split("\n")
    assert lines[0].startswith(f"{path}:3:3: error: `num_hidden_layers` is 0")
    assert lines[1].strip() == '"num_hidden_layers": 0,'


@pytest.mark.parametrize("word", ["none", "for", "fn", "let", "in"])
def test_a_model_called_like_a_word_of_the_language_gets_another_name(tmp_path, word):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(BASE, _name_or_path=f"org/{word}")))
    model = import_all([str(path)])[0]
    assert model.name == f"{word}_model"
    spec = tmp_path / f"{model.name}.kvspec"
    spec.write_text(model.render(), encoding="utf-8")
    assert cli("check", spec, code=0).startswith("ok: 1 model")


def test_a_spec_from_a_pipe_is_refused_under_the_name_given():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-m", "kvdsl", "check", "/dev/stdin"], input='model m "M" {\n',
                            capture_output=True, text=True, timeout=30, env=env)
    assert result.returncode == 1  # was "cannot read `/proc/N/fd/pipe:[M]`: not found"
    assert result.stderr == "error: cannot read `/dev/stdin`: not a regular file (a pipe, device or socket): a spec is read from a file\n"
