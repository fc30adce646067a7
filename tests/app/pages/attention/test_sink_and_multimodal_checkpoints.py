"""The app on a tiny gpt-oss checkpoint and a tiny multimodal Gemma 3 one (transformers' save_pretrained, a
word-level tokenizer beside them, in a folder of TXVIZ_MODEL_DIRS): the Attention page says what the sinks
take on the prompt, as the loaded model computes it, and draws maps over real tokens; the MoE page draws
gpt-oss's own routing; the sidebar says a multimodal Gemma 3 is its text decoder only. A model without sinks
gets no sink note."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from tests.helpers import tiny_gemma3_multimodal, tiny_gpt_oss
from tests.helpers.apptest import chart, decode, no_errors, open_at, texts
from tests.helpers.hf_reference import NEEDS_TRANSFORMERS
from tests.helpers.tiny_hf import save
from txviz.analysis.moe.routing import measure_routing
from txviz.capture.trace import trace
from txviz.loading.hf.loader import load_hf_dir
from txviz.loading.zoo import SHIPPED_ZOO

PROMPT = "Mary had a red kite and the kite flew over the park and the dog ran after it."
TOKENIZER = SHIPPED_ZOO / "alibi" / "tokenizer.json"  # a small word-level tokenizer the zoo ships

pytestmark = [*NEEDS_TRANSFORMERS,
              pytest.mark.skipif(not TOKENIZER.is_file(), reason="the zoo's tokenizer is not shipped")]


@pytest.fixture()
def folder(tmp_path, monkeypatch):
    import streamlit as st

    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    st.cache_resource.clear()

    def saved(name, model):
        directory = save(model, tmp_path / name)
        shutil.copy(TOKENIZER, directory / "tokenizer.json")
        return directory

    yield saved
    st.cache_resource.clear()


def traced_ids(at, loaded) -> torch.Tensor:
    return torch.tensor([loaded.tokenizer.encode(PROMPT, bos=at.session_state["bos"]).ids])


def test_the_attention_page_says_the_sinks_share_of_the_loaded_model(folder):
    directory = folder("gpt_oss", tiny_gpt_oss.build(vocab_size=256))
    at = open_at("attention", str(directory), PROMPT, timeout=300)
    no_errors(at)
    loaded = load_hf_dir(directory, device="cpu")
    ids = traced_ids(at, loaded)
    assert ids.shape[1] > tiny_gpt_oss.WINDOW  # the sliding layers' band shows
    share = trace(loaded.model, ids, capture=["attn_sink"])["attn_sink"][:, 0].double().mean(-1)  # (L, H)
    said = texts(at)
    assert "learns an **attention sink**" in said and "each row sums to 1 − the sink's share" in said
    assert f"the sinks take **{share.mean():.1%}** of the attention on average" in said
    layer, head = int(at.session_state["layer"]), int(at.session_state["head"])
    assert f"Layer {layer}, head {head}: **{share[layer, head]:.1%}**" in said
    assert "layers 0, 2 are **local**" in said


def test_the_moe_page_draws_gpt_oss_routing(folder):
    directory = folder("gpt_oss", tiny_gpt_oss.build(vocab_size=256))
    at = open_at("moe", str(directory), PROMPT, timeout=300)
    no_errors(at)
    loaded = load_hf_dir(directory, device="cpu")
    routing = measure_routing(loaded.model, traced_ids(at, loaded))
    best = decode(chart(at, "moe_map")["data"][0]["z"]).astype(float)  # (T, L) best expert per token, layer
    assert np.array_equal(best, routing.expert_ids[:, :, 0].T.numpy().astype(float))


def test_the_positions_what_if_shows_the_map_the_model_attends_with(folder):
    """Its "as the model attends" map is the captured one: the head's sink kept (rows under 1)."""
    directory = folder("gpt_oss", tiny_gpt_oss.build(vocab_size=256))
    at = open_at("positions", str(directory), PROMPT, timeout=300,
                 state={"positions_tab_rope": "ALiBi what-if"})
    no_errors(at)
    loaded = load_hf_dir(directory, device="cpu")
    layer, head = int(at.session_state["layer"]), int(at.session_state["head"])
    expected = trace(loaded.model, traced_ids(at, loaded), capture=["attn_probs"]).get("attn_probs", layer)[0, head]
    drawn = decode(chart(at, "alibi_real")["data"][0]["z"]).astype(float)
    shown = ~np.isnan(drawn)
    assert np.allclose(drawn[shown], expected.numpy()[shown], atol=1e-5)
    assert float(expected.sum(-1).min()) < 0.99  # the sink takes a share the map must not hand back


def test_the_sidebar_says_a_multimodal_gemma_3_is_its_text_decoder_only(folder):
    directory = folder("gemma3_multimodal", tiny_gemma3_multimodal.build(vocab_size=256))
    at = open_at("attention", str(directory), PROMPT, timeout=300)
    no_errors(at)
    assert "Only the text decoder is loaded" in texts(at)
    assert "learns an **attention sink**" not in texts(at)  # no sinks in Gemma 3: no note on them
