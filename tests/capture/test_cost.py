"""Capture cost: the estimate of what a trace keeps equals the bytes of the tensors it really keeps,
and the strategy picked under a budget fits it."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.expected import SMOLLM2_135M
from tests.helpers.tiny import FAMILY_VARIANTS, VARIANTS, random_decoder, random_ids, tiny_config
from txviz import CAPTURES, CaptureError, trace
from txviz.capture.cost import attention_path, capture_cost, choose_capture
from txviz.capture.maps import MapStorage
from txviz.capture.trace import SUMMARY_CAPTURE



@pytest.mark.parametrize("variant", ["moe", "alibi", "learned", "sliding_window", "qwen_moe_like"])
@pytest.mark.parametrize("layers", [None, [1], [0, 2]])
@pytest.mark.parametrize("maps", [MapStorage(), MapStorage(dtype=torch.float16, lower_triangle=True)], ids=str)
def test_estimated_stored_bytes_equal_the_trace_tensors(variant, layers, maps):
    """qwen_moe_like: layer 1 keeps a dense FFN, so only layers [0, 2] keep routing (and the shared gate)."""
    config = tiny_config(**{**{**VARIANTS, **FAMILY_VARIANTS}[variant], "n_layers": 3})
    tr = trace(random_decoder(config), random_ids(config, 11), capture=tuple(CAPTURES), layers=layers, maps=maps)
    cost = capture_cost(config, 11, CAPTURES, layers=layers, maps=maps)
    assert cost.stored == {name: tr[name].nbytes for name in tr.data}


def test_paths_follow_what_is_asked():
    assert attention_path(("attn_probs", "head_summaries")) == "eager"
    assert attention_path(SUMMARY_CAPTURE) == "blockwise"
    assert attention_path(("q_rot", "resid")) == "fused"
    with pytest.raises(CaptureError, match="unknown capture names"):
        capture_cost(tiny_config(), 4, ("attention",))


def test_default_model_at_full_context():
    maps = capture_cost(SMOLLM2_135M, 8192, ("attn_probs",))
    assert maps.stored["attn_probs"] == 30 * 9 * 8192 * 8192 * 4  # 72 GB: never at this size
    summary = capture_cost(SMOLLM2_135M, 8192, SUMMARY_CAPTURE)
    assert summary.stored["q_rot"] == 30 * 9 * 8192 * 64 * 4 and summary.stored["k_rot"] == 30 * 3 * 8192 * 64 * 4
    assert summary.peak_bytes < 2 * 2**30 < maps.peak_bytes
    assert capture_cost(SMOLLM2_135M, 1024, ()).flops == pytest.approx(2 * 1024 * 106.2e6 + 2 * 576 * 49152
                                                                       + 30 * 4 * 9 * 64 * 1024 * 1025 / 2, rel=0.01)


@pytest.mark.parametrize("tokens,budget_gib,expected", [
    (256, 4, ("attn_probs", "head_summaries")),
    (2048, 4, ("attn_probs", "head_summaries")),  # fp16 lower triangles: 1.1 GB
    (8192, 4, SUMMARY_CAPTURE),
])
def test_choose_capture_fits_the_budget(tokens, budget_gib, expected):
    plan = choose_capture(SMOLLM2_135M, tokens, budget_gib * 2**30, weight_bytes=540 * 2**20)
    assert plan.capture == expected and plan.cost.peak_bytes <= budget_gib * 2**30
    assert plan.layers is None


def test_choose_capture_degrades_to_fewer_layers_then_refuses():
    summaries = capture_cost(SMOLLM2_135M, 8192, SUMMARY_CAPTURE)
    plan = choose_capture(SMOLLM2_135M, 8192, summaries.peak_bytes - summaries.stored["q_rot"] // 2)
    assert plan.capture == SUMMARY_CAPTURE and plan.layers == tuple(range(len(plan.layers))) and len(plan.layers) < 30
    with pytest.raises(CaptureError, match="nothing fits"):
        choose_capture(SMOLLM2_135M, 8192, 2**20)
