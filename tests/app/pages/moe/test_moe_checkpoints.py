"""The MoE page on loaded Mixture-of-Experts checkpoints of every family txviz reads (tiny random models
saved by transformers' save_pretrained in a directory of TXVIZ_MODEL_DIRS): the routing it draws is the
loaded model's own, on its MoE layers only (a dense layer has no router), with its own expert count and
router, its shared expert drawn apart from the routed ones; and after a switch to another family's
checkpoint in the sidebar's path box, everything follows the new model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.helpers.apptest import chart, click_tab, decode, has_chart, no_errors, open_at, texts
from tests.helpers.hf_reference import NEEDS_TRANSFORMERS
from tests.helpers.tiny_hf_moe import save_checkpoint
from txviz.analysis.moe.routing import measure_routing
from txviz.loading.hf.loader import load_hf_dir
from txviz.loading.zoo import SHIPPED_ZOO

PROMPT = "Mary had a red kite and the kite flew over the park."
TOKENIZER = SHIPPED_ZOO / "alibi" / "tokenizer.json"  # a small word-level tokenizer the zoo ships
# family → (its variant in tests/helpers/tiny_hf_moe.py, settings that make its page tell it apart)
CHECKPOINTS = {
    "qwen2_moe": ("qwen2_moe_sparse_step_2", dict(num_experts=5)),  # layers 0 and 2 dense, a gated shared expert
    "qwen3_moe": ("qwen3_moe_norm_topk_mlp_only", dict(num_experts=6)),  # layer 0 dense
    "olmoe": ("olmoe", dict(num_experts=3)),
    "granitemoe": ("granitemoe_multipliers", dict(num_local_experts=7)),
}

pytestmark = [*NEEDS_TRANSFORMERS,
              pytest.mark.skipif(not TOKENIZER.is_file(), reason="the zoo's tokenizer is not shipped")]


@pytest.fixture()
def checkpoints(tmp_path, monkeypatch):
    import streamlit as st

    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    st.cache_resource.clear()
    yield lambda family: save_checkpoint(CHECKPOINTS[family][0], tmp_path / family, TOKENIZER, vocab_size=256,
                                         **CHECKPOINTS[family][1])
    st.cache_resource.clear()


def expected_routing(directory, at):
    """The routing of the loaded checkpoint on the tokens the page traced, computed here."""
    loaded = load_hf_dir(directory, device="cpu")
    labels = chart(at, "moe_map")["data"][0]["y"]
    ids = loaded.tokenizer.encode(PROMPT, bos=at.session_state["bos"]).ids  # the sidebar's BOS policy
    assert len(ids) == len(labels)
    return loaded.config, measure_routing(loaded.model, torch.tensor([ids]))


def check_page_shows(at, directory) -> None:
    config, routing = expected_routing(directory, at)
    drawn = chart(at, "moe_map")["data"][0]
    assert drawn["x"] == [str(layer) for layer in config.moe_layers]
    best = decode(drawn["z"]).astype(float)  # (T, L) best expert per token and layer
    assert np.array_equal(best, routing.expert_ids[:, :, 0].T.numpy().astype(float))
    bars = [trace for trace in chart(at, "moe_load_text")["data"] if trace["type"] == "bar"]
    assert len(bars) == config.n_experts
    load = np.stack([decode(bar["y"]).astype(float) for bar in bars], axis=1)  # (L, E)
    assert np.allclose(load, routing.load.numpy())
    assert has_chart(at, "moe_shared_gates") == bool(config.shared_expert_gate)
    if config.shared_expert_gate:
        assert "+ shared expert, always on" in str(drawn["text"])
        assert "runs on every token" in texts(at)


@pytest.mark.parametrize("family", sorted(CHECKPOINTS))
def test_the_moe_page_draws_the_loaded_checkpoints_routing(family, checkpoints):
    directory = checkpoints(family)
    at = open_at("moe", str(directory), PROMPT, timeout=300)
    no_errors(at)
    check_page_shows(at, directory)
    click_tab(at, "moe_tab", "Capacity vs compute")  # its costs are the loaded checkpoint's
    row = next(d.value for d in at.dataframe if "total params" in d.value.columns).iloc[0]
    weights = sum(p.numel() for p in load_hf_dir(directory, device="cpu").model.parameters())
    assert row["model"] == directory.name and row["total params"] == weights


def test_switching_checkpoints_the_page_follows(checkpoints):
    first, second = checkpoints("qwen2_moe"), checkpoints("granitemoe")
    at = open_at("moe", str(first), PROMPT, timeout=300)
    check_page_shows(at, first)
    picker = at.sidebar.selectbox(key="model_choice")  # the folders of TXVIZ_MODEL_DIRS are listed there
    picker.set_value(next(label for label in picker.options if "granitemoe" in label)).run()
    no_errors(at)
    check_page_shows(at, second)
    assert "top-2 logits" not in texts(at) and "largest router logits" in texts(at)  # Granite's router, in words


def test_every_page_draws_on_a_moe_checkpoint_with_a_padded_vocabulary(checkpoints):
    """Qwen2-MoE with a dense layer and a shared expert, its 256 logits past the tokenizer's 226 tokens
    (as real Qwen checkpoints pad theirs): every page, on a MoE layer and on the dense one."""
    from tests.helpers.apptest import PAGE_NAMES, page_path

    at = open_at("moe", str(checkpoints("qwen2_moe")), PROMPT, timeout=300)
    for name in PAGE_NAMES:
        at.switch_page(page_path(name)).run()
        for layer in (0, 1):  # layer 0 routes its tokens, layer 1 keeps a dense FFN
            at.session_state["layer"] = layer
            at.run()
            assert not at.exception and not at.error, (name, layer, [e.value for e in (*at.exception, *at.error)])


def test_the_layer_slider_offers_the_routed_layers_only(checkpoints):
    """Qwen3-MoE here keeps layer 0 dense: the slider's layers are 1 and 2, and the histograms follow."""
    at = open_at("moe", str(checkpoints("qwen3_moe")), PROMPT, timeout=300)
    slider = at.select_slider(key="moe_layer_1_2")
    assert list(slider.options) == ["1", "2"] and slider.value == 1  # the page's layer 0 is dense: nearest is 1
    slider.set_value(2).run()
    no_errors(at)
    assert chart(at, "moe_gates")["layout"]["title"]["text"].startswith("Layer 2:")
