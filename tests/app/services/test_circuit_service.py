"""The circuit service on a model whose heads have no inputs of their own: it says why before any work."""

from __future__ import annotations

import dataclasses

import pytest

from app.services.circuit import CircuitRequest, estimate
from app.services.prompts import PromptError
from txviz import limits


def test_a_qk_norm_across_all_heads_is_refused_before_the_estimate(tiny):
    across_heads = tiny.config.replace(qk_norm=True, qk_norm_scope="all_heads")
    loaded = dataclasses.replace(tiny, config=across_heads)
    request = CircuitRequest("the cat sat", "the dog sat", "on", "in", "sink")
    with pytest.raises(PromptError, match="Circuits cannot be drawn on this model: its QK-norm normalizes all heads"):
        estimate(loaded, request, limits.current())
    estimate(tiny, request, limits.current())  # the same request on the model itself is fine
