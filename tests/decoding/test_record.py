"""What each step records besides sampling, attention and lens: the cache's bytes per layer
(sliding layers stop growing at their window), the candidates and their text, streaming and
stopping, and requests the model cannot answer."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.tiny import FAMILY_VARIANTS, VARIANTS, random_decoder, tiny_config
from txviz import kv_cache_bytes
from txviz.decoding import PLAIN, StepRecordRequest, decode
from txviz.generate import Sampling, generate
from txviz.model import InputError

MIXED = dict(n_kv_heads=2, n_layers=3, sliding_window=4, layer_types=("sliding", "full", "sliding"))
PROMPT = [7, 31, 2]


def test_kv_bytes_per_layer_follow_the_formula_and_stop_growing_on_sliding_layers():
    config = tiny_config(**MIXED)
    model = random_decoder(config)
    run = decode(model, PROMPT, 12)
    per_token_layer = 2 * config.n_kv_heads * config.head_dim * 4  # K and V, float32
    for step, plain in zip(run.steps, generate(model, PROMPT, 12).steps):
        held = step.position  # every token before the new one
        assert step.kv_bytes_per_layer == (per_token_layer * min(held, 4), per_token_layer * held,
                                           per_token_layer * min(held, 4))
        assert step.kv_bytes == kv_cache_bytes(config, held, bytes_per_element=4)
        assert step.kv_bytes_per_layer == plain.cache_bytes_per_layer
    sliding = [step.kv_bytes_per_layer[0] for step in run.steps]
    assert sliding[-1] == sliding[2] < run.steps[-1].kv_bytes_per_layer[1]


def test_candidates_are_the_most_probable_tokens_largest_first_with_their_text():
    model = random_decoder(tiny_config(n_kv_heads=2))
    run = decode(model, PROMPT, 5, sampling=Sampling(temperature=1.0, seed=2),
                 record=StepRecordRequest(candidates=7), token_text=lambda token: f"<{token}>")
    for step in run.steps:
        with torch.inference_mode():
            logits = model(torch.tensor([run.ids[:step.position]]))[0, -1]
        assert [c.id for c in step.candidates] == torch.topk(logits, 7).indices.tolist()
        assert [c.rank for c in step.candidates] == list(range(1, 8))
        assert [c.text for c in step.candidates] == [f"<{c.id}>" for c in step.candidates]
        assert step.token.text == f"<{step.token.id}>"
        probs = [c.prob for c in step.candidates]
        assert probs == sorted(probs, reverse=True)
        assert step.seconds > 0 and not step.forced


def test_a_plain_record_keeps_no_candidates_and_text_is_none_without_a_tokenizer():
    run = decode(random_decoder(tiny_config()), PROMPT, 3, record=PLAIN)
    assert all(step.candidates == () and step.token.text is None for step in run.steps)
    assert [step.tokens_computed for step in run.steps] == [3, 1, 1]


def test_steps_stream_in_order_and_a_stopped_run_keeps_its_tokens():
    model = random_decoder(tiny_config())
    seen = []
    stopped = decode(model, PROMPT, 10, on_step=seen.append, should_stop=lambda: len(seen) >= 4)
    assert stopped.stop_reason == "stopped" and tuple(seen) == stopped.steps
    assert [step.index for step in seen] == [0, 1, 2, 3]
    assert stopped.new_ids == decode(model, PROMPT, 10).new_ids[:4]


def test_a_stop_id_ends_the_run_after_emitting_it():
    model = random_decoder(tiny_config())
    free = decode(model, PROMPT, 10)
    stop = free.new_ids[5]
    run = decode(model, PROMPT, 10, stop_ids=[stop])
    assert run.new_ids == free.new_ids[:free.new_ids.index(stop) + 1] and run.stop_reason == "stop_id"


@pytest.mark.parametrize("request_settings,message", [
    (dict(attention_layers=(2,)), r"attention layers \[2\] out of range: the model has 2 layers"),
    (dict(attention_layers=(0,), attention_heads=(4,)), r"attention heads \[4\] out of range: the model has 4 heads"),
    (dict(candidates=-1), "candidates must be an integer >= 0"),
])
def test_requests_the_model_cannot_answer_raise(request_settings, message):
    with pytest.raises(InputError, match=message):
        decode(random_decoder(tiny_config()), PROMPT, 3, record=StepRecordRequest(**request_settings))


def test_a_run_past_the_context_raises():
    with pytest.raises(InputError, match="exceeds the model's context of 64"):
        decode(random_decoder(tiny_config()), [1] * 60, 5)


@pytest.mark.parametrize("variant", ["gqa", "gemma_sandwich_capped", "sliding_window"])
def test_recording_attention_rows_leaves_the_models_arithmetic_as_a_plain_step(variant):
    """The rows are rebuilt from the queries and the cached keys after the call, so a recorded layer keeps the
    fused kernel: every candidate's probability is the very number a run recording no row gets (a ring
    layer, the sliding window past its end, takes the eager path and may differ in the last bits)."""
    config = tiny_config(**{**VARIANTS, **FAMILY_VARIANTS}[variant])
    model = random_decoder(config)
    every = decode(model, [7, 31, 2, 64], 8, record=StepRecordRequest(attention_layers=tuple(range(config.n_layers))))
    none = decode(model, [7, 31, 2, 64], 8, record=StepRecordRequest())
    assert every.new_ids == none.new_ids == generate(model, [7, 31, 2, 64], 8).new_ids
    if variant != "sliding_window":
        assert [step.candidates for step in every.steps] == [step.candidates for step in none.steps]
