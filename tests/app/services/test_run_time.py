"""How long a run will take (app/services/run_time.py): one pass timed here now, times the run's passes,
times a factor the last runs measured."""

import pytest
import torch

from app.services import run_time
from txviz import threads


def test_the_factor_is_the_median_of_the_last_five_runs_else_the_first_measured():
    assert run_time.ratio(None, "causal") == run_time.FIRST_RATIO["causal"]
    kept = None
    for seconds in (10.0, 12.0, 30.0, 11.0, 9.0, 10.0):  # 100 passes of 0.1 s each alone: factors 1.0, 1.2, 3.0, …
        kept = run_time.kept_ratios(kept, seconds, passes=100, one_pass=0.1)
    assert kept == pytest.approx((1.2, 3.0, 1.1, 0.9, 1.0))  # the first run is no longer kept
    assert run_time.ratio(kept, "causal") == pytest.approx(1.1)  # one slow run does not set it


def test_one_pass_is_timed_under_the_runs_thread_rule(tiny, monkeypatch):
    seen = []
    forward = tiny.model.forward
    monkeypatch.setattr(threads, "others_running", lambda: 99.0)
    monkeypatch.setattr(tiny.model, "forward", lambda *a, **k: seen.append(torch.get_num_threads()) or forward(*a, **k))
    assert run_time.one_pass_seconds(tiny, 12) > 0 and seen == [1, 1, 1]
