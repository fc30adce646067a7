"""The Attention page on tiny Qwen3, OLMo 2, SmolLM3 and Phi checkpoints (random, saved by transformers'
``save_pretrained`` with a byte-level tokenizer.json, in a directory of TXVIZ_MODEL_DIRS): the page runs
without an error and the maps it sends the browser, every layer and head, are transformers' own eager
attention on the same token ids (the sink the page prepends included)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.helpers.apptest import app_on, no_errors
from tests.helpers.head_maps import layer_maps
from tests.helpers.hf_reference import NEEDS_TRANSFORMERS
from tests.helpers.tiny_hf_dense import save_with_tokenizer

pytestmark = NEEDS_TRANSFORMERS

PROMPT = "Mary said she would come back"  # 22 byte-level tokens and the sink: over twice the window of 8
ONE_PER_FAMILY = ["qwen3_window_on_layer_1", "olmo2", "smollm3_windowed_nope", "phi_qk_layernorm_phi2_rotary"]


@pytest.mark.parametrize("variant", ONE_PER_FAMILY)
def test_the_page_draws_transformers_own_maps(variant, tmp_path, monkeypatch):
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    model, tokenizer, directory = save_with_tokenizer(variant, tmp_path)
    at = app_on(directory, PROMPT).run()
    no_errors(at)
    assert at.session_state["bos"] == "sink"
    ids = torch.tensor([tokenizer.encode(PROMPT, bos="sink").ids])
    with torch.no_grad():
        expected = model(ids, output_attentions=True, use_cache=False).attentions  # L × (1, H, T, T)
    for layer, reference in enumerate(expected):
        drawn = layer_maps(at, layer)  # (H, T, T), NaN above the diagonal
        assert drawn.shape == tuple(reference.shape[1:])
        below = ~np.isnan(drawn)
        np.testing.assert_allclose(drawn[below], reference[0].numpy()[below], atol=2e-3)
        assert np.all(np.triu(reference[0].numpy(), 1) == 0)  # what the page leaves empty is zero there
