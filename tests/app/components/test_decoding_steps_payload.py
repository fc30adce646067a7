"""The Decoding page's step viewer's records (app/components/decoding_steps/payload.py), built from a real
run of the zoo's base model (sampled, so temperature and the cut matter) and read back as the browser
decodes them: every step's candidates and drawn token, the rows of every layer and head within the
quantisation's bound, the cache's bytes and the formula's; past the byte budget only the page's layer."""

from __future__ import annotations

import numpy as np
import pytest

from app import cache
from app.app_pages.decoding import attention
from app.app_pages.decoding.view import DecodingView
from app.components.decoding_steps import branch_of, payload, pick_of
from app.services import decoding
from app.services.models import load_model
from txviz.lab.corpus import sample_text
from txviz.loading.zoo import SHIPPED_ZOO

ZOO = str(SHIPPED_ZOO / "base")


@pytest.fixture(scope="module")
def view():
    loaded = load_model(ZOO)
    inputs = decoding.DecodingInputs(source=ZOO, prompt=sample_text(3), bos="sink", chat=False, max_new_tokens=10,
                                     sampler="sample", temperature=1.3, top_k=5, top_p=0.9, seed=2)
    run = decoding.run(loaded, inputs, decoding.prompt_ids(loaded, inputs, cache.limits()))
    return DecodingView.of(loaded, inputs, run)


def test_the_records_are_the_runs_own(view):
    config, run = view.config, view.run
    layers = list(range(config.n_layers))
    header, rows = payload.read_blob(attention.records(view, layers))
    assert header["layers"] == layers and len(header["steps"]) == len(run.steps) == 10
    assert header["labels"][:len(view.texts)] == [payload.label(t, i) for t, i in zip(view.texts, run.ids)]
    assert header["n_prompt"] == len(run.prompt_ids) and not header["greedy"]
    for sent, step, step_rows in zip(header["steps"], run.steps, rows):
        assert [c["id"] for c in sent["candidates"]] == [c.id for c in step.candidates]
        for field in ("prob", "prob_tempered", "prob_sampled"):
            assert [c[field] for c in sent["candidates"]] == pytest.approx([getattr(c, field) for c in step.candidates],
                                                                           abs=1e-6)
        assert (sent["token"]["id"], sent["token"]["rank"], sent["kept"]) == (step.token.id, step.token.rank, step.kept)
        assert sent["token"]["prob_sampled"] == pytest.approx(step.token.prob_sampled, abs=1e-6)
        assert sent["kv"] == list(step.kv_bytes_per_layer)
        assert sent["formula"] == decoding.kv_formula_per_layer(config, step.position, view.loaded.dtype.itemsize)
        assert sent["position"] == step.position and sent["seconds"] == step.seconds
        for layer in layers:
            expected = step.attention[layer].float().numpy()
            assert step_rows[layer].shape == (config.n_heads, step.position)
            assert np.abs(step_rows[layer] - expected).max() <= payload.QUANTUM / 2 + 1e-9
    assert any(0 < s["kept"] < len(s["candidates"]) for s in header["steps"])  # a cut shown somewhere


def test_past_the_byte_budget_only_the_chosen_layer_goes(view, monkeypatch):
    config = view.config
    assert payload.layers_to_send(view.run, config.n_layers, config.n_heads, 1) == list(range(config.n_layers))
    monkeypatch.setattr(payload, "ALL_LAYERS_BYTES", payload.rows_bytes(view.run, config.n_layers, config.n_heads) - 1)
    assert payload.layers_to_send(view.run, config.n_layers, config.n_heads, 1) == [1]
    header, rows = payload.read_blob(attention.records(view, [1]))
    assert header["layers"] == [1] and all(list(r) == [1] for r in rows)
    np.testing.assert_allclose(rows[-1][1], view.run.steps[-1].attention[1].float().numpy(), atol=payload.QUANTUM / 2)


def test_the_same_run_gives_the_same_bytes_and_another_run_another_id(view):
    layers = list(range(view.config.n_layers))
    assert attention.records(view, layers) == attention.records(view, layers)  # a rerun sends a reference
    other = DecodingView.of(view.loaded, view.inputs, decoding.run(view.loaded, view.inputs, list(view.run.prompt_ids)))
    assert attention.run_key(other) != attention.run_key(view)  # generated again: its own times


def test_a_quantised_weight_is_within_half_a_step():
    weights = np.linspace(0, 1, 100_003)
    back = payload.quantised(weights) / payload.SCALE
    assert np.abs(back - weights).max() <= payload.QUANTUM / 2 + 1e-12 and back[-1] == 1.0


@pytest.mark.parametrize("value", ["x", None, 1e308, -1, 2.5, True, [3], {"step": 1}, {"step": 99, "layer": 0, "head": 0},
                                   {"step": 1, "layer": 0, "head": 9}, {"step": "1", "layer": 0, "head": 0}])
def test_a_crafted_pick_is_ignored(value):
    assert pick_of(value, 10, 4, 4) is None


@pytest.mark.parametrize("value", [None, "x", {"step": 1}, {"step": 1, "token": -1}, {"step": 1, "token": True},
                                   {"step": 1, "token": 2.5}, {"step": 10, "token": 3}])
def test_a_crafted_branch_is_ignored(value):
    assert branch_of(value, 10) is None


def test_a_real_pick_and_branch_pass_as_ints():
    assert pick_of({"step": 3.0, "layer": 1, "head": 2}, 10, 4, 4) == (3, 1, 2)
    assert branch_of({"step": 3, "token": 17}, 10) == (3, 17)
