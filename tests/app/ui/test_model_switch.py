"""The sidebar's known models (SmolLM2, the default, and Gemma 3 270M, txviz.loading.sources.KNOWN_MODELS):
switching between them after choosing a head the other model lacks keeps every page drawing, with the
layer and head brought inside the new model. The cache holds tiny stand-ins under the known models' file
names, shaped like each (30 layers × 9 heads, llama; 18 layers × 4 heads sharing one KV head, gemma3 with
its sliding layers), so the switch is the sidebar's real path and runs in seconds."""

from __future__ import annotations

import shutil

import pytest

from tests.helpers.apptest import PAGE_NAMES, app_on, no_errors, page_path, pick_head
from tests.helpers.head_maps import heatmap
from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf
from tests.helpers.tiny_gguf_gemma import spm_vocab, write_gemma_gguf
from txviz import ModelConfig
from txviz.loading import fetch
from txviz.loading.sources import KNOWN_MODELS

SMOLLM2_SHAPE = dict(n_layers=30, n_heads=9, n_kv_heads=3, d_model=72)
# Gemma 3's layout in little: 18 layers, 5 sliding to 1 global, MQA, QK-norm, sandwich norms, GeGLU
GEMMA_LIKE = ModelConfig(vocab_size=len(spm_vocab()[0]), d_model=64, n_layers=18, n_heads=4, n_kv_heads=1,
                         head_dim=32, ffn_hidden=96, max_seq_len=64, norm_eps=2.0 ** -20, ffn="geglu",
                         gelu_approximate="tanh", embed_scale=8.0, tie_embeddings=True, rope_theta=1e6,
                         sliding_window=8, rope_local_theta=10000.0, layer_types=(("sliding",) * 5 + ("full",)) * 3,
                         qk_norm=True, sandwich_norm=True, name="tiny-gemma3")


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    """The two stand-in files, written once per module (~0.25 CPU s a pair); each test copies them."""
    folder = tmp_path_factory.mktemp("stand-ins")
    smollm2 = tiny(**SMOLLM2_SHAPE, name="tiny-smollm2")
    write_gguf(folder / KNOWN_MODELS["smollm2-135m"].filename, smollm2, weights_of(smollm2))
    write_gemma_gguf(folder / KNOWN_MODELS["gemma3-270m"].filename, "gemma3", GEMMA_LIKE, weights_of(GEMMA_LIKE))
    return sorted(folder.iterdir())


@pytest.fixture
def home(tmp_path, monkeypatch, stand_ins):
    """A cache holding tiny stand-ins of both known models, as if both were fetched."""
    monkeypatch.setenv("TXVIZ_HOME", str(tmp_path))
    monkeypatch.delenv("TXVIZ_DEFAULT_GGUF", raising=False)
    monkeypatch.setattr(fetch, "download_wheel", lambda *a, **k: pytest.fail("a cached model was fetched again"))
    for stand_in in stand_ins:
        shutil.copyfile(stand_in, tmp_path / stand_in.name)
    import streamlit as st
    st.cache_resource.clear()  # no model of another test's home
    yield tmp_path
    st.cache_resource.clear()


def picker(at):
    return at.sidebar.selectbox(key="model_choice")


def label_of(at, display_name: str) -> str:
    return next(o for o in picker(at).options if o.startswith(display_name))


def caption(at) -> str:
    return "\n".join(c.value for c in at.sidebar.caption)


def test_each_known_model_is_offered_once_by_its_name(home):
    at = app_on().run()
    no_errors(at)
    options = picker(at).options
    assert picker(at).value == "SmolLM2-135M-Instruct (default)"
    for model in KNOWN_MODELS.values():
        assert sum(o.startswith(model.display_name) for o in options) == 1, options
    assert not any(".gguf" in o for o in options)  # the cached files are not listed a second time


@pytest.mark.parametrize("source, label", [("smollm2-135m", "SmolLM2-135M-Instruct (default)"),
                                           ("gemma3-270m", "Gemma 3 270M")])
def test_a_link_may_name_a_known_model(home, source, label):
    at = app_on(source).run()
    no_errors(at)
    assert picker(at).value == label
    assert at.session_state["model"] == ("default" if source == "smollm2-135m" else source)


def test_switching_after_layer_25_head_8_brings_the_head_inside_gemma_and_back(home):
    at = app_on().run()
    no_errors(at)
    assert "30 layers · 9 heads" in caption(at)
    pick_head(at, 25, 8).run()
    no_errors(at)
    assert "Layer 25, head 8" in heatmap(at)["layout"]["title"]["text"]

    picker(at).set_value(label_of(at, "Gemma 3 270M")).run()
    no_errors(at)
    assert "**Gemma 3 270M** · gguf" in caption(at) and "18 layers · 4 heads · 1 KV head (MQA)" in caption(at)
    assert at.session_state["model"] == "gemma3-270m"
    assert (at.session_state["layer"], at.session_state["head"]) == (17, 3)
    assert "Layer 17, head 3" in heatmap(at)["layout"]["title"]["text"]
    for name in PAGE_NAMES:
        at.switch_page(page_path(name)).run()
        no_errors(at)
        assert 0 <= at.session_state["layer"] < 18 and 0 <= at.session_state["head"] < 4, name

    at.switch_page(page_path("attention")).run()
    picker(at).set_value(label_of(at, "SmolLM2-135M-Instruct")).run()
    no_errors(at)
    assert at.session_state["model"] == "default" and "30 layers · 9 heads" in caption(at)
    pick_head(at, 29, 7).run()
    no_errors(at)
    assert "Layer 29, head 7" in heatmap(at)["layout"]["title"]["text"]


def test_a_known_model_not_yet_fetched_is_fetched_on_choosing_it(home, monkeypatch):
    stand_in = home / KNOWN_MODELS["gemma3-270m"].filename
    kept = stand_in.read_bytes()
    stand_in.unlink()
    fetched = []

    def ensure(model, progress=None):  # the fetch itself is tested in tests/loading
        if model.name != "gemma3-270m":  # the default, loaded before the picker is drawn: in the cache
            return home / model.filename
        if not stand_in.is_file():
            progress(0.5, "downloading")  # the sidebar's bar: a fetch without one fails here
            fetched.append(model.name)
            stand_in.write_bytes(kept)
        return stand_in

    monkeypatch.setattr(fetch, "ensure", ensure)
    at = app_on().run()
    assert fetched == []  # offering it fetches nothing
    picker(at).set_value(label_of(at, "Gemma 3 270M")).run()
    no_errors(at)
    assert fetched == ["gemma3-270m"] and "18 layers · 4 heads" in caption(at)
