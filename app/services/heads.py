"""The Heads page's fixed-size runs: every head's induction score on random tokens repeated, and
every head scored on the built-in coreference set; each checked against the budget first."""

from __future__ import annotations

import numpy as np

from app.services.prompts import check_passes
from txviz import limits as limits_
from txviz.loading.loaded import LoadedModel


def check_induction(loaded: LoadedModel, length: int, settings: limits_.Limits) -> None:
    """PromptError unless the induction test on ``length`` tokens, repeated, fits the budget."""
    check_passes(loaded, 1 + 2 * length, 1, f"the induction test on {2 * length} tokens", settings,
                 capture=("attn_probs",))


def induction_scores(loaded: LoadedModel, length: int, seed: int) -> np.ndarray:
    """(layers, heads) induction scores, after the sink token when the model has one."""
    from txviz.analysis.heads.detectors import induction_scores as scores

    tokenizer = loaded.tokenizer
    prefix = (tokenizer.sink_id,) if tokenizer is not None and tokenizer.sink_id is not None else ()
    special = tuple(getattr(tokenizer, "special_ids", ()) or ())
    return scores(loaded.model, length, seed=seed, prefix=prefix, avoid=special + prefix).numpy()


def check_coref(loaded: LoadedModel, bos: str, settings: limits_.Limits) -> None:
    """PromptError unless scoring every head on the built-in coreference set fits the budget."""
    from txviz.analysis.coref.ranking import builtin_cases

    cases = builtin_cases()
    longest = max(len(loaded.tokenizer.encode(case.text, bos=bos).ids) for case in cases)
    check_passes(loaded, longest, len(cases), f"scoring every head on {len(cases)} sentences", settings,
                 capture=("attn_probs",))


def coref_evaluation(loaded: LoadedModel, bos: str) -> dict:
    """Every head scored on the built-in coreference set (txviz.analysis.coref.ranking.evaluate)."""
    from txviz.analysis.coref.ranking import builtin_cases, evaluate

    return evaluate(loaded, builtin_cases(), bos=bos)
