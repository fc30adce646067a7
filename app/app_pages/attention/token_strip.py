"""The prompt's tokens as a strip, the run's cost in a sentence, and a long prompt's capture plan."""

from __future__ import annotations

import streamlit as st
import torch

from app.figures import charts
from app.ui import state
from app.ui.widgets import plain
from txviz.loading.tokenizer.token_text import readable_tokens

STRIP_OPEN_TOKENS = 200  # a longer prompt's token strip starts folded
STRIP_HEIGHT_PX = 220  # past this the strip scrolls


def shown_tokens(loaded, traced) -> list:
    """A character a byte-level BPE split over tokens ("\\xf0\\x9f" + "\\x98\\x80") is shown whole on the
    token ending it."""
    return readable_tokens([loaded.tokenizer.token_bytes(i) for i in traced.ids], traced.special, traced.tokens)


def token_strip(shown, traced, config, bos: str) -> None:
    n = traced.n_tokens
    strip = charts.token_strip_html([t.text for t in shown], list(traced.special),
                                    titles=[t.tooltip(i) for i, t in enumerate(shown)], max_height_px=STRIP_HEIGHT_PX)
    if n <= STRIP_OPEN_TOKENS:
        st.markdown(strip, unsafe_allow_html=True)
    else:  # a long prompt's strip would push every chart off the screen
        with st.expander(f"The {n:,} tokens (scrolls)", expanded=False):
            st.markdown(strip, unsafe_allow_html=True)
    st.caption(f"{n:,} tokens · the whole model ran once in {traced.seconds * 1000:,.0f} ms and every "
               f"{config.n_layers} × {config.n_heads} map below comes from that run. "
               f"Policy before the prompt: **{plain(state.describe_bos(bos, shown[0].text if shown else None))}** (sidebar).")


def capture_plan_note(loaded, n: int, plan) -> None:
    """A long prompt: what keeping every map would cost, what this trace keeps instead, and how exact it is."""
    from txviz.capture.cost import capture_cost
    from txviz.limits import format_bytes

    config = loaded.config
    full = capture_cost(config, n, ("attn_probs",), element_bytes=loaded.dtype.itemsize)
    st.info(f"**A long prompt: cost-aware capture.** Keeping every map would take "
            f"{format_bytes(full.stored_bytes)} ({config.n_layers} layers × {config.n_heads} heads × {n:,}² × "
            f"{loaded.dtype.itemsize} bytes); this trace keeps **{format_bytes(plan.cost.stored_bytes)}**: "
            f"{plan.reason}. Every head's metrics come from per-row summaries computed during the pass and "
            "equal those of the full maps to float32 rounding (tested); "
            + ("a head's map is rebuilt from the kept queries and keys when you open it, equal to the model's "
               "own to float32 rounding." if "q_rot" in plan.capture else
               "the maps are kept in float16 (about 3 significant digits)." if plan.maps.dtype == torch.float16
               else "the maps are the model's own."))
