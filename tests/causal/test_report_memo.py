"""``measure_pair``'s memo (``TXVIZ_CAUSAL_MEMO``, the seam that lets a test session's CLI, AppTest and
browser tests measure the trophy pair once): a second call with the same inputs returns the same
numbers without measuring again, still reports every step and recomputes the caller's margins; other
weights, prompts or options are measured afresh; without the variable nothing is kept."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz.causal import report

ANSWER, WRONG = 3, 5


@pytest.fixture
def pair():
    model = random_decoder(tiny_config(n_kv_heads=2))
    clean = random_ids(model.config, 8, seed=1)[0]
    corrupt = clean.clone()
    corrupt[4] = (clean[4] + 1) % model.config.vocab_size
    return model, clean, corrupt


def measure(model, clean, corrupt, **options):
    steps = []
    results = report.measure_pair(model, clean, corrupt, ANSWER, WRONG, grid=True,
                                  progress=lambda done, total: steps.append((done, total)), **options)
    return results, steps


def count_patching(monkeypatch) -> list[int]:
    calls = []
    real = report.patch_heads

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(report, "patch_heads", counted)
    return calls


def test_a_second_measure_of_the_same_pair_is_read_back(pair, tmp_path, monkeypatch):
    model, clean, corrupt = pair
    monkeypatch.setenv(report.MEMO_ENV, str(tmp_path))
    calls = count_patching(monkeypatch)
    first, first_steps = measure(model, clean, corrupt, margins=lambda: torch.zeros(2, 4))
    second, second_steps = measure(model, clean, corrupt, margins=lambda: torch.ones(2, 4))
    assert len(calls) == 1 and len(list(tmp_path.glob("*.safetensors"))) == 1
    assert first_steps == second_steps == [(i, len(report.STEPS)) for i in range(len(report.STEPS) + 1)]
    for name in ("patching", "ablation", "attribution", "grid"):
        assert_close(second[name], first[name], rtol=0, atol=0)
    assert_close(vars(second["dla"]), vars(first["dla"]), rtol=0, atol=0)
    assert second["corrupt_diff"] == first["corrupt_diff"]
    assert_close(second["margins"], torch.ones(2, 4))  # the caller's margins, not the kept ones


def test_other_weights_prompts_or_options_are_measured_afresh(pair, tmp_path, monkeypatch):
    model, clean, corrupt = pair
    monkeypatch.setenv(report.MEMO_ENV, str(tmp_path))
    calls = count_patching(monkeypatch)
    measure(model, clean, corrupt)
    other = random_decoder(model.config, seed=1)
    assert not torch.equal(measure(other, clean, corrupt)[0]["patching"], measure(model, clean, corrupt)[0]["patching"])
    measure(model, clean, clean)
    measure(model, clean, corrupt, chunk_size=3)
    assert len(calls) == 4 and len(list(tmp_path.glob("*.safetensors"))) == 4


def test_without_the_variable_nothing_is_kept(pair, tmp_path, monkeypatch):
    model, clean, corrupt = pair
    monkeypatch.delenv(report.MEMO_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    calls = count_patching(monkeypatch)
    measure(model, clean, corrupt)
    measure(model, clean, corrupt)
    assert len(calls) == 2 and not list(tmp_path.iterdir())
