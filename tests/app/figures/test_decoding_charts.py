"""The Decoding page's figures: built from plain dicts (scrubbing redraws four of them per click), so each
must be one plotly's schema accepts and serialize as the validated figure does; the marks they carry
(the sampler's cut, the drawn token, a sliding window's cut, the first top-1 ring) sit where the data says."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from app.figures import decoding_charts

RNG = np.random.default_rng(0)
TOKENS = [f"t{i}" for i in range(30)]
BUILDERS = {
    "sampler": lambda: decoding_charts.sampler_bars(TOKENS[:6], [.4, .2, .1, .1, .05, .05], [.5, .2, .1, .1, .05, .05],
                                                    [.6, .25, .15, 0, 0, 0], 1, show_tempered=True, title="s"),
    "attention row": lambda: decoding_charts.attention_row(RNG.random(30), TOKENS, window=8, title="r"),
    "heads": lambda: decoding_charts.heads_overview(RNG.random((4, 30)), TOKENS, head=2, title="h"),
    "kv": lambda: decoding_charts.kv_bytes([1024, 2048], [1024, 2048], title="k"),
    "lens": lambda: decoding_charts.lens_strip(RNG.integers(1, 500, (5, 7)).astype(float), [3, None, 0, 6, 2],
                                               TOKENS[:5], by="rank"),
}
PANELS = ("sampler", "kv", "attention row", "heads")  # left column top to bottom, then the right


def step_of(figures: list) -> object:
    parts = [(f.to_dict()["data"], f.to_dict()["layout"]) for f in figures]
    return decoding_charts.step_figure([[(parts[0], 240, 110), (parts[1], 170, 70)], [(parts[2], 220, 60), (parts[3], 108, 10)]])


BUILDERS["step"] = lambda: step_of([BUILDERS[name]() for name in PANELS])


@pytest.mark.parametrize("name", list(BUILDERS))
def test_an_unvalidated_figure_is_the_validated_one(name):
    figure = BUILDERS[name]()
    validated = go.Figure(figure.to_dict())
    assert json.loads(figure.to_json()) == json.loads(validated.to_json())


def test_the_sampler_cut_sits_after_the_last_kept_token_and_the_drawn_one_is_outlined():
    shapes = BUILDERS["sampler"]().to_dict()["layout"]["shapes"]
    cut, drawn = shapes
    assert cut["x0"] == cut["x1"] == 2.5  # three tokens kept
    assert (drawn["x0"] + drawn["x1"]) / 2 == pytest.approx(1)
    greedy = decoding_charts.sampler_bars(TOKENS[:3], [.5, .3, .2], [.5, .3, .2], [1, 0, 0], 0, show_tempered=False,
                                          title="g").to_dict()
    assert len(greedy["data"]) == 2 and greedy["layout"]["shapes"][0]["x0"] == 0.5


@pytest.mark.parametrize("window, keys, cut", [(8, 30, 29 - 8 + 0.5), (None, 30, None), (40, 30, None)])
def test_a_sliding_window_shades_the_keys_it_cannot_see(window, keys, cut):
    shapes = decoding_charts.attention_row(np.ones(keys), TOKENS[:keys], window=window, title="").to_dict()["layout"].get("shapes", [])
    assert (shapes[1]["x0"] if shapes else None) == cut


def test_the_step_figure_keeps_each_panels_traces_marks_and_title_on_its_own_axes():
    figures = [BUILDERS[name]() for name in PANELS]
    step, parts = step_of(figures).to_dict(), [figure.to_dict() for figure in figures]
    for n, part in enumerate(parts, 1):
        axis = "x" if n == 1 else f"x{n}"
        placed = [t for t in step["data"] if t.get("xaxis", "x") == axis]
        assert [list(t["y"]) if "y" in t and t["type"] != "heatmap" else t["z"] for t in placed] == \
               [list(t["y"]) if t["type"] != "heatmap" else t["z"] for t in part["data"]]
        shapes = [s for s in step["layout"]["shapes"] if s["xref"] in (axis, f"{axis} domain")]
        assert [(s["x0"], s["x1"]) for s in shapes] == [(s["x0"], s["x1"]) for s in part["layout"].get("shapes", [])]
    domains = [step["layout"][f"yaxis{n if n > 1 else ''}"]["domain"] for n in (1, 2)]
    assert domains[0][0] > domains[1][1]  # the sampler above the cache, apart
    assert [a["text"] for a in step["layout"]["annotations"]] == ["<b>s</b>", "<b>k</b>", "<b>r</b>", "<b>h</b>"]


def test_the_lens_strip_rings_the_first_top1_point_of_each_token():
    ring = BUILDERS["lens"]().to_dict()["data"][1]
    assert list(ring["x"]) == ["L2", "embed", "L5", "L1"] and len(ring["y"]) == 4
