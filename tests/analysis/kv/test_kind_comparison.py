"""Rows of the MHA / GQA / MQA comparison (txviz.analysis.kv.kinds): the cache per token is the
formula's on the first token; on a model with windows the mean over a long generation falls to what
the formula gives for that length, on one without it stays the first token's."""

from __future__ import annotations

from tests.helpers.tiny import tiny_config
from txviz.analysis.kv.kinds import kind_row
from txviz.model.kv_cache import kv_cache_bytes


def test_gqa_and_windowed_mqa_rows():
    gqa = tiny_config(n_heads=4, n_kv_heads=2)
    mqa = tiny_config(n_heads=4, n_kv_heads=1, n_layers=6, sliding_window=8,
                      layer_types=("sliding",) * 5 + ("full",))
    a, b = kind_row("gqa", "zoo", gqa, long_tokens=64), kind_row("mqa", "pretrained", mqa, long_tokens=64)
    assert (a["kind"], a["queries per KV head"], a["cache vs MHA of the same shape"]) == ("GQA", 2, "50%")
    assert (b["kind"], b["queries per KV head"], b["layers (local + global)"]) == ("MQA", 4, "5 + 1")
    for row, config in ((a, gqa), (b, mqa)):
        assert row["KV bytes/token, first token (fp32)"] == kv_cache_bytes(config, 1, 1, 4)
        assert row["KV bytes/token, mean over it"] == round(kv_cache_bytes(config, 64, 1, 4) / 64)
    assert a["KV bytes/token, mean over it"] == a["KV bytes/token, first token (fp32)"]
    assert b["KV bytes/token, mean over it"] < b["KV bytes/token, first token (fp32)"] / 2


def test_long_generation_is_cut_at_the_context():
    assert kind_row("m", "zoo", tiny_config(max_seq_len=32), long_tokens=4096)["long generation (tokens)"] == 32
