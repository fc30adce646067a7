"""The sharing tab's measured KV cache against the original: a smaller cache is a green drop, and the
model's own KV heads (no change) get a neutral "0% (no change)" with no arrow, not a red "+0%" with an
up arrow, and the original's perplexity beside the variant's is a reference with no arrow; on the zoo's
tiny base model (2 KV heads)."""

from __future__ import annotations

from pathlib import Path

from streamlit.proto.Metric_pb2 import Metric as MetricProto

from tests.helpers.apptest import no_errors, open_at

ZOO_BASE = str(Path(__file__).resolve().parents[4] / "assets" / "zoo" / "base")


def cache_metric(at):
    return next(m for m in at.metric if m.label == "KV cache (measured)")


def test_no_change_is_neutral_and_a_smaller_cache_is_a_green_drop():
    from txviz.lab.corpus import sample_text

    at = open_at("kv_cache", model=ZOO_BASE, prompt=sample_text(3), timeout=300, state={"kv_tab": "Sharing KV heads"})
    no_errors(at)
    at.select_slider(key="live_tokens").set_value(128).run()
    assert at.segmented_control(key="live_kv").value == 2  # the model's own: the same cache
    same = cache_metric(at).proto
    assert same.delta == "0% (no change)"
    assert (same.color, same.direction) == (MetricProto.MetricColor.GRAY, MetricProto.MetricDirection.NONE)
    perplexity = next(m for m in at.metric if m.label == "Perplexity").proto
    assert perplexity.delta.startswith("original ") and perplexity.direction == MetricProto.MetricDirection.NONE
    at.segmented_control(key="live_kv").set_value(1).run()  # MQA: half the cache
    no_errors(at)
    smaller = cache_metric(at).proto
    assert smaller.delta == "-50%"
    assert (smaller.color, smaller.direction) == (MetricProto.MetricColor.GREEN, MetricProto.MetricDirection.DOWN)
