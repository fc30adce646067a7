"""The Attention page's note on local and global layers speaks of one layer in the singular ("Layer 1
is global", not "Layers 1 are global") and of several in the plural."""

from __future__ import annotations

from app.app_pages.attention.layer_kinds import window_text
from tests.helpers.tiny import tiny_config


def test_one_global_and_one_local_layer_are_each_singular():
    config = tiny_config(sliding_window=8, layer_types=("sliding", "full"))
    assert window_text(config, 12).startswith("Layer 1 is **global** (every earlier token); layer 0 is **local**: "
                                              "a token sees only the last 8 tokens")


def test_several_layers_stay_plural_and_a_one_token_prompt_is_singular():
    config = tiny_config(n_layers=4, sliding_window=8, layer_types=("sliding", "full", "sliding", "full"))
    text = window_text(config, 1)
    assert text.startswith("Layers 1, 3 are **global** (every earlier token); layers 0, 2 are **local**")
    assert "Your prompt has 1 token, within the window" in text and "a prompt over 8 tokens" in text


def test_no_note_without_windows():
    assert window_text(tiny_config(), 12) is None
