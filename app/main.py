"""txviz web app: ``streamlit run app/main.py``. Page config, the shared sidebar, navigation."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app import cache  # noqa: E402
from app.ui import sidebar, state  # noqa: E402
from txviz.limits import LimitError  # noqa: E402

st.set_page_config(page_title="txviz — inside a transformer", page_icon=":material/biotech:", layout="wide")
try:
    cache.limits()
except LimitError as error:  # the operator's settings, not the visitor's input: say which and stop
    st.error(f"txviz is misconfigured: {error}")
    st.stop()
state.init()


def _page_file(name: str) -> str:
    """Transitional while pages move into folders (app_pages/<page>/page.py)."""
    folder = Path(__file__).parent / "app_pages" / name / "page.py"
    return f"app_pages/{name}/page.py" if folder.is_file() else f"app_pages/{name}.py"


ATTENTION = st.Page(_page_file("attention"), title="Attention", icon=":material/grid_on:", url_path="attention")


def _to_attention() -> None:
    st.switch_page(ATTENTION, query_params=st.query_params.to_dict())


# Streamlit serves its default page at "/" only and answers that page's own url_path with "Page not
# found": so "/" is a hidden page that forwards to /attention (with the link's view), and /attention is a
# page like the others.
HOME = st.Page(_to_attention, title="txviz", url_path="home", default=True, visibility="hidden")
PAGES = {
    "": [HOME],
    "Look inside": [
        ATTENTION,
        st.Page(_page_file("heads"), title="Heads & coreference", icon=":material/explore:", url_path="heads"),
        st.Page(_page_file("block"), title="One block, end to end", icon=":material/view_agenda:", url_path="block"),
    ],
    "Positions & memory": [
        st.Page(_page_file("positions"), title="Positions", icon=":material/rotate_right:", url_path="positions"),
        st.Page(_page_file("kv_cache"), title="KV cache & memory", icon=":material/memory:", url_path="kv-cache"),
    ],
    "Design tradeoffs": [
        st.Page(_page_file("moe"), title="Mixture of Experts", icon=":material/call_split:", url_path="moe"),
        st.Page(_page_file("tradeoffs"), title="Tradeoffs", icon=":material/balance:", url_path="tradeoffs"),
    ],
}

navigation = st.navigation(PAGES)
if navigation is HOME:
    _to_attention()
sidebar.render()
state.sync_url()
note = state.url_note()
if note:
    st.sidebar.caption(note)
navigation.run()
