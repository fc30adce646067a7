"""Direct logit attribution: the parts add up to the logit difference on every variant, and each part
is the logit difference's share that the frozen-norm linear map gives it."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.tiny import VARIANTS, family_variants, random_decoder, random_ids, tiny_config
from txviz.causal.activations import ActivationRecorder, run_with_activations
from txviz.causal.dla import direct_logit_attribution, frozen_norm
from txviz.causal.intervention import Intervention, Replace
from txviz.causal.metric import logit_diff


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_parts_sum_to_the_logit_difference(variant):
    model = random_decoder(tiny_config(**VARIANTS[variant]))
    ids = random_ids(model.config, 12, seed=2)
    dla = direct_logit_attribution(model, ids, 3, 7)
    with torch.no_grad():
        assert dla.total == pytest.approx(float(logit_diff(model(ids), 3, 7)[0]), abs=1e-6)
    assert dla.parts_sum == pytest.approx(dla.total, abs=1e-4)
    assert dla.heads.shape == (model.config.n_layers, model.config.n_heads) and dla.mlps.shape == (2,)
    assert dla.heads.abs().min() > 0 and (dla.bias != 0) == (variant == "learned")


@pytest.mark.parametrize("variant", ["mha", "learned", "moe"])
def test_a_heads_dla_is_the_frozen_readout_of_what_zeroing_it_removes(variant):
    """Zero one head's output at the last position of the last layer, with that layer's FFN output held
    at the clean run's: the residual loses exactly the head's write; read with the clean norm scale
    and the unembedding difference, that is its DLA."""
    model = random_decoder(tiny_config(**VARIANTS[variant]))
    ids = random_ids(model.config, 12, seed=3)
    dla = direct_logit_attribution(model, ids, 3, 7)
    last = model.config.n_layers - 1
    _, clean = run_with_activations(model, ids, ("resid_post", "ffn_out"))
    edited = ActivationRecorder(("resid_post",))
    replaces = [Replace(last, "head_out", head=1, position=-1, value="zero"), Replace(last, "ffn_out")]
    with torch.no_grad():
        model(ids, record=Intervention([replaces], clean, inner=edited))
    final = clean[last, "resid_post"][0, -1].double()
    removed = final - edited.activations[last, "resid_post"][0, -1].double()
    unembed = model.unembedding.detach().double()
    direct = float(frozen_norm(model.final_norm, final)(removed) @ (unembed[3] - unembed[7]))
    assert direct == pytest.approx(float(dla.heads[last, 1]), abs=1e-5)
    assert abs(direct) > 1e-4


GEMMA_LIKE = family_variants("gemma3_like", "gemma2_like")  # the post-attention norm needs its own frozen scale


@pytest.mark.parametrize("variant", sorted(GEMMA_LIKE))
def test_parts_sum_with_post_attention_norms_and_a_final_cap(variant):
    model = random_decoder(tiny_config(**GEMMA_LIKE[variant]))
    ids = random_ids(model.config, 12, seed=2)
    dla = direct_logit_attribution(model, ids, 3, 7)
    assert dla.parts_sum == pytest.approx(dla.total, abs=1e-4)
    with torch.no_grad():
        capped = float(logit_diff(model(ids), 3, 7)[0])
    if model.config.final_softcap is None:
        assert dla.total == pytest.approx(capped, abs=1e-6) and dla.capped_total is None
    else:  # the parts add up to the difference before the cap; the model's own output is the capped one
        assert dla.capped_total == pytest.approx(capped, abs=1e-6)
        assert abs(dla.total) > abs(capped) and dla.total != pytest.approx(capped, abs=1e-3)


@pytest.mark.parametrize("variant", ["qwen3_like", "olmo2_like", "smollm3_like", "phi12_like", "qwen_moe_like",
                                     "olmoe_like", "granite_moe_like"])
def test_parts_sum_on_the_2025_families(variant):
    """QK-norms, post-norms only (OLMo 2), NoPE layers, and Phi's shared norm with a bias on the unembedding,
    which counts among the biases' part."""
    model = random_decoder(tiny_config(**family_variants(variant)[variant]))
    ids = random_ids(model.config, 12, seed=2)
    dla = direct_logit_attribution(model, ids, 3, 7)
    with torch.no_grad():
        assert dla.total == pytest.approx(float(logit_diff(model(ids), 3, 7)[0]), abs=1e-6)
    assert dla.parts_sum == pytest.approx(dla.total, abs=1e-4)
