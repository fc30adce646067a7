"""A trace writes the attention maps a block of query rows at a time straight into their stored form
(txviz.capture.maps.MapStorage.write_rows). What it keeps must be what the eager path keeps: the eager
path is still what runs when the whole matrices are asked for too (``attn_logits``), so the two traces
below compare the block path with the whole-matrix path on the same model. Prompts of 300 tokens in a
batch of 2 make several blocks of rows, so block edges, sliding windows (keys starting after 0) and the
packing's row offsets are all met.

The first layer's maps are equal bit for bit (the same products, the same softmax), except with
attention sinks (gpt-oss), whose extra logit closes each block's rows rather than each whole row. A block's weights·V sums over the keys the block holds, the whole matrix's over all
T (zeros past the diagonal), which a BLAS may split differently: later layers' inputs, hence their
maps, can differ in the last bit of fp32 (at most 1e-6 here; kept as fp16, at most one fp16 step).
"""

from __future__ import annotations

import pytest
import torch

from tests.helpers.tiny import FAMILY_VARIANTS, VARIANTS, random_decoder, random_ids, tiny_config
from txviz import trace
from txviz.capture.maps import MapStorage
from txviz.model.attention import attention_path

CONFIGS = {name: VARIANTS[name] for name in ("mha", "gqa", "sliding_window", "alibi", "learned", "moe")}
CONFIGS.update({name: FAMILY_VARIANTS[name]
                for name in ("gemma3_capped", "bloom_like", "phi_like_partial_gqa_window", "gpt_oss_like")})
STORAGES = [MapStorage(), MapStorage(dtype=torch.float16, lower_triangle=True),
            MapStorage(lower_triangle=True), MapStorage(dtype=torch.float16)]
TOKENS = 300


@pytest.fixture(scope="module", params=list(CONFIGS))
def model_and_ids(request):
    config = tiny_config(**CONFIGS[request.param], max_seq_len=512)
    return random_decoder(config), random_ids(config, TOKENS, batch=2)


@pytest.mark.parametrize("maps", STORAGES, ids=str)
def test_maps_written_by_blocks_equal_the_whole_matrix_path(model_and_ids, maps):
    model, ids = model_and_ids
    by_blocks = trace(model, ids, ("attn_probs",), maps=maps)
    whole = trace(model, ids, ("attn_probs", "attn_logits"), maps=maps)  # logits need the whole matrices
    ours, eager = by_blocks["attn_probs"], whole["attn_probs"]
    assert ours.dtype == eager.dtype and ours.shape == eager.shape
    if not model.config.attn_sinks:  # a sink's logit ends the block's rows, not the whole rows: summed elsewhere
        assert torch.equal(ours[0], eager[0])  # the first layer: the same inputs, the same maps bit for bit
    step = 2 ** -10 if eager.dtype == torch.float16 else 0  # fp16 rounding of a value 1e-7 away
    torch.testing.assert_close(ours.float(), eager.float(), rtol=step, atol=1e-6)
    assert torch.equal(ours == 0, eager == 0)  # exact zeros (masked keys, packed or not) where they were


def test_maps_and_summaries_in_one_pass_equal_the_whole_matrix_path(model_and_ids):
    model, ids = model_and_ids
    both = trace(model, ids, ("attn_probs", "head_summaries"))
    whole = trace(model, ids, ("attn_probs", "head_summaries", "attn_logits"))
    torch.testing.assert_close(both["attn_probs"], whole["attn_probs"], rtol=0, atol=1e-6)
    torch.testing.assert_close(both["head_summaries"], whole["head_summaries"], rtol=1e-6, atol=1e-6, equal_nan=True)


def test_only_a_recorder_taking_blocks_gets_maps_by_blocks():
    assert attention_path(("attn_probs",), map_blocks=True) == "blockwise"
    assert attention_path(("attn_probs",)) == "eager"  # a decoding step's recorder keeps one row whole
    assert attention_path(("attn_probs", "attn_scores"), map_blocks=True) == "eager"


def test_the_logits_of_a_trace_with_maps_stay_the_eager_paths(model_and_ids):
    """Last-bit differences carried through every layer (4 here, with Gemma's extra norms): at most 1e-5."""
    model, ids = model_and_ids
    ours = trace(model, ids, ("attn_probs", "logits"))["logits"]
    torch.testing.assert_close(ours, trace(model, ids, ("attn_probs", "attn_logits", "logits"))["logits"],
                               rtol=1e-6, atol=1e-5)
