"""txviz web app: ``streamlit run app/main.py``. Page config, the shared sidebar, navigation."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app import sidebar, state  # noqa: E402

st.set_page_config(page_title="txviz — inside a transformer", page_icon=":material/biotech:", layout="wide")
state.init()

PAGES = {
    "Look inside": [
        st.Page("app_pages/attention.py", title="Attention", icon=":material/grid_on:", url_path="attention", default=True),
        st.Page("app_pages/heads.py", title="Heads & coreference", icon=":material/explore:", url_path="heads"),
        st.Page("app_pages/block.py", title="One block, end to end", icon=":material/view_agenda:", url_path="block"),
    ],
    "Positions & memory": [
        st.Page("app_pages/positions.py", title="Positions", icon=":material/rotate_right:", url_path="positions"),
        st.Page("app_pages/kv_cache.py", title="KV cache & memory", icon=":material/memory:", url_path="kv-cache"),
    ],
}

navigation = st.navigation(PAGES)
sidebar.render()
state.sync_url()
navigation.run()
