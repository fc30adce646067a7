"""The Positions page on a model with two RoPE bases (a tiny Gemma-3-shaped GGUF under Gemma 3 270M's
file name, tests.helpers.gemma_standin: 18 layers, 5 local layers with θ 10 000 to 1 global with
θ 1 000 000): the "RoPE per layer kind" tab lists which layers use which base and reads both wavelength curves back from the trace; the
angle tab follows the chosen layer's base. A one-base model gets no such tab. The
built-in coreference set says what Gemma gets before each sentence and warns when it is nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.helpers.gemma_standin import gemma_home  # noqa: F401  (a fixture)
from tests.helpers.apptest import aim_at, app_on, assert_opened, chart, decode, no_errors, open_at, texts

PROMPT = "the cat sat on the mat and the dog ran"


def positions_on_gemma(**state):
    """The Positions page on the Gemma stand-in, ``state`` set before its first run (a tab open, as a click
    on it shows it)."""
    at = open_at("positions", "gemma3-270m", PROMPT, state=state)
    no_errors(at)
    return at


def test_two_bases_get_their_own_tab_with_both_wavelengths(gemma_home):
    at = positions_on_gemma(positions_tab_rope_kinds="RoPE per layer kind")
    assert [t.label for t in at.tabs][:2] == ["RoPE angles", "RoPE per layer kind"]
    assert "1e+06 on global layers, 10000 on local ones" in texts(at)
    table = at.dataframe[0].value
    assert table["layers"].tolist() == ["0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16", "5, 11, 17"]
    assert table["RoPE base θ"].tolist() == ["10,000", "1,000,000"]
    waves = chart(at, "rope_kind_waves")["data"]
    pairs = np.arange(16)
    for series, theta in zip(waves[:2], (1e4, 1e6)):
        expected = 2 * math.pi * theta ** (2 * pairs / 32)
        np.testing.assert_allclose(decode(series["y"]).astype(float), expected, rtol=1e-3)
    assert "pairs complete a turn inside the 8-token window" in texts(at)


@pytest.mark.parametrize("layer, theta", [(0, 1e4), (5, 1e6)])
def test_the_angle_table_follows_the_layers_base(gemma_home, layer, theta):
    at = positions_on_gemma()  # a layer in state before the first run is reset when the model loads
    at.slider(key="layer").set_value(layer).run()
    no_errors(at)
    waves = decode(chart(at, "rope_waves")["data"][0]["y"]).astype(float)
    np.testing.assert_allclose(waves[1], 2 * math.pi * theta ** (2 / 32), rtol=1e-4)


@pytest.mark.parametrize("bos, token, warned", [("sink", "“<bos>”", False), ("none", "nothing", True)])
def test_builtin_coref_set_says_what_gemma_gets_before_each_sentence(gemma_home, bos, token, warned):
    at = aim_at(app_on("gemma3-270m", PROMPT), "heads")
    at.query_params["bos"] = bos  # as a link carries it
    at.session_state["heads_tab"] = "Coreference"  # the tab open, as a click on it shows it
    at.run()
    assert_opened(at, "heads")
    no_errors(at)
    assert f"Before each sentence: {token}" in texts(at)
    assert any("always starts with `<bos>`" in w.value for w in at.warning) == warned
