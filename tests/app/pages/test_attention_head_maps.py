"""The Attention page's head maps component (issue 14) through AppTest, on the zoo's tiny dense model:
what the browser gets is every head of the layer, equal to the model's own maps to float16 rounding,
with each head's title and metrics; a layer switch sends the new layer's maps; the plain chart stays
as a lazy fallback. What the browser does with them is tested in tests/browser/test_head_maps.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.helpers.apptest import app_on, chart, decode, has_chart, no_errors
from tests.helpers.head_maps import head_maps_data, heatmap, layer_maps

PROMPT = "Mary had a red kite."


@pytest.fixture(scope="module")
def zoo_base():
    from txviz.loading import load
    from txviz.loading.zoo import SHIPPED_ZOO

    return str(SHIPPED_ZOO / "base"), load(str(SHIPPED_ZOO / "base"))


def model_maps(loaded, prompt: str, layer: int) -> np.ndarray:
    """(heads, T, T) of one layer: the model's own, from a trace run here (the sink token first)."""
    from txviz.capture.trace import trace

    ids = loaded.tokenizer.encode(prompt, bos="sink").ids
    tr = trace(loaded.model, torch.tensor(ids), capture=("attn_probs",))
    return np.stack([tr.attn(layer, h).numpy() for h in range(loaded.config.n_heads)])


def test_the_component_gets_every_head_of_the_layer(zoo_base):
    source, loaded = zoo_base
    at = app_on(source, PROMPT).run()
    no_errors(at)
    data = head_maps_data(at)
    config = loaded.config
    maps = layer_maps(at)
    expected = model_maps(loaded, PROMPT, 0)
    assert maps.shape == expected.shape == (config.n_heads, len(expected[0]), len(expected[0]))
    future = np.triu(np.ones(expected.shape[1:], dtype=bool), k=1)
    assert np.isnan(maps[:, future]).all() and not np.isnan(maps[:, ~future]).any()
    np.testing.assert_allclose(maps[:, ~future], expected[:, ~future], rtol=1e-3, atol=1e-4)  # float16
    assert data["head"] == 0 and data["layer"] == 0 and data["n_heads"] == config.n_heads
    assert [f"head {h}" in title for h, title in enumerate(data["titles"])] == [True] * config.n_heads
    table = at.dataframe[0].value
    for h, caption in enumerate(data["captions"]):  # each head's own metrics, as the table has them
        entropy = table[(table["layer"] == 0) & (table["head"] == h)]["entropy"].iloc[0]
        assert f"entropy {entropy:.3f}" in caption
    assert data["figure"]["data"][0]["z"] is None  # the maps travel once, not again inside the figure
    assert data["plotly_url"].endswith("/plotly.min.js")


def test_the_page_head_and_a_layer_switch_change_what_is_sent(zoo_base):
    source, loaded = zoo_base
    at = app_on(source, PROMPT).run()
    first = head_maps_data(at)
    at.number_input(key="head").set_value(3).run()
    no_errors(at)
    moved = head_maps_data(at)
    assert moved["head"] == 3 and moved["maps_id"] == first["maps_id"]  # same maps: the browser keeps them
    assert "head 3" in heatmap(at)["layout"]["title"]["text"]
    at.slider(key="layer").set_value(2).run()
    no_errors(at)
    layer2 = head_maps_data(at)
    assert layer2["layer"] == 2 and layer2["maps_id"] != first["maps_id"]
    np.testing.assert_allclose(np.nan_to_num(layer_maps(at)), np.nan_to_num(
        np.where(np.triu(np.ones(layer_maps(at).shape[1:], dtype=bool), k=1), 0, model_maps(loaded, PROMPT, 2))),
        rtol=1e-3, atol=1e-4)


def test_hide_sink_is_applied_to_every_head_sent(zoo_base):
    source, _ = zoo_base
    at = app_on(source, PROMPT).run()
    at.toggle(key="hide_sink").set_value(True).run()
    no_errors(at)
    maps = layer_maps(at)
    assert np.nansum(maps[:, 1:, 0]) == 0
    np.testing.assert_allclose(np.nansum(maps[:, 1:], axis=2), 1.0, atol=2e-3)


def test_the_plain_chart_is_a_lazy_fallback_for_the_page_head(zoo_base):
    source, _ = zoo_base
    at = app_on(source, PROMPT).run()
    at.number_input(key="head").set_value(2).run()
    assert not has_chart(at, "heatmap_plain")  # collapsed: not drawn, not sent
    at.session_state["plain_map_open"] = True  # what a click on the expander does
    at.run()
    no_errors(at)
    plain = chart(at, "heatmap_plain")
    assert "head 2" in plain["layout"]["title"]["text"]
    z = decode(plain["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(np.nan_to_num(z), np.nan_to_num(layer_maps(at)[2]), rtol=1e-3, atol=1e-4)
