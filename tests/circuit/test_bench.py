"""The circuit benchmark runs end to end on a tiny model and reports what the targets are held to."""

from __future__ import annotations

import pytest

from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz.circuit.bench import TARGETS, circuit_benchmark


def test_the_benchmark_times_every_method_beside_a_forward():
    model = random_decoder(tiny_config(n_kv_heads=2))
    clean = random_ids(model.config, 8, seed=1)
    corrupt = clean.clone()
    corrupt[0, 5] = (clean[0, 5] + 1) % model.config.vocab_size
    result = circuit_benchmark(model, clean[0], corrupt[0], 3, 5, query=7, key=2, repeats=1)
    assert set(TARGETS) <= set(result["seconds"]) and "forward" in result["seconds"]
    assert all(v["wall"] >= 0 and v["cpu"] >= 0 for v in result["seconds"].values())
    curve = result["curve"]
    assert curve[0]["edges"] == 0 and curve[-1]["edges"] == result["n_edges"]
    assert curve[0]["faithfulness"] == pytest.approx(0, abs=1e-4) and curve[-1]["faithfulness"] == pytest.approx(1, abs=1e-4)
