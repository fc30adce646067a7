"""The generation's settings: new tokens, chat template, sampler (greedy, or temperature with top-k and
top-p), seed. Each is a URL key (app/ui/state.py), so a link opens on the same run's settings; together
with the sidebar's model, prompt and BOS policy they are the inputs a run is kept under."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.services.decoding import SAMPLERS, DecodingInputs
from app.ui import state
from app.ui.widgets import bounded_slider

MOST_NEW = 256  # the slider's end, below the server's own limit
SAMPLER_NAMES = {"greedy": "greedy", "sample": "sample"}


def draw(source: str, loaded) -> DecodingInputs:
    most_new = min(MOST_NEW, cache.limits().max_new_tokens, loaded.config.max_seq_len - 1)  # one prompt token at least
    has_template = bool(loaded.tokenizer.chat_template)
    # the toggle goes under the sampler: three columns clipped "sample" and "Chat template" in an 800 px window
    c1, c2 = st.columns([3, 2])
    state.within("dec_new", 1, most_new)
    n_new = bounded_slider(c1, "New tokens", 1, most_new, key="dec_new")
    sampler = c2.segmented_control("Sampler", SAMPLERS, key="dec_sampler", format_func=SAMPLER_NAMES.get,
                                   help="Greedy takes the most probable token every step. Sampling divides the "
                                        "logits by the temperature, keeps the top-k tokens and the top-p nucleus, "
                                        "renormalises and draws one with the seed.") or "greedy"
    if has_template:
        chat = c2.toggle("Chat template", key="dec_chat", help="Wrap the prompt as a user message.")
    else:  # shown off, as the run is made; the reader's choice waits in dec_chat for a model that has a template
        chat = c2.toggle("Chat template", value=False, disabled=True, key="dec_chat_none",
                         help="This model has no chat template: the prompt goes in as it is.")
    sampling = _sampling_controls() if sampler == "sample" else {}
    return DecodingInputs(source=source, prompt=state.get("prompt"), bos=state.get("bos"),
                          chat=bool(chat and has_template), max_new_tokens=int(n_new), sampler=sampler, **sampling)


def _sampling_controls() -> dict:
    """Temperature, top-k (0: off), top-p (1: off) and the seed of the draw."""
    for key, low, high in (("dec_temp", 0.05, 3.0), ("dec_top_p", 0.05, 1.0)):
        state.put(key, min(max(float(state.get(key)), low), high))
    state.put("dec_top_k", max(int(state.get("dec_top_k")), 0))
    c1, c2, c3, c4 = st.columns(4)
    temperature = c1.slider("Temperature", 0.05, 3.0, step=0.05, key="dec_temp",
                            help="Below 1 sharpens the distribution, above 1 flattens it.")
    top_k = c2.number_input("Top-k (0: off)", min_value=0, step=1, key="dec_top_k",
                            help="Keep only the k most probable tokens.")
    top_p = c3.slider("Top-p (1: off)", 0.05, 1.0, step=0.05, key="dec_top_p",
                      help="Keep the most probable tokens until their probability reaches p (the nucleus).")
    seed = c4.number_input("Seed", min_value=0, max_value=state.MAX_EXACT_INT, step=1, key="dec_seed",
                           help="The same seed draws the same tokens.")
    return {"temperature": float(temperature), "top_k": int(top_k), "top_p": float(top_p), "seed": int(seed)}
