"""The Heads page's fixed-size runs: every head's induction score on random tokens repeated, and
every head scored on the built-in coreference set; each checked against the budget first."""

from __future__ import annotations

from typing import Callable

import numpy as np

from app.services.prompts import check_passes
from txviz.threads import threads_for_this_run
from txviz import limits as limits_
from txviz.batches import between_batches
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
    with threads_for_this_run():
        return scores(loaded.model, length, seed=seed, prefix=prefix, avoid=special + prefix).numpy()


COREF_BATCH = 16  # sentences per batch when the built-in set is scored


def coref_passes() -> int:
    """Scoring the built-in set runs each sentence once (up to its pronoun, in batches)."""
    from txviz.analysis.coref.ranking import builtin_cases

    return len(builtin_cases())


def coref_longest(loaded: LoadedModel, bos: str) -> int:
    """The built-in set's longest sentence, in tokens under ``bos``."""
    from txviz.analysis.coref.ranking import builtin_cases

    return max(len(loaded.tokenizer.encode(case.text, bos=bos).ids) for case in builtin_cases())


def check_coref(loaded: LoadedModel, bos: str, settings: limits_.Limits, longest: int | None = None) -> None:
    """PromptError unless scoring every head on the built-in coreference set fits the budget (``longest``:
    its longest sentence in tokens, when the caller has it)."""
    from txviz.analysis.coref.ranking import builtin_cases

    n_cases = len(builtin_cases())
    longest = coref_longest(loaded, bos) if longest is None else longest
    check_passes(loaded, longest, n_cases, f"scoring every head on {n_cases} sentences", settings,
                 capture=("attn_probs",))


def coref_evaluation(loaded: LoadedModel, bos: str, progress: Callable[[float, str], None] | None = None) -> dict:
    """Every head scored on the built-in coreference set (txviz.analysis.coref.ranking.evaluate), on the
    cores free now (decided again every batch), ``progress(fraction, "batch i of n")`` after each batch."""
    from txviz.analysis.coref.ranking import builtin_cases, evaluate

    report = progress or (lambda fraction, message: None)
    with threads_for_this_run(), between_batches(lambda done, total: report(done / total, f"batch {done} of {total}")):
        return evaluate(loaded, builtin_cases(), bos=bos, batch_size=COREF_BATCH)
