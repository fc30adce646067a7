"""A prompt's trace: checked under the limits passed in, run with a progress callback, and the views
the pages read from it (head table, pooled map, readable labels, the long-prompt capture plan)."""

import numpy as np
import pytest

from app.services import prompts, traces
from txviz.limits import Limits


@pytest.fixture(scope="module")
def traced(tiny, story):
    encoding, _ = traces.check_trace(tiny, story, "sink", traces.TraceRequest(), Limits())
    return traces.run_trace(tiny, encoding, traces.TraceRequest())


def test_the_trace_reports_each_layer_done_to_the_callback(tiny, story):
    encoding, estimate = traces.check_trace(tiny, story, "sink", traces.TraceRequest(), Limits())
    assert estimate.bytes > 0 and estimate.seconds > 0
    told = []
    result = traces.run_trace(tiny, encoding, traces.TraceRequest(), progress=lambda done, total: told.append((done, total)))
    n_layers = tiny.config.n_layers
    assert told == [(done, n_layers) for done in range(1, n_layers + 1)]
    assert result.ids == tuple(encoding.ids) and result.n_tokens == len(encoding.ids)
    assert result.trace["attn_probs"].shape[-1] == result.n_tokens
    assert result.nbytes >= result.trace["attn_probs"].nbytes > 0


def test_a_trace_over_the_budget_is_refused_before_it_runs(tiny, story):
    with pytest.raises(prompts.PromptError, match="TXVIZ_MEMORY_BUDGET"):
        traces.check_trace(tiny, story, "sink", traces.TraceRequest(), Limits(memory_budget_bytes=1000))


def test_the_run_is_described_with_the_speed_in_force(tiny, story):
    encoding, estimate = traces.check_trace(tiny, story, "sink", traces.TraceRequest(), Limits(gflops=7.0))
    said = traces.describe_run(len(encoding.ids), estimate, Limits(gflops=7.0))
    assert said.startswith(f"Running the model on {len(encoding.ids)} tokens") and "7 GFLOP/s" in said


def test_the_head_table_has_every_head_and_the_grid_is_layers_by_heads(tiny, traced):
    table = traces.head_table(tiny, traced)
    config = tiny.config
    assert len(table) == config.n_layers * config.n_heads
    grid = traces.head_metric_grid(table, "prev_token")
    assert grid.shape == (config.n_layers, config.n_heads)
    assert np.allclose(grid[1, 2], table[(table.layer == 1) & (table["head"] == 2)]["prev_token"].item())


def test_the_map_overview_of_a_short_prompt_is_the_map_itself(traced):
    pooled, block = traces.map_overview(traced, 1, 2, hide=False)
    assert block == 1
    causal = np.tril(np.ones_like(pooled, dtype=bool))
    np.testing.assert_allclose(pooled[causal], traced.trace.attn(1, 2).float().numpy()[causal], rtol=1e-6)
    assert np.isnan(pooled[~causal]).all()  # the future is blank, not zero
    hidden, _ = traces.map_overview(traced, 1, 2, hide=True)
    assert not np.allclose(hidden[causal], pooled[causal])


@pytest.mark.parametrize("hide", [False, True])
def test_the_page_maps_are_pooled_by_the_one_rule_bit_for_bit(traced, hide):
    from txviz.analysis.heads.metrics import hide_sink
    from txviz.capture.pooling import pool_attention

    maps, block = traces.layers_maps(traced, (0, 2), 4, hide, max_cells=5)  # pooled: more tokens than 5 cells
    assert block > 1
    for i, layer in enumerate((0, 2)):
        for head in range(4):
            probs = traced.trace.attn(layer, head)
            expected, expected_block = pool_attention((hide_sink(probs) if hide else probs).numpy(), max_cells=5)
            assert expected_block == block and maps[i, head].tobytes() == expected.astype(np.float16).tobytes()
    overview, one = traces.map_overview(traced, 2, 3, hide)
    probs = traced.trace.attn(2, 3)
    assert one == 1 and overview.tobytes() == pool_attention((hide_sink(probs) if hide else probs).numpy())[0].tobytes()


def test_readable_tokens_label_every_token(tiny, traced):
    labels = traces.display_tokens(tiny, traced)
    assert len(labels) == traced.n_tokens and labels[2:5] == list(traced.tokens[2:5])


def test_the_attention_plan_keeps_the_shared_trace_up_to_the_token_limit(tiny, story):
    n = len(prompts.encode(tiny, story, "sink", Limits()).ids)
    assert traces.attention_plan(tiny, n, Limits()) is None
    assert traces.plan_request(None) == traces.TraceRequest()
    plan = traces.attention_plan(tiny, n, Limits(max_prompt_tokens=n - 1))
    assert "head_summaries" in plan.capture
    request = traces.plan_request(plan)
    assert request.long and request.capture == plan.capture and request.maps == plan.maps
    with pytest.raises(prompts.PromptError, match="TXVIZ_MEMORY_BUDGET"):
        traces.attention_plan(tiny, n, Limits(max_prompt_tokens=n - 1, memory_budget_bytes=100))


def test_a_long_capture_gives_the_same_head_table_from_its_summaries(tiny, story, traced):
    n = traced.n_tokens
    request = traces.plan_request(traces.attention_plan(tiny, n, Limits(max_prompt_tokens=n - 1)))
    encoding, _ = traces.check_trace(tiny, story, "sink", request, Limits(max_prompt_tokens=n - 1))
    summarised = traces.run_trace(tiny, encoding, request)
    long, short = traces.head_table(tiny, summarised), traces.head_table(tiny, traced)
    np.testing.assert_allclose(long["prev_token"].to_numpy(dtype=float), short["prev_token"].to_numpy(dtype=float),
                               rtol=1e-4, atol=1e-5)
