"""The text decoder of a multimodal Gemma 3 checkpoint (Gemma3ForConditionalGeneration), against transformers'
conditional model on text-only prompts: logits and every attention map, in both weight layouts (the published
``language_model.model.`` one that save_pretrained writes, and transformers 5's in-memory
``model.language_model.``); the vision tower's tensors never read; the model says it is the text part only."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers import tiny_gemma3_multimodal
from tests.helpers.hf_reference import NEEDS_TRANSFORMERS
from tests.helpers.tiny_hf import edit_config, random_ids, save, save_state_dict
from txviz.capture.trace import trace
from txviz.loading.errors import ModelLoadError
from txviz.loading.hf import loader as hf_loader
from txviz.loading.hf.loader import load_hf_dir, read_hf_config

pytestmark = NEEDS_TRANSFORMERS

VISION_PARTS = ("vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector.")


@pytest.fixture(scope="module")
def hf_model():
    return tiny_gemma3_multimodal.build()


@pytest.fixture(scope="module", params=["published", "in_memory"])
def saved(request, hf_model, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    return (save if request.param == "published" else save_state_dict)(hf_model, directory)


def test_logits_and_every_attention_map_equal_the_conditional_model_on_text(hf_model, saved):
    ids = random_ids(hf_model.config.text_config.vocab_size)  # 24 tokens: three sliding windows
    with torch.no_grad():
        expected = hf_model(input_ids=ids, output_attentions=True)
    tr = trace(load_hf_dir(saved, device="cpu").model, ids, capture=["logits", "attn_probs"])
    assert_close(tr["attn_probs"], torch.stack(expected.attentions), atol=1e-6, rtol=0)
    assert_close(tr["logits"], expected.logits, atol=1e-5, rtol=0)


def test_the_layers_kinds_and_counts_are_those_of_the_text_config(hf_model, saved):
    loaded = load_hf_dir(saved, device="cpu")
    text = hf_model.config.text_config
    assert loaded.config.layer_types == tuple(t.removesuffix("_attention") for t in text.layer_types)
    assert loaded.config.sliding_window == text.sliding_window
    assert loaded.n_params == hf_model.model.language_model.num_parameters()  # tied: no lm_head of its own


def test_the_vision_tower_is_never_read(saved, monkeypatch):
    asked: list[str] = []
    real_open = hf_loader.safe_open

    class Spy:
        def __init__(self, *args, **kwargs):
            self.handle = real_open(*args, **kwargs)

        def __enter__(self):
            self.inner = self.handle.__enter__()
            return self

        def __exit__(self, *exc):
            return self.handle.__exit__(*exc)

        def keys(self):
            return self.inner.keys()

        def get_tensor(self, name):
            asked.append(name)
            return self.inner.get_tensor(name)

    monkeypatch.setattr(hf_loader, "safe_open", Spy)
    loaded = load_hf_dir(saved, device="cpu")
    assert len(asked) >= len(loaded.model.state_dict())  # the text tensors were read through the handle
    assert not [name for name in asked if name.startswith(VISION_PARTS)]


def test_the_model_says_it_is_the_text_decoder_only(hf_model, saved):
    loaded = load_hf_dir(saved, device="cpu")
    vision = [n for n in hf_model.state_dict() if n.startswith(VISION_PARTS)]
    assert loaded.metadata["architecture"] == "Gemma3ForConditionalGeneration"
    assert "Only the text decoder is loaded" in loaded.metadata["weights_note"]
    assert f"({len(vision)} tensors)" in loaded.metadata["weights_note"]


def test_the_config_is_the_text_configs(saved):
    config = read_hf_config(saved)
    assert (config.qk_norm, config.sandwich_norm, config.d_model, config.n_layers) == (True, True, 64, 4)


def test_a_text_config_of_another_family_is_refused(saved):
    edit_config(saved, lambda c: {**c, "text_config": {**c["text_config"], "model_type": "llama"}})
    try:
        with pytest.raises(ModelLoadError, match="text_config must be gemma3_text"):
            load_hf_dir(saved, device="cpu")
    finally:
        edit_config(saved, lambda c: {**c, "text_config": {**c["text_config"], "model_type": "gemma3_text"}})


@pytest.mark.parametrize("name", ["GEMMA_3_4B_IT", "GEMMA_3_27B_IT"])
def test_published_configs_count_what_transformers_builds_for_the_text_decoder(name):
    """The published 4B config's text_config leaves out its sizes: Gemma3TextConfig's defaults fill them."""
    import transformers

    from tests.helpers import published_geometry_configs
    from txviz.model.counts import count_params

    published = getattr(published_geometry_configs, name)
    with torch.device("meta"):
        reference = transformers.Gemma3ForConditionalGeneration(transformers.AutoConfig.for_model(
            **{k: v for k, v in published.items() if k != "architectures"}))
    config = read_hf_config(published)
    assert count_params(config) == reference.model.language_model.num_parameters()
    assert config.layer_windows.count(None) == config.n_layers // 6  # every sixth layer global
