"""The Block page writes the loaded model's own block: its norm and its FFN, read from its config.

A GPT-2 checkpoint (LayerNorm, GELU MLP, biases) built with transformers in a ``TXVIZ_MODEL_DIRS`` folder,
a shipped zoo variant (RMSNorm, SwiGLU) and a shipped MoE variant, each opened in the app; the equation
shown and the walkthrough's step names must name that model's own pieces and none of the others'.
"""

from __future__ import annotations

import pytest

from tests.helpers.hf_reference import needs_transformers
from tests.helpers.apptest import no_errors, open_at
from tests.helpers.byte_tokenizer import ByteLevelTokenizer
from tests.helpers.gemma_standin import gemma_home  # noqa: F401  (a fixture)
from tests.helpers.tiny import tiny_config
from tests.helpers.tiny_hf import GPT2_BASE, randomize_, save
from txviz.analysis.block import block_equation
from txviz.loading.zoo import SHIPPED_ZOO


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    """A random GPT-2 (tanh GELU, LayerNorm with biases) with a byte-level tokenizer that fits its vocabulary."""
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = tmp_path_factory.mktemp("models")
    tokenizer = ByteLevelTokenizer()
    config = GPT2Config(**{**GPT2_BASE, "vocab_size": tokenizer.vocab_size}, attn_implementation="eager")
    directory = save(randomize_(GPT2LMHeadModel(config), seed=0).eval(), folder / "gpt2")
    tokenizer._tokenizer.save(str(directory / "tokenizer.json"))
    return folder, directory


def block_page(model_path: str):
    at = open_at("block", model_path, "Mary saw a kite and she ran to it.")
    no_errors(at)
    [equation] = [str(e.value) for e in at.get("latex")]
    return at, equation, list(at.dataframe[0].value["step"])


@needs_transformers
def test_a_gpt2_block_shows_layernorm_and_a_gelu_mlp(gpt2_dir, monkeypatch):
    folder, directory = gpt2_dir
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(folder))
    at, equation, steps = block_page(str(directory))
    assert at.session_state["model"] != "default"
    assert r"\mathrm{LayerNorm}(x)" in equation and r"\mathrm{GELU}_{\tanh}" in equation
    assert "RMSNorm" not in equation and "SiLU" not in equation and "W_3" not in equation  # no gate
    assert steps[1] == "LayerNorm (attention)" and steps[5] == "GELU_tanh MLP"
    assert "mean(x)" in at.dataframe[0].value["computes"][1]


def test_a_zoo_block_shows_rmsnorm_and_swiglu():
    _, equation, steps = block_page(str(SHIPPED_ZOO / "base"))
    assert r"\mathrm{RMSNorm}(x)" in equation and r"\mathrm{SiLU}(W_1 \hat h)\odot W_3" in equation
    assert "LayerNorm" not in equation and "GELU" not in equation and r"\sum" not in equation
    assert steps[1] == "RMSNorm (attention)" and steps[5] == "SwiGLU FFN"


def test_a_zoo_mixture_shows_its_experts_and_top_k():
    _, equation, steps = block_page(str(SHIPPED_ZOO / "moe_top1"))
    assert r"\sum_{e\in\mathrm{top}\text{-}1} g_e(\hat h)" in equation and r"\mathrm{SiLU}(W_{1,e}" in equation
    assert steps[5] == "MoE FFN (4 SwiGLU FFN experts, top-1)"


def test_gemma_s_block_table_has_the_sandwich_norms_rows_and_names_qk_norm(gemma_home):
    """The post-norms have rows of their own, so attention's and the FFN's rows show their
    own outputs (their values: tests/analysis/test_block_walkthrough.py)."""
    at, _, steps = block_page("gemma3-270m")
    assert steps == ["input x", "RMSNorm (attention)", "multi-head attention", "RMSNorm′ (post-attention)",
                     "residual add", "RMSNorm (FFN)", "GeGLU FFN", "RMSNorm″ (post-FFN)", "residual add"]
    table = at.dataframe[0].value
    assert "QK-norm" in table["computes"][2] and table["computes"][4] == "h = x + RMSNorm′(attention(a))"


@pytest.mark.parametrize("changes, present, absent", [
    (dict(norm="layernorm", ffn="gelu_mlp", gelu_approximate="none"), [r"\mathrm{GELU}(W_1", "LayerNorm"],
     ["tanh", "RMSNorm", "SiLU"]),
    (dict(ffn="gelu_mlp", mlp_bias=True), [r"\hat h + b_1) + b_2", "RMSNorm"], ["LayerNorm"]),
    (dict(ffn="gelu_mlp", n_experts=4, top_k=2), [r"top}\text{-}2", r"W_{2,e}\,\mathrm{GELU}_{\tanh}"], ["SiLU"]),
])
def test_the_equation_follows_every_choice_of_the_config(changes, present, absent):
    equation = block_equation(tiny_config(**changes))
    assert all(p in equation for p in present), equation
    assert not any(a in equation for a in absent), equation
