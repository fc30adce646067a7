"""The sharing KV heads tab (Ainslie et al. 2023): the loaded model with more or fewer KV
heads, measured on a shipped text; then which layers can share (layer_sweep)."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.app_pages.kv_cache import layer_sweep
from app.services.prompts import PromptError
from app.services.texts import shipped_texts
from app.ui import state
from app.ui.widgets import percent_change, plain
from txviz.analysis.kv.sharing import describe_regrouping, kv_head_options
from txviz.loading.display_name import display_name

DEFAULTS = {"live_tokens": 256}  # kept across tab visits by state.keep on the page


def draw(source, loaded) -> None:
    config = loaded.config
    st.subheader(f"Live, on the loaded model ({plain(display_name(loaded))})")
    options = kv_head_options(config)
    state.follow("live_kv", source, {"live_kv": config.n_kv_heads})
    n_kv = st.segmented_control("KV heads", list(options), key="live_kv",
                                format_func=lambda n: f"{n} ({'MHA' if n == config.n_heads else 'MQA' if n == 1 else 'GQA'})")
    n_kv = int(n_kv if n_kv in options else config.n_kv_heads)
    st.caption(describe_regrouping(config.n_kv_heads, n_kv))
    text_tokens = st.select_slider("Tokens of the shipped text", [128, 256, 512, 1000], key="live_tokens")
    text_name = next(iter(shipped_texts()))
    try:
        report = cache.get_kv_counterfactual(source, n_kv, text_name, int(text_tokens))
    except PromptError as error:  # over the memory budget: say so
        st.warning(plain(error))
        return
    used = report.n_predictions + 1  # the text's tokens that were run (each but the last predicts the next)
    if used < text_tokens:  # fewer than asked: Gemma reads the shipped text as 987 tokens, the zoo holds 128
        why = (f"this model's context holds {used}" if used == config.max_seq_len
               else f"the text is {used} tokens long for this model's tokenizer")
        st.caption(f"Measured on **{used}** tokens, not {text_tokens}: {why}.")
    quality(report)
    if n_kv < config.n_kv_heads:
        st.warning("Mean-pooling KV heads without further training (Ainslie et al. train 5% more after converting) "
                   "shows how much each head's own keys and values matter: the quality loss above is the real one.")
    layer_sweep.draw(source, config, options, text_name, int(text_tokens), used)


def quality(report) -> None:
    """The variant's measured cache and quality against the original model (a kv_sharing.QualityReport)."""
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("KV cache (measured)", f"{report.kv_bytes_variant / 2**20:.2f} MiB",
              **percent_change(report.kv_bytes_variant / report.kv_bytes_original - 1, lower_is_better=True))
    m2.metric("Perplexity", f"{report.perplexity_variant:.2f}", delta=f"original {report.perplexity_original:.2f}",
              delta_color="off", delta_arrow="off")  # a reference value, not a change: no arrow
    m3.metric("Top-1 agreement", f"{report.top1_agreement * 100:.1f}%")
    m4.metric("Mean KL(original‖variant)", f"{report.mean_kl:.3g} nats")
