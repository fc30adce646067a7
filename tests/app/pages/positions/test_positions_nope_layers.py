"""The Positions page on a tiny SmolLM3 checkpoint whose layers 1 and 3 have no positions (NoPE): the page
names those layers, and the RoPE angles tab draws the angles of a RoPE layer but not of a NoPE one (it says
why instead). A model whose every layer rotates gets no such note."""

from __future__ import annotations

from tests.helpers.apptest import chart_ids, no_errors, open_at, texts
from tests.helpers.hf_reference import NEEDS_TRANSFORMERS
from tests.helpers.tiny_hf_dense import save_with_tokenizer

pytestmark = NEEDS_TRANSFORMERS

PROMPT = "Mary said she would come back"


def test_nope_layers_are_named_and_get_no_angles(tmp_path, monkeypatch):
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    _, _, directory = save_with_tokenizer("smollm3_windowed_nope", tmp_path)  # no_rope_layers [1, 0, 1, 0]
    at = open_at("positions", directory, PROMPT)
    for layer, rotates in ((0, True), (1, False), (2, True)):  # the reader moves the layer slider
        at.slider(key="layer").set_value(layer).run()
        no_errors(at)
        said = texts(at)
        assert "Layers 1, 3 use **no positions** (NoPE)" in said
        assert any("rope_angles" in key for key in chart_ids(at)) == rotates
        assert ("uses no positions: RoPE does not rotate its queries and keys" in said) == (not rotates)


def test_a_model_whose_every_layer_rotates_gets_no_note(tmp_path, monkeypatch):
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    _, _, directory = save_with_tokenizer("qwen3_window_on_layer_1", tmp_path)
    at = open_at("positions", directory, PROMPT)
    no_errors(at)
    assert "no positions" not in texts(at) and any("rope_angles" in key for key in chart_ids(at))


def test_one_nope_layer_is_spoken_of_in_the_singular(tmp_path, monkeypatch):
    # "Layer 3 uses no positions (NoPE): RoPE does not rotate their queries and keys, so they match..."
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    _, _, directory = save_with_tokenizer("smollm3_every_4th_nope", tmp_path)  # 4 layers: layer 3 alone
    at = open_at("positions", directory, PROMPT)
    no_errors(at)
    assert ("Layer 3 uses **no positions** (NoPE): RoPE does not rotate its queries and keys, so it matches tokens "
            "by content alone and knows order only through the causal mask") in texts(at)
