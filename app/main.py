"""txviz web app: ``streamlit run app/main.py``. Page config, the shared sidebar, navigation."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app import cache  # noqa: E402
from app.ui import errors, server_files, sidebar, state  # noqa: E402
from app.ui.widgets import plain  # noqa: E402
from txviz.limits import LimitError  # noqa: E402

# the favicon is a file the server sends: a Material icon or an emoji as favicon is fetched by the browser from
# Google's or a CDN's servers, which fails offline and tells them who opened the app
st.set_page_config(page_title="txviz — inside a transformer", page_icon=str(ROOT / "assets" / "favicon.png"),
                   layout="wide")
try:
    cache.limits()
except LimitError as error:  # the operator's settings, not the visitor's input: say which and stop
    st.error(f"txviz is misconfigured: {plain(error)}")
    st.stop()
server_files.guard(cache.limits().max_config_bytes)  # what departed sessions left on the server, and uploads' caps
state.init()

ATTENTION = st.Page("app_pages/attention/page.py", title="Attention", icon=":material/grid_on:", url_path="attention")


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
        st.Page("app_pages/heads/page.py", title="Heads & coreference", icon=":material/explore:", url_path="heads"),
        st.Page("app_pages/block/page.py", title="One block, end to end", icon=":material/view_agenda:", url_path="block"),
        st.Page("app_pages/decoding/page.py", title="Decoding, step by step", icon=":material/keyboard:", url_path="decoding"),
    ],
    "Positions & memory": [
        st.Page("app_pages/positions/page.py", title="Positions", icon=":material/rotate_right:", url_path="positions"),
        st.Page("app_pages/kv_cache/page.py", title="KV cache & memory", icon=":material/memory:", url_path="kv-cache"),
    ],
    "Design tradeoffs": [
        st.Page("app_pages/moe/page.py", title="Mixture of Experts", icon=":material/call_split:", url_path="moe"),
        st.Page("app_pages/tradeoffs/page.py", title="Tradeoffs", icon=":material/balance:", url_path="tradeoffs"),
    ],
}

navigation = st.navigation(PAGES)
if navigation is HOME:
    _to_attention()


def _sidebar_and_page() -> None:
    sidebar.render()
    state.sync_url()
    note = state.url_note()
    if note:
        st.sidebar.caption(note)
    navigation.run()
    state.sync_url()  # what the page's own widgets chose in this run (the Heads page's marks) is in the link now


errors.guarded(_sidebar_and_page)
