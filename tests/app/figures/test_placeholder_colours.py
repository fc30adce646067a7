"""No figure the app draws carries a colour that Streamlit's plotly theme takes for a placeholder.

Streamlit sends its theme's colours as #000001–#000040 and its front end replaces every occurrence in a
figure's JSON (``replaceAll`` in PlotlyChart.js), so a colour scale with such a stop is repainted: Magma's
#000004 came out pink on the block page. The app's own charts are gathered from every
page and every tab, opened through AppTest on the tiny SmolLM2 stand-in; the theme's template, where the
placeholders belong, is left out."""

from __future__ import annotations

import json

import numpy as np

from app.figures import charts
from tests.helpers.apptest import PAGE_NAMES, no_errors, open_at
from tests.helpers.gemma_standin import smollm2_home  # noqa: F401  (a fixture)

TAB_KEYS = {"heads": "heads_tab", "kv_cache": "kv_tab", "moe": "moe_tab", "tradeoffs": "tradeoffs_tab"}


def streamlit_placeholders() -> set[str]:
    from streamlit.elements.lib import streamlit_plotly_theme as theme

    return {value for name, value in vars(theme).items() if name.isupper() and isinstance(value, str)
            and value.startswith("#0000")}


def placeholders_in(spec: dict) -> set[str]:
    """The placeholder colours in a figure's JSON (``spec``: data and layout), outside the theme's template."""
    layout = {k: v for k, v in spec.get("layout", {}).items() if k != "template"}
    text = json.dumps({"data": spec.get("data"), "layout": layout}).lower()
    return {color for color in streamlit_placeholders() if color in text}


def test_the_app_knows_every_placeholder_streamlit_has():
    assert len(streamlit_placeholders()) >= 30  # the module was read: #000001 … #000040
    assert streamlit_placeholders() <= charts.STREAMLIT_PLACEHOLDERS


def test_the_residual_heatmap_keeps_magma_without_a_placeholder():
    figure = charts.residual_norms(np.arange(6.0).reshape(3, 2), ["a", "b"])
    assert placeholders_in(json.loads(figure.to_json())) == set()
    assert figure.data[0].colorscale[0] == (0.0, "rgb(0, 0, 4)")  # Magma's own first colour, as rgb()
    assert [c for _, c in figure.data[0].colorscale[1:]] == [c for _, c in charts.colorscale("Magma")[1:]]


def _charts(at) -> dict[str, dict]:
    return {element.proto.id: json.loads(element.proto.spec) for element in at.get("plotly_chart")}


def test_no_chart_on_any_page_or_tab_uses_a_placeholder_colour(smollm2_home):
    seen: dict[str, dict] = {}
    for page in PAGE_NAMES:
        at = open_at(page, None, "The cat sat on the mat.")
        no_errors(at)
        seen |= {f"{page}: {key}": spec for key, spec in _charts(at).items()}
        for label in [tab.label for tab in at.tabs][1:] if page in TAB_KEYS else []:
            tab = open_at(page, None, "The cat sat on the mat.", state={TAB_KEYS[page]: label})
            no_errors(tab)
            seen |= {f"{page} / {label}: {key}": spec for key, spec in _charts(tab).items()}
    assert any("resid_norms" in name for name in seen) and len(seen) >= 15, sorted(seen)
    assert {name: placeholders_in(spec) for name, spec in seen.items() if placeholders_in(spec)} == {}
