"""The fixed-size runs the pages start, on the tiny model: shipped texts, RoPE scaling losses and the
forward speed, the permutation check, induction scores, the coreference set, generation and the KV
head counterfactuals; each refused under a budget too small for it."""

import numpy as np
import pytest

from app.services import generation, heads, kv_sharing, positions, prompts, texts
from txviz.limits import Limits

TINY_BUDGET = Limits(memory_budget_bytes=1000)


@pytest.fixture(scope="module")
def text_ids(tiny):
    return texts.shipped_text_ids(tiny, next(iter(texts.shipped_texts())), 48)


def test_shipped_text_ids_start_with_the_sink_and_stop_at_the_asked_length(tiny, text_ids):
    assert texts.shipped_texts() and all(text.strip() for text in texts.shipped_texts().values())
    assert text_ids[0] == tiny.tokenizer.sink_id and len(text_ids) == 48
    name = next(iter(texts.shipped_texts()))
    assert len(texts.shipped_text_ids(tiny, name, 10_000)) <= tiny.config.max_seq_len


def test_no_scaling_is_the_model_itself_and_a_scaling_changes_the_losses(tiny, text_ids):
    from txviz.analysis.positions.measured import token_losses

    plain, seconds = positions.scaling_losses(tiny, text_ids, "none", 4.0)
    assert seconds > 0 and plain.shape == (len(text_ids) - 1,)
    np.testing.assert_allclose(plain, token_losses(tiny.model, text_ids).numpy())
    linear, _ = positions.scaling_losses(tiny, text_ids, "linear", 4.0)
    assert not np.allclose(plain, linear)


def test_the_forward_speed_turns_flops_into_seconds(tiny):
    speed = positions.forward_gflops(tiny, n_tokens=16, repeats=1)
    assert speed > 0
    assert positions.forward_seconds(tiny, 64, speed) == pytest.approx(positions.forward_seconds(tiny, 64, 1.0) / speed)


def test_the_permutation_check_compares_with_and_without_positions(tiny, text_ids):
    checks = positions.permutation_check(tiny, text_ids[:16])
    assert list(checks) == ["with the model's positions", "positions removed"]


def test_induction_scores_are_layers_by_heads_and_budget_checked(tiny):
    scores = heads.induction_scores(tiny, 12, seed=0)
    assert scores.shape == (tiny.config.n_layers, tiny.config.n_heads) and np.isfinite(scores).all()
    np.testing.assert_array_equal(scores, heads.induction_scores(tiny, 12, seed=0))  # the seed fixes the tokens
    heads.check_induction(tiny, 12, Limits())
    with pytest.raises(prompts.PromptError, match="induction test on 24 tokens"):
        heads.check_induction(tiny, 12, TINY_BUDGET)


def test_the_coreference_set_is_refused_under_a_tiny_budget(tiny):
    heads.check_coref(tiny, "sink", Limits())
    with pytest.raises(prompts.PromptError, match="scoring every head on"):
        heads.check_coref(tiny, "sink", TINY_BUDGET)


def test_generation_follows_the_prompt_and_reports_each_step(tiny, story):
    steps = []
    result = generation.generate_from_prompt(tiny, story, "sink", Limits(), 5, True, False,
                                             on_step=steps.append, stop_at_eos=False)
    assert len(result.new_ids) == 5 and len(steps) == len(result.steps) >= 5
    uncached = generation.generate_from_prompt(tiny, story, "sink", Limits(), 5, False, False, stop_at_eos=False)
    assert list(uncached.new_ids) == list(result.new_ids)  # greedy: the cache changes the time, not the text


def test_generation_is_refused_past_the_limits(tiny, story):
    with pytest.raises(prompts.PromptError, match="TXVIZ_MAX_NEW_TOKENS"):
        generation.generate_from_prompt(tiny, story, "sink", Limits(max_new_tokens=4), 5, True, False)
    with pytest.raises(prompts.PromptError, match="TXVIZ_MEMORY_BUDGET"):
        generation.generate_from_prompt(tiny, story, "sink", TINY_BUDGET, 5, True, False)


def test_the_kv_counterfactual_of_the_model_itself_changes_nothing(tiny, text_ids):
    same = kv_sharing.kv_counterfactual(tiny, tiny.config.n_kv_heads, text_ids)
    assert same.mean_kl == pytest.approx(0.0, abs=1e-6) and same.top1_agreement == 1.0
    fewer = kv_sharing.kv_counterfactual(tiny, 1, text_ids)
    assert fewer.mean_kl > 0 and fewer.kv_bytes_variant * 2 == fewer.kv_bytes_original
    kv_sharing.check_kv_counterfactual(tiny, 1, len(text_ids), Limits())
    with pytest.raises(prompts.PromptError, match="with 1 KV head:"):
        kv_sharing.check_kv_counterfactual(tiny, 1, len(text_ids), TINY_BUDGET)


def test_the_layer_sharing_sweep_reports_every_step(tiny, text_ids):
    from txviz.analysis.kv.sharing import layer_sharing_steps

    told = []
    kv_sharing.layer_sharing(tiny, 1, text_ids[:24], Limits(), progress=lambda done, total: told.append((done, total)))
    total = told[-1][1]
    assert told[-1] == (total, total) and [d for d, _ in told] == list(range(1, total + 1))
    assert total == layer_sharing_steps(tiny.config)
    first, last = kv_sharing.layer_sharing_step_seconds(tiny, 1, text_ids[:24], Limits())
    assert first > 0 and last > 0
    with pytest.raises(prompts.PromptError, match="merging the KV heads"):
        kv_sharing.layer_sharing(tiny, 1, text_ids[:24], TINY_BUDGET)

