"""The lab's zoo as the MoE and tradeoffs pages read it: trained variants, their held-out windows,
routing, a text's router trace and the per-window losses."""

import pytest
import torch

from app.services import zoo


def test_only_trained_variants_are_listed_and_loaded():
    assert zoo.trained(["base_long", "no_such_variant"]) == ["base_long"]
    assert set(zoo.trained(zoo.MOE_VARIANTS)) <= set(zoo.MOE_VARIANTS)
    with pytest.raises(FileNotFoundError, match="no_such_variant"):
        zoo.load_zoo_model("no_such_variant")


def test_validation_windows_are_the_training_context_wide(tiny):
    windows = zoo.validation_windows(tiny, 3)
    assert windows.shape == (3, tiny.config.max_seq_len)
    first = list(tiny.tokenizer.encode(zoo.first_story(), bos="bos").ids)
    assert windows.flatten()[:len(first)].tolist() == first[:windows.numel()]  # the stories, in order


def test_a_text_trace_is_cut_to_the_context(tiny):
    text = " ".join([zoo.first_story()] * 4)
    tokens, tr = zoo.text_trace(tiny, text)
    assert len(tokens) == tiny.config.max_seq_len == tr.ids.shape[-1]


@pytest.mark.skipif(not zoo.trained(["moe_top1"]), reason="the shipped zoo has no moe_top1")
def test_routing_of_a_moe_variant_counts_every_token():
    loaded = zoo.load_zoo_model("moe_top1")
    windows = zoo.validation_windows(loaded, 2)
    routing = zoo.routing(loaded, windows)
    assert routing.expert_ids.shape[1:] == (windows.numel(), loaded.config.top_k)
    assert routing.n_experts == loaded.config.n_experts
    tokens, tr = zoo.text_trace(loaded, zoo.first_story())
    assert len(tokens) == tr.ids.shape[-1]


def test_window_losses_scored_here_agree_with_the_stored_ones(tiny, monkeypatch):
    """The service builds every held-out window (as many as eval.json keeps) and scores them; the first
    16 are scored here (the whole set, ~1.5 CPU s, is rebuilt for three variants in tests/lab)."""
    from txviz.lab import data

    real, built = data.held_out_windows, []

    def first_windows(*args):
        windows = real(*args)
        built.append(len(windows))
        return windows[:16]

    monkeypatch.setattr(data, "held_out_windows", first_windows)
    stored = zoo.stored_window_losses("base_long")
    scored = zoo.window_losses(tiny)
    assert scored.ndim == 1 and torch.isfinite(scored).all()
    if stored is not None:
        assert built == [len(stored)]
        torch.testing.assert_close(scored.float(), stored[:16].float(), rtol=1e-3, atol=1e-3)
