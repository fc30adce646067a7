"""The Positions page on a partial-rotary model (GPT-NeoX's rotary_pct: RoPE on the first R of D
dimensions): it draws the R/2 pairs the model really rotates, with the frequencies the model multiplies
into q and k, and the real-vector views read only the rotated dimensions."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tokenizers
import torch

from tests.helpers.apptest import chart, decode, no_errors, open_at, texts
from tests.helpers.tiny import random_decoder
from txviz.analysis.positions.rope_kinds import layer_inv_freq
from txviz.config import ModelConfig
from txviz.lab.artifacts import save_run
from txviz.loading.zoo import SHIPPED_ZOO

ROTARY = 8  # of head_dim 16


@pytest.fixture
def partial_rotary_dir(tmp_path, monkeypatch):
    raw = json.loads((SHIPPED_ZOO / "base" / "config.json").read_text())
    fields = {k: v for k, v in raw.items() if k in ModelConfig.__dataclass_fields__}
    config = ModelConfig.from_dict({**fields, "rotary_dims": ROTARY, "name": "partial-rotary"})
    model = random_decoder(config)
    tokenizer = tokenizers.Tokenizer.from_file(str(SHIPPED_ZOO / "base" / "tokenizer.json"))
    directory = tmp_path / "partial-rotary"
    save_run(directory, model, tokenizer, curves={}, evaluation={})
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    return directory, model


def test_the_page_draws_the_pairs_the_model_rotates(partial_rotary_dir):
    directory, model = partial_rotary_dir
    assert torch.equal(layer_inv_freq(model.config, 0), model.positions.inv_freq)  # what the model multiplies in
    at = open_at("positions", str(directory), "once upon a time there was a little dog")
    no_errors(at)
    assert f"{ROTARY // 2} pairs per head on the first {ROTARY} of 16 dimensions" in texts(at)
    waves = decode(chart(at, "rope_waves")["data"][0]["y"])
    assert len(waves) == ROTARY // 2
    np.testing.assert_allclose(waves, (2 * np.pi / model.positions.inv_freq).numpy(), rtol=1e-6)
    assert at.slider(key="rope_pair").max == ROTARY // 2 - 1
