"""Money, hours, FLOP and rates: units and dimension errors."""

import json
from fractions import Fraction

from kvdsl.units import DECLARED_DIMS, FLOP, SECONDS, TOKENS, USD, parse_unit
from tests.cli_helpers import cli


def test_rates_parse_to_base_units():
    assert parse_unit("USD/h") == (Fraction(1, 3600), USD / SECONDS)
    assert parse_unit("tokens/s") == (1, TOKENS / SECONDS)
    assert parse_unit("TFLOP/s") == (10**12, FLOP / SECONDS)
    assert parse_unit("h") == (3600, SECONDS)
    assert DECLARED_DIMS["USD/h"] == USD / SECONDS


def test_money_in_a_spec(tmp_path):
    spec = tmp_path / "m.kvspec"
    spec.write_text('model m "m" {\n layers = 1; heads = 1; head_dim = 1; params = 1\n'
                    ' let price = 2.5 USD/h\n let month = price * 730 h\n let EUR = 1.16 USD\n let p = 2 * EUR / 1 h\n}\n')
    out = cli("eval", spec, "--json", code=0).output
    cells = json.loads(out)["blocks"]["m"]["cells"]
    assert cells["month"]["value"] == 1825 and cells["month"]["unit"] == "USD"
    assert abs(cells["p"]["value"] * 3600 - 2.32) < 1e-9


def test_money_and_time_do_not_add(tmp_path):
    spec = tmp_path / "m.kvspec"
    spec.write_text('model m "m" {\n layers = 1; heads = 1; head_dim = 1; params = 1\n let x = 1 USD + 1 h\n}\n')
    assert "mix USD and seconds" in cli("eval", spec, code=1).output
