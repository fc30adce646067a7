"""The prompt-pair view: the chosen head's map on the prompt and on a second prompt of the
same token length, side by side with their difference. Attention is where a head looks; what changes
between two prompts that differ in one word shows what that word changes in it (and what a causal
model cannot change: rows before the word are identical)."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.figures import big_maps, causal_charts
from app.services.prompts import PromptError
from app.services.traces import display_tokens
from app.ui.widgets import plain
from txviz.analysis.heads.metrics import hide_sink


def prompt_pair(view, layer: int, head: int, hide: bool) -> None:
    """Lazy: the second prompt is traced only while the expander is open."""
    box = st.expander("Compare with a second prompt of the same length (this head, side by side)", expanded=False,
                      key="pair_open", on_change="rerun")
    with box:
        if not box.open:
            return
        if view.big:
            st.info(f"The pair view draws both maps cell by cell, so it is shown for prompts of up to "
                    f"{big_maps.MAX_MAP_CELLS} tokens; this one has {view.n:,}.")
            return
        second = st.text_input("Second prompt: change a word for one of the same token count", key="pair_prompt",
                               max_chars=2000, placeholder="e.g. the prompt with one word swapped")
        if second.strip():
            _draw_pair(view, second, layer, head, hide)


def _draw_pair(view, second: str, layer: int, head: int, hide: bool) -> None:
    try:
        other = cache.get_trace(view.source, second, view.bos)
    except PromptError as error:
        st.warning(plain(error))
        return
    if other.n_tokens != view.n:
        st.warning(f"The prompt has {view.n} tokens and the second prompt {other.n_tokens}: the maps are compared "
                   "cell by cell, so they need the same token count. Change a word for one of the same token count.")
        return
    first_map, second_map = view.traced.trace.attn(layer, head), other.trace.attn(layer, head)
    if hide:
        first_map, second_map = hide_sink(first_map), hide_sink(second_map)
    second_tokens = display_tokens(view.loaded, other)
    st.plotly_chart(causal_charts.pair_maps(first_map.numpy(), second_map.numpy(), view.tokens, second_tokens,
                                            title=f"Layer {layer}, head {head} on both prompts"), key="pair_maps")
    changed = [i for i, (a, b) in enumerate(zip(view.traced.ids, other.ids)) if a != b]
    delta = (first_map - second_map).abs()
    unchanged_rows = float(delta[:changed[0]].max()) if changed and changed[0] > 0 else 0.0
    st.caption(f"The prompts differ at token(s) {', '.join(map(str, changed)) or 'none'}; the largest change of this "
               f"head's weights is {float(delta.max()):.3g}, and {unchanged_rows:.3g} in the rows before the first "
               "difference (a causal model's rows cannot see what comes after them).")
