"""The RoPE tables of both layer kinds: a Gemma-3-like model (sliding layers with their own base) records
the local tables beside the global ones, each equal to what its layers multiply into q and k; a model
with one base records no local tables; the shapes and costs follow tests.helpers.expected."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.expected import expected_shapes
from tests.helpers.tiny import FAMILY_VARIANTS, random_decoder, random_ids, tiny_config
from txviz.capture.cost import capture_cost
from txviz.capture.trace import CAPTURES, LOCAL_ROPE_CAPTURES, local_rope_layer, trace
from txviz.model.positions import apply_rotary

N_TOKENS = 11
GEMMA3_LIKE = FAMILY_VARIANTS["gemma3_like"]
ROPE = ("rope_angles", "rope_cos", "rope_sin", *LOCAL_ROPE_CAPTURES)


def _angles(theta: float, head_dim: int = 16) -> torch.Tensor:
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
    return torch.arange(N_TOKENS).float()[:, None] * inv_freq[None]


def test_local_and_global_angles_use_their_own_bases():
    model = random_decoder(tiny_config(**GEMMA3_LIKE))
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=ROPE)
    assert_close(tr["rope_angles"], _angles(5000.0))
    assert_close(tr["rope_local_angles"], _angles(50.0))
    assert not torch.allclose(tr["rope_local_cos"], tr["rope_cos"])


@pytest.mark.parametrize("layer", range(4))
def test_each_layers_rotation_is_the_table_of_its_kind(layer):
    model = random_decoder(tiny_config(**GEMMA3_LIKE))
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=("q", "q_rot", *ROPE), layers=[layer])
    prefix = "rope_local" if model.config.is_sliding(layer) else "rope"
    cos, sin = tr[f"{prefix}_cos"], tr[f"{prefix}_sin"]
    # the q capture is after QK-norm, before RoPE: rotating it with the kind's table gives q_rot
    assert_close(apply_rotary(tr.get("q", layer), cos, sin), tr.get("q_rot", layer))


@pytest.mark.parametrize("overrides", [{}, dict(GEMMA3_LIKE, rope_local_theta=None), dict(positions="alibi")])
def test_one_base_records_no_local_tables(overrides):
    model = random_decoder(tiny_config(**overrides))
    assert local_rope_layer(model) is None
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=tuple(CAPTURES))
    assert not set(LOCAL_ROPE_CAPTURES) & set(tr.data)
    assert capture_cost(model.config, N_TOKENS, LOCAL_ROPE_CAPTURES).stored_bytes == 0


def test_shapes_and_costs_of_every_capture_on_two_kinds():
    config = tiny_config(**GEMMA3_LIKE)
    tr = trace(random_decoder(config), random_ids(config, N_TOKENS), capture=tuple(CAPTURES))
    assert {name: tuple(tr[name].shape) for name in tr.data} == expected_shapes(config, 4, N_TOKENS)
    kept = sum(tr[name].numel() * tr[name].element_size() for name in LOCAL_ROPE_CAPTURES)
    assert capture_cost(config, N_TOKENS, LOCAL_ROPE_CAPTURES).stored_bytes == kept
