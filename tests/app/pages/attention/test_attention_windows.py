"""The Attention page on a model with sliding-window layers (a tiny Gemma-3-shaped GGUF under Gemma 3
270M's file name: 18 layers, window 8, global layers 5, 11 and 17): it says which layers are global and
which local, and the local layers' maps really are a band (no weight i − j ≥ 8 back), the global ones not.
A model without windows gets no such note."""

from __future__ import annotations

import numpy as np

from tests.helpers.gemma_standin import gemma_home  # noqa: F401  (a fixture)
from tests.helpers.apptest import app_on, no_errors, texts
from tests.helpers.head_maps import layer_maps

LONG = "the cat sat on the mat and the dog ran to the park and the bird sang in the tree"  # > 8 tokens
WINDOW = 8


def test_local_and_global_layers_are_named_and_the_band_is_in_the_maps(gemma_home):
    at = app_on("gemma3-270m", LONG).run()
    no_errors(at)
    said = texts(at)
    assert "Layers 5, 11, 17 are **global**" in said and "layers 0–4, 6–10, 12–16 are **local**" in said
    assert "the last 8 tokens" in said and "so the band shows in the local layers' maps" in said
    first = at.session_state["bos"] == "sink" and "Policy before the prompt: **prepend <bos> as an attention sink**"
    assert first and first in said  # the token really prepended, by name
    for layer, local in ((0, True), (5, False), (12, True), (17, False)):
        maps = np.nan_to_num(layer_maps(at, layer))  # (heads, T, T), NaN above the diagonal
        rows, cols = np.indices(maps.shape[1:])
        far = rows - cols >= WINDOW
        assert far.any()
        beyond = maps[:, far]
        assert (beyond == 0).all() if local else (beyond > 0).any(), layer


def test_a_short_prompt_is_told_why_no_band_shows(gemma_home):
    at = app_on("gemma3-270m", "cat").run()  # a few tokens in the stand-in's small vocabulary
    no_errors(at)
    assert "within the window" in texts(at)


def test_a_model_without_windows_gets_no_note():
    from txviz.loading.zoo import SHIPPED_ZOO

    at = app_on(str(SHIPPED_ZOO / "base"), LONG).run()  # the zoo's base model: every layer global
    no_errors(at)
    assert "are **local**" not in texts(at) and "is **local**" not in texts(at)
