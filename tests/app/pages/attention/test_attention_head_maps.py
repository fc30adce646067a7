"""The Attention page's head maps component through AppTest, on the zoo's tiny dense model:
what the browser gets is every head of every layer (they fit the byte budget), equal to the model's own
maps to float16 rounding, with each head's title and metrics; the maps' message is the same on every
rerun of a prompt (a head or layer change sends only the small view); past the budget the page's layer
alone; the plain chart stays as a lazy fallback. What the browser does
with them is tested in tests/browser/test_head_maps.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.helpers.apptest import app_on, chart, decode, has_chart, no_errors, pick_head
from tests.helpers.head_maps import head_maps_data, head_maps_view, heatmap, layer_maps

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


def test_the_component_gets_every_head_of_every_layer(zoo_base):
    source, loaded = zoo_base
    at = app_on(source, PROMPT).run()
    no_errors(at)
    data = head_maps_data(at)
    config = loaded.config
    assert data["layers"] == list(range(config.n_layers)) and data["layer"] == 0 and data["head"] == 0
    table = at.dataframe[0].value
    for layer in data["layers"]:
        maps = layer_maps(at, layer)
        expected = model_maps(loaded, PROMPT, layer)
        assert maps.shape == expected.shape == (config.n_heads, len(expected[0]), len(expected[0]))
        future = np.triu(np.ones(expected.shape[1:], dtype=bool), k=1)
        assert np.isnan(maps[:, future]).all() and not np.isnan(maps[:, ~future]).any()
        np.testing.assert_allclose(maps[:, ~future], expected[:, ~future], rtol=1e-3, atol=1e-4)  # float16
        for h in range(config.n_heads):  # each head's own title and metrics, as the table has them
            assert f"Layer {layer}, head {h}" in data["titles"][layer][h]
            entropy = table[(table["layer"] == layer) & (table["head"] == h)]["entropy"].iloc[0]
            assert f"entropy {entropy:.3f}" in data["captions"][layer][h]
    assert data["figure"]["data"][0]["z"] is None  # the maps travel once, not again inside the figure
    assert "≈%{z:.3r}" in data["figure"]["data"][0]["hovertemplate"]  # the hover says it is rounded
    assert data["figure"]["data"][0]["x"][:2] == data["figure"]["data"][0]["y"][:2] and "template" not in data["figure"]["layout"]


def maps_message(at) -> bytes:
    """The maps mount's element as Streamlit sends it (what its forward-message hash is taken over)."""
    return next(e.proto for e in at.get("bidi_component") if e.proto.id.endswith("heatmap_maps")).SerializeToString()


def test_the_maps_message_is_the_same_on_every_rerun_and_only_the_view_moves(zoo_base):
    source, _ = zoo_base
    at = app_on(source, PROMPT).run()
    first, first_view = maps_message(at), head_maps_view(at)
    at.select_slider(key="query_token").set_value(2).run()  # the head view only: neither mount changes
    assert maps_message(at) == first and head_maps_view(at) == first_view
    pick_head(at, 2, 3).run()
    no_errors(at)
    moved = head_maps_view(at)
    assert (moved["layer"], moved["head"]) == (2, 3) and moved != first_view
    assert maps_message(at) == first  # the maps are not sent again: Streamlit sends a reference to the browser's copy
    assert "Layer 2, head 3" in heatmap(at)["layout"]["title"]["text"]


def test_past_the_byte_budget_only_the_page_layer_is_sent(zoo_base, monkeypatch):
    from app.components.head_maps import payload as head_maps

    source, loaded = zoo_base
    monkeypatch.setattr(head_maps, "ALL_LAYERS_BYTES", 1)
    at = app_on(source, PROMPT + " Again.").run()  # another prompt: not the cached payload
    pick_head(at, layer=2).run()
    no_errors(at)
    data = head_maps_data(at)
    assert data["layers"] == [2] and data["shape"][0] == 1
    np.testing.assert_allclose(np.nan_to_num(layer_maps(at)), np.nan_to_num(np.where(
        np.triu(np.ones(data["shape"][2:], dtype=bool), k=1), 0, model_maps(loaded, PROMPT + " Again.", 2))),
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
    pick_head(at, head=2).run()
    assert not has_chart(at, "heatmap_plain")  # collapsed: not drawn, not sent
    at.session_state["plain_map_open"] = True  # what a click on the expander does
    at.run()
    no_errors(at)
    plain = chart(at, "heatmap_plain")
    assert "head 2" in plain["layout"]["title"]["text"]
    z = decode(plain["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(np.nan_to_num(z), np.nan_to_num(layer_maps(at)[2]), rtol=1e-3, atol=1e-4)
