"""The patching benchmark runs and reports what it promises (on a tiny random model: seconds, not numbers to trust)."""

import pytest

from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz.causal.bench import patching_benchmark


def test_patching_benchmark_reports_every_timing():
    model = random_decoder(tiny_config(n_kv_heads=2))
    clean, corrupt = random_ids(model.config, 8, seed=1)[0], random_ids(model.config, 8, seed=2)[0]
    result = patching_benchmark(model, clean, corrupt, 3, 5, chunk_sizes=(1, 4, 64), repeats=1)
    assert result["n_heads"] == 8 and result["n_tokens"] == 8
    assert set(result["seconds"]) == {"forward", "forward_backward", "attribution"}
    assert set(result["exact_patching_seconds_by_chunk"]) == {"1", "4"}  # 64 > 8 heads: one call, as 8
    assert all(v > 0 for v in [*result["seconds"].values(), *result["exact_patching_seconds_by_chunk"].values()])


def test_the_bench_command_line_helps_and_refuses_bad_counts_before_loading_anything(capsys):
    from txviz.causal.bench import main

    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0 and "--threads" in capsys.readouterr().out
    for bad in (["--threads", "0"], ["--repeats", "0"]):
        with pytest.raises(SystemExit) as done:
            main(bad)
        assert done.value.code == 2 and "at least 1" in capsys.readouterr().err
