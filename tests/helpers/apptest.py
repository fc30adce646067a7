"""AppTest helpers: start the app on a model, pick a model in the sidebar, read charts back."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


def app_on(model: str | None = None, prompt: str | None = None, timeout: float = 120):
    """An AppTest of the app, opened on ``model`` (a path; None: the default) with ``prompt``."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(MAIN, default_timeout=timeout)
    if model is not None:
        at.query_params["model"] = model
    if prompt is not None:
        at.query_params["prompt"] = prompt
    return at


def open_at(page: str, model: str | None = None, prompt: str | None = None, timeout: float = 120,
            state: dict | None = None):
    """The app run once, opened straight on ``page`` (a name in PAGE_NAMES) as a link to its address
    (``/positions``) opens it, instead of a run of the Attention page first and a switch: that first run
    traced and drew the Attention page for every new model or prompt (~0.12 CPU s, measured 2026-12-02).
    ``state`` is session state set before that run (a tab's key and label: the page opens on that tab, as
    a click on it would show it, without first drawing the tab that opens by default, ~0.2 CPU s)."""
    at = aim_at(app_on(model, prompt, timeout), page)
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.run()
    assert_opened(at, page)
    return at


def aim_at(at, page: str):
    """Point ``at``'s next run at ``page`` before any run: ``AppTest.switch_page`` finds a page's hash
    only once a run has registered the pages, so the hash is set as Streamlit computes it for
    ``st.Page(url_path=...)``, app/main.py's url_path being the page's name with dashes."""
    from streamlit.util import calc_hash

    at._page_hash = calc_hash(page.replace("_", "-"))
    return at


def assert_opened(at, page: str) -> None:
    """The page that ran is ``page``'s file (not the default page, had its url_path changed)."""
    opened = at._registered_pages.get(at._page_hash, {}).get("script_path")
    assert opened and Path(str(opened)).resolve() == (Path(MAIN).parent / page_path(page)).resolve(), opened


def pick_model(at, name: str):
    """Choose the picker entry of the zoo variant ``name`` (its label starts "name — ")."""
    picker = at.sidebar.selectbox(key="model_choice")
    label = next(o for o in picker.options if o.startswith(f"{name} — "))
    return picker.set_value(label)


def pick_head(at, layer: int | None = None, head: int | None = None):
    """The Attention page's head chosen as a pick on its map does it (the component's handler calls
    ``state.set_head``; AppTest cannot click inside a custom component, and the handler itself is tested
    with crafted messages in tests/app/test_component_messages.py). Run ``at`` after."""
    if layer is not None:
        at.session_state["layer"] = layer
    if head is not None:
        at.session_state["head"] = head
    return at


def chart_ids(at) -> list[str]:
    return [el.proto.id for el in at.get("plotly_chart")]


def chart(at, key: str) -> dict:
    for element in at.get("plotly_chart"):
        if element.proto.id and key in element.proto.id:
            return json.loads(element.proto.spec)
    raise AssertionError(f"no plotly chart with key {key!r}")


def has_chart(at, key: str) -> bool:
    return any(i and key in i for i in chart_ids(at))


def decode(array) -> np.ndarray:
    """plotly ≥ 6 ships arrays as {"dtype", "bdata", "shape"}."""
    if isinstance(array, dict) and "bdata" in array:
        values = np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"]))
        shape = array.get("shape")
        if shape:
            values = values.reshape([int(s) for s in str(shape).split(",")])
        return values
    return np.array(array, dtype=object)


def texts(at) -> str:
    """Every markdown, caption, subheader, warning and info on the page, joined, as a reader sees them."""
    parts = []
    for kind in ("markdown", "caption", "subheader", "warning", "info", "latex"):
        parts.extend(str(e.value) for e in at.get(kind))
    return shown("\n".join(parts))


def shown(markdown: str) -> str:
    """Markdown source as its text reads: the escapes of ``widgets.plain`` undone, its word joiners left out."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown).replace("\u2060", "")


def no_errors(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def click_tab(at, key: str, label: str):
    """What a click on the tab ``label`` of the tabs keyed ``key`` does: the run that draws it, with no error."""
    at.session_state[key] = label
    at.run()
    no_errors(at)
    return at


def page_path(name: str) -> str:
    """The page file of ``name`` (attention, heads, block, positions, kv_cache, moe, tradeoffs), as
    ``AppTest.switch_page`` takes it: relative to app/main.py."""
    folder = Path(MAIN).parent / "app_pages" / name / "page.py"
    return f"app_pages/{name}/page.py" if folder.is_file() else f"app_pages/{name}.py"


PAGE_NAMES = ("attention", "heads", "block", "decoding", "positions", "kv_cache", "moe", "tradeoffs")
