"""The "RoPE angles" tab on a local (sliding) layer counts the pairs that never complete a turn against the
layer's window, not the whole context (the Gemma 3 stand-in of tests.helpers.gemma_standin: local layers
see 8 tokens at θ 10 000, global ones 2,048 at θ 1 000 000)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.helpers.apptest import chart, decode, no_errors, open_at, texts
from tests.helpers.gemma_standin import GEMMA_LIKE, gemma_home  # noqa: F401  (a fixture)


@pytest.mark.parametrize("layer, theta, span, seen", [(0, 1e4, 8, "the 8-token window this layer sees"),
                                                     (5, 1e6, 2048, "the context")])
def test_pairs_that_never_turn_are_counted_against_what_the_layer_sees(gemma_home, layer, theta, span, seen):
    at = open_at("positions", "gemma3-270m", "the cat sat on the mat")
    at.slider(key="layer").set_value(layer).run()
    no_errors(at)
    pairs = GEMMA_LIKE.head_dim // 2
    never = sum(2 * math.pi * theta ** (2 * i / GEMMA_LIKE.head_dim) > span for i in range(pairs))
    assert never == (15 if layer == 0 else 9)  # against 2,048 tokens the local layer would say 9
    assert f"pairs with wavelengths beyond {seen} ({never} of {pairs}) never complete a turn" in texts(at)
    line = chart(at, "rope_waves")["data"][1]
    assert line["name"] == ("window (8)" if layer == 0 else "context length")
    assert (decode(line["y"]).astype(float) == span).all()
