"""app/services/causal.py on the zoo's tiny base_long model: the proposed counterfactual, the length
check, the budget check, and the report (equal to txviz.causal's pieces run alone)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from app.services import causal
from app.services.prompts import PromptError
from txviz import limits as limits_
from txviz.causal import answer_tokens, cost, patch_heads

CLEAN = "Mary gave the book to John because she was happy. She was happy and"
REQUEST = causal.CausalRequest(CLEAN, CLEAN.replace("Mary", "X").replace("John", "Mary").replace("X", "John"),
                               "Mary", "John", ("Mary", "John"), "she", "none")


def test_the_deciding_word_is_swapped_wherever_it_stands():
    proposed, how = causal.propose_counterfactual("It was too big. The thing that was too big was the", "big",
                                                  ("trophy", "suitcase"))
    assert proposed == "It was too small. The thing that was too small was the" and "small" in how


def test_without_a_known_contrast_the_candidates_are_swapped():
    proposed, how = causal.propose_counterfactual("Mary met John and she waved.", "waved", ("Mary", "John"))
    assert proposed == "John met Mary and she waved." and "swapped" in how


def test_a_gendered_pronoun_is_swapped_before_the_names_and_it_or_they_says_what_a_name_swap_tests():
    text = "Mary met John and she waved. She was the one who waved:"
    proposed, how = causal.propose_counterfactual(text, None, ("Mary", "John"), "she")
    assert proposed == "Mary met John and he waved. He was the one who waved:" and "flips" in how
    proposed, how = causal.propose_counterfactual("The cat saw the dog and it ran.", None, ("cat", "dog"), "it")
    assert proposed == "The dog saw the cat and it ran." and "name order, not the answer" in how
    big = causal.propose_counterfactual("She said it was too big.", "big", ("trophy", "case"), "she")
    assert big[0] == "She said it was too small."  # the deciding word comes first


def test_unequal_token_lengths_say_where_they_part():
    assert causal.length_mismatch(["a", "b"], ["a", "c"]) is None
    message = causal.length_mismatch(["a", "b", "c"], ["a", "x", "y", "c"])
    assert "3 tokens and the counterfactual 4" in message and "token 1" in message


def test_a_pair_of_unequal_length_is_a_prompt_error(tiny):
    request = causal.CausalRequest(CLEAN, CLEAN.replace("happy", "very happy"), "Mary", "John", (), "she", "none")
    with pytest.raises(PromptError, match="same token count"):
        causal.prepare(tiny, request, limits_.Limits())


def test_the_run_is_budget_checked(tiny):
    with pytest.raises(PromptError, match="TXVIZ_MEMORY_BUDGET"):
        causal.run(tiny, REQUEST, limits_.Limits(memory_budget_bytes=1000))


def test_the_report_matches_the_library_and_reports_every_step_and_batch(tiny):
    steps = []
    report = causal.run(tiny, REQUEST, limits_.Limits(), lambda fraction, message: steps.append((fraction, message)))
    n = len(causal.STEPS)
    assert steps[0] == (0.0, f"step 1 of {n} (direct logit attribution)") and steps[-1] == (1.0, "done")
    batches = [message for _, message in steps if "batch" in message]
    assert f"step 2 of {n} (patching every head), batch 1 of " in batches[0]  # the sweeps report each chunk
    assert any(m.startswith(f"step 3 of {n} (ablating every head), batch") for m in batches)
    assert [f for f, _ in steps] == sorted(f for f, _ in steps)  # the bar only moves forward
    tokens = answer_tokens(tiny.tokenizer, " Mary", " John")
    ids = [torch.tensor(tiny.tokenizer.encode(t, bos="none").ids) for t in (REQUEST.clean, REQUEST.corrupt)]
    expected = patch_heads(tiny.model, *ids, tokens.answer_id, tokens.wrong_id).numpy()
    assert report["patching"] == pytest.approx(expected, abs=1e-5)
    n_layers, n_heads = tiny.config.n_layers, tiny.config.n_heads
    for name in ("dla", "ablation", "attribution", "margin"):
        assert report[name].shape == (n_layers, n_heads), name
    assert report["residual_grid"].shape == (n_layers, len(ids[0]))
    assert report["clean_logit_diff"] != pytest.approx(report["corrupt_logit_diff"])  # the swap moves the answer
    assert 0 <= report["margin_patching_agreement"]["top_k_overlap"] <= 1


def test_the_estimate_counts_the_work_the_sweeps_run(tiny):
    """The work of every step, each sweep counted from the first layer and token its variants change
    (txviz.causal.cost, held to the token-layers actually run by tests/causal/test_cost.py): a pair that
    parts late costs less than one that parts early, and both less than every variant run in full."""
    settings, config = limits_.Limits(), tiny.config
    early, late = list(range(1, 13)), list(range(1, 13))
    early[0], late[10] = 99, 99  # the counterfactual differs at token 0, or at token 10 of 12
    one = limits_.trace_estimate(config, 12, ("logits",), element_bytes=tiny.dtype.itemsize, gflops=settings.gflops)
    estimates = {}
    for name, corrupt in (("early", early), ("late", late)):
        estimate = causal.estimate(tiny, list(range(1, 13)), corrupt, settings)
        passes = cost.pair_passes(config.n_layers, config.n_heads, list(range(1, 13)), corrupt, grid=True)
        assert f"the work of {passes:,.0f} forward passes of 12 tokens" in estimate.what
        assert estimate.seconds == pytest.approx(one.seconds * passes)
        estimates[name] = passes
    every_variant_in_full = 2 * config.n_layers * config.n_heads + config.n_layers * 12
    assert estimates["late"] < estimates["early"] < every_variant_in_full


def test_the_report_runs_on_one_thread_while_the_machine_is_oversubscribed(monkeypatch):
    """~1300 forward passes: under load (other processes running on every core) the causal report runs on one torch thread,
    as the page's trace does (txviz.threads), and the process's count is restored after."""
    from app.services import causal
    from txviz import threads

    seen = []
    monkeypatch.setattr(threads, "others_running", lambda: 99.0)
    monkeypatch.setattr(causal, "measure_pair", lambda *a, **k: seen.append(torch.get_num_threads()) or {})
    monkeypatch.setattr(causal, "_report", lambda results, *a: results)
    monkeypatch.setattr(causal, "prepare", lambda *a: (SimpleNamespace(ids=[1, 2]), SimpleNamespace(ids=[1, 3]),
                                                      SimpleNamespace(answer_id=1, wrong_id=2)))
    monkeypatch.setattr(causal, "estimate", lambda *a: None)
    causal.run(SimpleNamespace(model=None, config=SimpleNamespace(n_layers=2, n_heads=2)), SimpleNamespace(top_k=5), None)
    assert seen == [1] and torch.get_num_threads() == threads.PROCESS_THREADS


def test_the_progress_counts_each_steps_work_so_the_time_left_follows_it(tiny):
    """The bar's fraction is the share of the work done (each step weighed by its passes, txviz.causal.cost),
    not the share of the six steps: the sweeps are most of the work, and the time left is read from it."""
    steps = []
    causal.run(tiny, REQUEST, limits_.Limits(), lambda fraction, message: steps.append((fraction, message)))
    ids = [tiny.tokenizer.encode(t, bos="none").ids for t in (REQUEST.clean, REQUEST.corrupt)]
    weights = causal.step_passes(tiny, *ids)
    assert sum(weights) == pytest.approx(causal.passes(tiny, *ids))
    starts = {message: fraction for fraction, message in steps if "batch" not in message}
    n = len(causal.STEPS)
    assert starts[f"step 3 of {n} (ablating every head)"] == pytest.approx(sum(weights[:2]) / sum(weights))
    assert starts[f"step 6 of {n} (the residual grid)"] == pytest.approx(sum(weights[:5]) / sum(weights))
    assert [f for f, _ in steps] == sorted(f for f, _ in steps) and steps[-1] == (1.0, "done")
