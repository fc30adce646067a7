"""Decoding, step by step: the model writes one token at a time from the sidebar's prompt, and each step
can be opened afterwards — what the sampler chose between, what the new token attends to, what the
cache holds, the layer where the token was decided — and continued with another candidate."""

from __future__ import annotations

import streamlit as st

from app.app_pages.decoding import branches, generation, lens_strip, settings, step_view
from app.app_pages.decoding.view import DecodingView
from app.ui import sidebar, state

st.title("Decoding, step by step")
st.markdown(
    "A decoder writes by predicting the next token, appending it and predicting again. Each step runs only "
    "the newest token through the model: its query attends to the **KV cache** of every earlier token, so a "
    "step costs O(n), not the O(n²) of running the whole text again. The logits become a distribution, the "
    "**sampler** reshapes it (temperature, top-k, top-p) and draws one token. Generate, then open any step.")

source, loaded = sidebar.current()
state.keep({"dec_lens_by": "rank"})
inputs = settings.draw(source, loaded)
run = generation.draw(loaded, inputs)
if run is not None and not run.steps:
    st.info("The run was stopped before its first token: nothing to show. Press Generate again.")
elif run is not None:
    generation.say_how_it_ended(run, loaded.tokenizer)
    view = DecodingView.of(loaded, inputs, run)
    branches.stream_asked(view)
    step_view.draw(view)
    lens_strip.draw(view)
