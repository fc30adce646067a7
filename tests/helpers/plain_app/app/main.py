"""A page that writes hostile text through ``widgets.plain`` into every kind of Markdown Streamlit renders
(markdown, caption, alerts, expander, tab and metric labels), for the browser test that nothing of it
becomes a link, an image or a tag there (tests/browser/test_plain_in_browser.py)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app.ui.widgets import plain  # noqa: E402
from tests.helpers.hostile_text import HOSTILE_LINES  # noqa: E402

for line in HOSTILE_LINES:
    st.markdown(plain(line))
    st.caption(plain(line))
    st.error(plain(line))
    st.warning(plain(line))
    st.info(plain(line))
    with st.expander(plain(line)):
        st.write("")
    st.tabs([plain(line)])
    st.metric(plain(line), 1)
