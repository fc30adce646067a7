"""The Positions page on a real-format ALiBi checkpoint: a tiny random BLOOM saved by transformers'
``save_pretrained`` in a directory of TXVIZ_MODEL_DIRS, typed into the sidebar's path box. The bias the
page draws (captured from txviz's forward pass) must be −slope·distance with transformers' own slopes
(read off its ``build_alibi_tensor``, which adds slope·j: the same attention up to a per-row constant),
and the slopes table must list them."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from app.ui.widgets import plain
from tests.helpers.apptest import app_on, chart, decode, no_errors, open_at, page_path
from tests.helpers.hf_reference import NEEDS_TRANSFORMERS
from tests.helpers.tiny_hf import randomize_
from txviz.loading.zoo import SHIPPED_ZOO

PROMPT = "The kite flew over the park and the kite came down."
N_HEADS, HEAD = 6, 4  # 6 heads: BLOOM's slopes for a head count that is not a power of two
TOKENIZER = SHIPPED_ZOO / "alibi" / "tokenizer.json"  # a small byte-level tokenizer the zoo ships

pytestmark = [*NEEDS_TRANSFORMERS,
              pytest.mark.skipif(not TOKENIZER.is_file(), reason="the zoo's ALiBi tokenizer is not shipped")]


@pytest.fixture()
def bloom_dir(tmp_path, monkeypatch):
    from transformers import BloomConfig, BloomForCausalLM

    config = BloomConfig(vocab_size=256, hidden_size=48, n_layer=2, n_head=N_HEADS, attn_implementation="eager")
    torch.manual_seed(0)
    model = randomize_(BloomForCausalLM(config).eval(), seed=0)
    directory = tmp_path / "tiny-bloom"
    model.save_pretrained(directory, safe_serialization=True)
    shutil.copy(TOKENIZER, directory / "tokenizer.json")
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    return directory


def transformers_slopes() -> np.ndarray:
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    alibi = build_alibi_tensor(torch.ones(1, 2, dtype=torch.long), N_HEADS, torch.float32)  # (H, 1, 2): slope·j
    return (alibi[:, 0, 1] - alibi[:, 0, 0]).numpy()


def test_a_loaded_bloom_checkpoint_shows_its_captured_alibi_bias(bloom_dir):
    at = app_on(str(SHIPPED_ZOO / "base"), PROMPT).run()  # a tiny RoPE model first: the switch must take
    at.sidebar.selectbox(key="model_choice").set_value("Path…").run()
    at.sidebar.text_input(key="model_path").input(str(bloom_dir)).run()
    no_errors(at)
    at.switch_page(page_path("positions")).run()
    no_errors(at)
    at.number_input(key="head").set_value(HEAD).run()
    no_errors(at)
    assert [t.label for t in at.tabs] == ["ALiBi slopes and bias", "Permutation"]
    assert plain("tiny-bloom") in "\n".join(str(m.value) for m in at.markdown)  # as written, escaped
    assert not any("rope" in (getattr(w, "key", None) or "") for w in at.get("slider"))
    assert r"2^{-8\,h/H}" in at.latex[0].value and "not a power of 2" in at.latex[0].value  # BLOOM: max 8, 6 heads

    slopes = transformers_slopes()
    heads = next(d.value for d in at.dataframe if "slope (measured)" in d.value.columns)
    np.testing.assert_allclose(heads["slope (measured)"], slopes, rtol=1e-5)
    drawn = decode(chart(at, "alibi_bias")["data"][0]["z"]).astype(float)  # (T, T), future keys left empty
    n = drawn.shape[0]
    assert n > 5
    distance = np.arange(n)[:, None] - np.arange(n)[None, :]
    seen = distance >= 0
    np.testing.assert_allclose(drawn[seen], (-slopes[HEAD] * distance)[seen], rtol=1e-5, atol=1e-6)
    assert np.isnan(drawn[~seen]).all()


def test_an_mpt_checkpoint_shows_its_own_alibi_exponent(tmp_path, monkeypatch):
    """MPT sets the slopes' exponent (alibi_bias_max): the page's equation says the model's, not 8."""
    from transformers import MptConfig, MptForCausalLM

    config = MptConfig(d_model=32, n_heads=4, n_layers=2, vocab_size=256, max_seq_len=64,
                       attn_config={"alibi": True, "alibi_bias_max": 16})
    torch.manual_seed(0)
    directory = tmp_path / "tiny-mpt"
    randomize_(MptForCausalLM(config).eval(), seed=0).save_pretrained(directory, safe_serialization=True)
    shutil.copy(TOKENIZER, directory / "tokenizer.json")
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    at = open_at("positions", str(directory), PROMPT)
    no_errors(at)
    assert r"2^{-16\,h/H},\ h=1..H" in at.latex[0].value
    heads = next(d.value for d in at.dataframe if "slope (measured)" in d.value.columns)
    np.testing.assert_allclose(heads["slope (measured)"], [2 ** (-16 * h / 4) for h in range(1, 5)], rtol=1e-5)
