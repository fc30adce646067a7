"""The memory calculator's model: a published preset or an uploaded config.json, and the line that says
what sets its memory."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.ui.widgets import counted, limit_text, plain
from txviz.analysis.kv import memory_model, presets
from txviz.loading.errors import ModelLoadError

PRESET, UPLOAD = "Preset", "Your config.json"
FAMILIES = ("Llama, Llama 4, Mistral, Mixtral, Qwen2/Qwen3 (and their MoE), Qwen3-Next, Gemma 1–3, Phi, Phi-3, Falcon, "
            "GPT-2, GPT-NeoX, GPT-J, BLOOM, MPT, OLMo, OLMo 2, StarCoder2, Cohere, Command R7B, SmolLM3, gpt-oss, "
            "OLMoE, Granite-MoE, Jamba, Granite 4.0 hybrids, DeepSeek-V2/V3 and Kimi K2 (MLA)")
PRESET_BY_NAME = {fields["name"]: key for key, fields in presets.PRESETS.items()}  # the box shows names


def model_choice() -> tuple[memory_model.MemoryModel, str] | None:
    """The model the calculator describes and an identity that changes whenever it does; None while
    the upload is chosen but no readable file is there."""
    max_config = cache.limits().max_config_bytes
    if st.radio("Model from", (PRESET, UPLOAD), key="mem_source", horizontal=True) == PRESET:
        chosen = PRESET_BY_NAME[st.selectbox("Preset", list(PRESET_BY_NAME), key="mem_preset")]
        return memory_model.preset(chosen), f"preset:{chosen}"
    upload = st.file_uploader(f"A Hugging Face config.json (at most {limit_text(max_config)})", type=["json"],
                              key="mem_upload",
                              max_upload_size=max(1, -(-max_config // 2**20)),
                              help=f"Any causal LM's config.json: {FAMILIES}; another family is read by a "
                                   f"generic rule that says what it assumed. At most {max_config:,} bytes.")
    if upload is None:
        st.info("Upload a model's config.json to size it; switch back to *Preset* for the published models.")
        return None
    try:
        model = memory_model.MemoryModel.from_config_json(upload.getvalue(), upload.name, max_bytes=max_config)
        return model, f"upload:{upload.file_id}"
    except (ModelLoadError, ValueError) as error:
        # named: a larger file the browser refuses later leaves this one, and this error, in place
        st.error(f"Could not read {plain(upload.name)}: {plain(error)}")
        return None


def _layers(spec: memory_model.MemoryModel) -> str:
    """The layers' kinds: each group where some keep chunks or no K/V or apply no positions, else the window."""
    windows_only = {group.kind for group in spec.layer_groups} <= {"sliding_attention", "full_attention"} \
        and not any(group.positionless for group in spec.layer_groups)
    if not windows_only:
        return ", layers: " + " + ".join(group.label + (f" (window {group.window:,})" if group.window else "")
                                         for group in spec.layer_groups)
    if spec.sliding_window:
        return (f", sliding window {spec.sliding_window}" + ("" if spec.window_layers == spec.n_layers else
                                                             f" on {spec.window_layers} of {spec.n_layers} layers"))
    return ""


def describe(spec: memory_model.MemoryModel) -> str:
    """One line on what sets the model's memory: kind, heads, windows, MLA latent, experts, source."""
    windows = _layers(spec)
    latent = (f", MLA: a {spec.latent_dim}-wide latent + a {spec.rope_dim}-wide RoPE key cached per token and layer"
              if spec.latent_dim else "")
    experts = (f", {spec.n_experts} experts, {spec.experts_per_token} per token ({spec.n_params / 1e9:,.1f} B "
               f"parameters held, {(spec.active_params or spec.n_params) / 1e9:,.1f} B run per token)"
               if spec.n_experts else f", {spec.n_params / 1e9:,.2f} B parameters")
    published = f", published as {spec.weight_format.scheme}" if spec.weight_format else ""
    sinks = (f", {spec.attention_sinks} attention sinks per layer (parameters, no KV)"
             if spec.attention_sinks else "")
    return (f"**{plain(spec.name)}** — {spec.kind}: {counted(spec.n_layers, 'layer')}, "
            f"{counted(spec.n_heads, 'query head')}, "
            f"{counted(spec.kv_heads, 'KV head')}, head_dim {spec.head_dim}, d_model {spec.d_model}"
            f"{windows}{latent}{sinks}{experts}{published}"
            + (f". Source: {plain(spec.source)}" if spec.source else "."))
