"""The floor under the Attention page's new-prompt time (its target is 0.7 s): the least a page must do
for a new prompt, served by Streamlit like the app, so that ``python -m tests.helpers.bench_floor`` can time
it in chromium beside the real page. ``TXVIZ_FLOOR`` picks how much of the page is kept:

* ``sidebar``: the app's own sidebar (the prompt box, the model picker) and the prompt echoed in the
  ``heatmap`` container: Streamlit's round trip and redraw of a page with that sidebar, no model work;
* ``trace``: and the page's trace of the prompt and its head table (the server's necessary work), shown as
  one line of text;
* ``chart``: and the layer profile, the page's one plotly chart (tools/first_heatmap.py waits for a
  plotly chart on this page, so a page without one fails the newcomer's check).

Everything else the page draws (the head grid, the map, the head view, the token strip, the table, the
explanations) is left out: the real page's time minus ``chart``'s is what they cost."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]  # the repository: its ``app`` package, not this folder
sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app import cache  # noqa: E402
from app.app_pages.attention.layer_profile import layer_profile  # noqa: E402
from app.ui import sidebar, state  # noqa: E402
from txviz.analysis.heads.metrics import METRICS  # noqa: E402

LEVELS = ("sidebar", "trace", "chart")
level = os.environ.get("TXVIZ_FLOOR", "chart")
st.set_page_config(page_title="txviz floor", layout="wide")
if level not in LEVELS:
    st.error(f"TXVIZ_FLOOR must be one of {LEVELS}, not {level!r}")
    st.stop()
state.init()
sidebar.render()
st.title("Attention")
prompt, bos = state.get("prompt"), state.get("bos")
line = f"prompt {hashlib.sha256(prompt.encode()).hexdigest()[:12]}"
if level != "sidebar":
    source, loaded = sidebar.current()
    traced, _ = cache.get_attention_trace(source, prompt, bos)
    table = cache.get_head_table(source, prompt, bos).astype({m: float for m in METRICS})
    line += f": {traced.n_tokens} tokens, {len(table)} heads"
with st.container(key="heatmap"):
    st.write(line)
if level == "chart":
    layer_profile(table)
