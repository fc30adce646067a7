"""The Attention page's step-by-step follows the layer as the model runs it: on the zoo's
base model given a query scale, a soft-cap and sliding layers (window 4 on layers 0 and 2), it names the
scale used, shows the soft-cap as a step of its own, draws the window in the mask, and its weights equal
the model's own map; the zoo model as shipped (1/√d_k, no cap, no window) shows no soft-cap step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from tests.helpers.apptest import app_on, chart, decode, has_chart, no_errors, texts

ZOO_BASE = Path(__file__).resolve().parents[4] / "assets" / "zoo" / "base"
LONG = "Mary had a red kite and Helen had a blue bottle and Mary had a red kite."  # > 4 tokens, words it knows
CHANGES = dict(query_scale=0.4, attn_softcap=3.0, sliding_window=4, layer_types=["sliding", "full", "sliding", "full"])


def _gemma2_like(tmp_path, monkeypatch) -> str:
    folder = tmp_path / "capped"
    shutil.copytree(ZOO_BASE, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **CHANGES}))
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    return str(folder)


def _opened(model: str, layer: int):
    at = app_on(model, LONG)
    at.query_params["layer"] = str(layer)
    at.session_state["steps_open"] = True  # what a click on the expander does
    at.session_state["plain_map_open"] = True  # the model's own weights, in float32
    return at.run()


def _steps_match_the_map(at) -> np.ndarray:
    probs = decode(chart(at, "step_probs")["data"][0]["z"]).astype(float)
    heat = decode(chart(at, "heatmap_plain")["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(probs, np.nan_to_num(heat), atol=1e-6)  # recomputed = the model's own
    return decode(chart(at, "step_masked")["data"][0]["z"]).astype(float)


def test_a_windowed_capped_layer_is_recomputed_as_the_model_runs_it(tmp_path, monkeypatch):
    at = _opened(_gemma2_like(tmp_path, monkeypatch), 0)
    no_errors(at)
    said = texts(at)
    assert "query scale 0.4000" in said and "not by 1/√d_k = 1/√16 = 0.2500" in said
    assert "c = 3" in said and "→ 3·tanh(·/3) → mask (window 4) → softmax" in said
    assert "soft-cap 3·tanh(x/3)" in chart(at, "step_capped")["layout"]["title"]["text"]
    assert "window of 4" in chart(at, "step_masked")["layout"]["title"]["text"]
    masked = _steps_match_the_map(at)
    rows, cols = np.indices(masked.shape)
    back = rows - cols  # how far back each key is
    assert np.isneginf(masked[back >= 4]).all() and np.isfinite(masked[(back >= 0) & (back < 4)]).all()


def test_a_global_layer_has_no_window_and_the_plain_model_no_cap(tmp_path, monkeypatch):
    at = _opened(_gemma2_like(tmp_path, monkeypatch), 1)
    no_errors(at)
    masked = _steps_match_the_map(at)
    rows, cols = np.indices(masked.shape)
    assert np.isfinite(masked[rows >= cols]).all()  # every earlier key visible
    assert "window" not in chart(at, "step_masked")["layout"]["title"]["text"]
    plain_model = _opened(str(ZOO_BASE), 1)
    no_errors(plain_model)
    assert not has_chart(plain_model, "step_capped") and "tanh" not in texts(plain_model)
    assert "multiplied by 1/√16 = 0.2500" in texts(plain_model)
    _steps_match_the_map(plain_model)
