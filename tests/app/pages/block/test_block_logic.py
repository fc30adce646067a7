"""What the block page computes, on a tiny model: the steps table, the logit lens table, the residual
stream's size and the recomputed block's difference."""

from __future__ import annotations

import torch

from app.figures.block_tables import block_steps, lens_top_tokens
from tests.helpers.tiny import random_decoder, tiny_config
from txviz.analysis.block import block_walkthrough, logit_lens
from txviz.analysis.residual import largest_difference, stream_norms


def test_the_steps_table_has_a_row_per_step_with_its_shape():
    model = random_decoder(tiny_config())
    x = torch.randn(6, model.config.d_model)
    steps, _ = block_walkthrough(model, x, 0)
    table = block_steps(steps)
    assert list(table["step"]) == [s.name for s in steps]
    assert list(table["shape"]) == [" × ".join(map(str, s.shape)) for s in steps]
    assert set(table["shape"]) == {"6 × 32"}  # a residual update keeps T × d_model at every step
    assert list(table["mean ‖·‖ per token"]) == [round(s.mean_norm, 2) for s in steps]
    assert list(table.columns) == ["step", "computes", "shape", "mean ‖·‖ per token"]


def test_the_lens_table_reads_every_layer_and_decodes_each_rank():
    probs = torch.tensor([[0.5, 0.25], [0.9, 0.05], [0.6, 0.3]])
    ids = torch.tensor([[7, 3], [3, 7], [1, 2]])
    table = lens_top_tokens(probs, ids, lambda toks: f"t{toks[0]}")
    assert list(table["after layer"]) == [0, 1, 2]
    assert list(table["#1"]) == ["'t7' 0.50", "'t3' 0.90", "'t1' 0.60"]
    assert list(table["#2"]) == ["'t3' 0.25", "'t7' 0.05", "'t2' 0.30"]


def test_the_lens_table_names_ids_past_the_tokenizer_by_number():
    """A model's vocabulary padded past its tokenizer's (Qwen's 151936 rows for 151665 tokens): the lens
    may rank a padding row; it is shown by number, never decoded."""
    probs, ids = torch.tensor([[0.5, 0.25]]), torch.tensor([[7, 230]])
    table = lens_top_tokens(probs, ids, lambda toks: f"t{toks[0]}", known=226)
    assert list(table["#1"]) == ["'t7' 0.50"] and list(table["#2"]) == ["<id 230: no token> 0.25"]


def test_stream_norms_and_the_recomputed_difference():
    resid = torch.tensor([[[3.0, 4.0], [0.0, 1.0]], [[6.0, 8.0], [1.0, 0.0]]])  # (L+1=2, T=2, d=2)
    assert stream_norms(resid).tolist() == [[5.0, 1.0], [10.0, 1.0]]
    assert largest_difference(resid[1], resid[1] + torch.tensor([0.0, -0.25])) == 0.25


def test_logit_lens_rows_feed_the_table_shape():
    model = random_decoder(tiny_config())
    resid = torch.randn(model.config.n_layers + 1, model.config.d_model)
    probs, ids = logit_lens(model, resid, top=3)
    table = lens_top_tokens(probs, ids, lambda toks: str(toks[0]))
    assert table.shape == (model.config.n_layers + 1, 4)


def test_the_walkthrough_follows_a_parallel_block_to_the_model_s_own_output():
    """GPT-NeoX's block: the FFN reads the block's input, not h; the recomputed output is the model's."""
    from txviz import trace
    from txviz.analysis.block import block_equation
    from tests.helpers.tiny import random_ids

    model = random_decoder(tiny_config(parallel_block=True, norm="layernorm", ffn="gelu_mlp", rotary_dims=4))
    resid = trace(model, random_ids(model.config, 7), capture=["resid"])["resid"]  # (L+1, B, T, d)
    for layer in range(model.config.n_layers):
        steps, out = block_walkthrough(model, resid[layer, 0], layer)
        torch.testing.assert_close(out, resid[layer + 1, 0], rtol=1e-5, atol=1e-5)
        assert steps[4].equation.startswith("b = ") and "(x" in steps[4].equation
    assert "y = x + " in block_equation(model.config) and "h = x" not in block_equation(model.config)
    assert "h = x" in block_equation(tiny_config())
