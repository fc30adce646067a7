"""The generic rule for a config.json of a model_type txviz does not know.

It is read as a Llama-like decoder: ``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``,
``intermediate_size`` and ``vocab_size`` (or a common alias: n_layer, n_embd, n_head, n_inner,
ffn_dim, ...) are required and a config without them is refused, naming them; ``num_key_value_heads``
(else as many as query heads: MHA), ``head_dim`` (else hidden_size / heads), ``sliding_window`` (on
every layer, or as ``layer_types`` says), ``tie_word_embeddings`` (else tied, transformers' default),
``attention_bias`` / ``mlp_bias`` (else none), ``num_local_experts`` or ``num_experts`` with
``num_experts_per_tok`` (experts of ``moe_intermediate_size`` or ``intermediate_size`` on every layer).
RMSNorm twice per layer, and a gated MLP unless ``hidden_act`` names a plain GELU/ReLU. Every
assumption is returned with the geometry, for the caller to show as a warning.
"""

from __future__ import annotations

from dataclasses import replace

from txviz.geometry.decoder import read_decoder
from txviz.geometry.families import LLAMA
from txviz.geometry.fields import Fields
from txviz.geometry.geometry import Geometry

PLAIN_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu", "quick_gelu")


def read_generic(f: Fields, model_type: str) -> Geometry:
    raw = f.raw
    gated = raw.get("hidden_act", raw.get("activation_function")) not in PLAIN_ACTIVATIONS
    said = [f"model_type {model_type!r} is not one txviz knows: read as a Llama-like decoder "
            f"(RMSNorm before attention and FFN, {'a gated (SwiGLU-style)' if gated else 'a plain'} MLP, "
            f"no biases unless attention_bias/mlp_bias say so)"]
    for name, meaning in (("num_key_value_heads", "as many KV heads as query heads (MHA)"),
                          ("head_dim", "head_dim = hidden_size / num_attention_heads"),
                          ("tie_word_embeddings", "tied input and output embeddings (transformers' default)")):
        if not f.has(name):
            said.append(f"no {name}: assumed {meaning}")
    experts = "num_local_experts" if f.has("num_local_experts") else "num_experts" if f.has("num_experts") else None
    moe = "none"
    if experts and f.has("num_experts_per_tok"):
        moe = "mixtral"
        raw = {**raw, "num_local_experts": raw[experts],
               "intermediate_size": raw.get("moe_intermediate_size", raw.get("intermediate_size"))}
        said.append(f"{experts} experts on every layer, each as wide as "
                    f"{'moe_intermediate_size' if 'moe_intermediate_size' in f.raw else 'intermediate_size'}")
    traits = replace(LLAMA, gated=gated, tied_default=True, windows="listed", moe=moe)
    fields = Fields(raw, model_type, f.seen)
    fields.count("intermediate_size")  # required here, though Llama-like families have it anyway
    return read_decoder(fields, traits, model_type, assumptions=tuple(said))
