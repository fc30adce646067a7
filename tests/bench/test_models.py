"""``txviz bench --models``: each model run by the same benchmark with the same options, its load average
kept beside it, and one Markdown row per model and length (txviz.bench.models)."""

from __future__ import annotations

from txviz.bench.models import markdown_models, run_models


def _row(tokens: int, plain: float, traced: float) -> dict:
    return {"tokens": tokens, "plain_forward_s": plain, "trace_s": traced, "cpu_s": {"plain": plain * 0.8, "trace": traced * 0.9},
            "trace_over_plain": traced / plain, "peak_rss_mb": 900.0, "plain_peak_rss_mb": 800.0}


def test_each_model_runs_with_the_same_options_and_is_one_row():
    calls = []

    def run(tokens, *, model, repeats, threads):
        calls.append((tuple(tokens), model, repeats, threads))
        return {"results": [_row(1024, 1.0, 2.0 if model else 1.5)], "decode": {"txviz_tok_s": 12.5}}

    result = run_models({"SmolLM2": None, "Gemma 3": "/x/gemma.gguf"}, [1024], run=run, repeats=3, threads=1)
    assert calls == [((1024,), None, 3, 1), ((1024,), "/x/gemma.gguf", 3, 1)]
    assert [m["name"] for m in result["models"]] == ["SmolLM2", "Gemma 3"]
    table = markdown_models(result).splitlines()
    assert len(table) == 4
    assert table[2].startswith("| SmolLM2 | 1024 | 1.000 | 1.500 | 0.800 | 1.350 | 1.50× | 900 | 800 | 12.5 |")
    assert table[3].startswith("| Gemma 3 | 1024 | 1.000 | 2.000 | 0.800 | 1.800 | 2.00× |")
