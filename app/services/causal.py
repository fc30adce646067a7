"""The "test it" run of the Heads page, which heads cause the answer: for a sentence + completion, its
counterfactual and two candidate words, the causal report of txviz.causal (DLA, mean ablation and
patching per head, the attention margin, attribution patching and how far it agrees, the residual grid),
checked against the limits first and run step by step under the caller's progress callback. Never
imports Streamlit.

The same pieces and arguments as ``txviz.causal.report.patch_report`` (what ``txviz patch`` prints), so
the page and the command line give the same numbers for the same inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import itertools
import re

import torch

from app.services.prompts import PromptError, encode, within_budget
from txviz.threads import threads_for_this_run
from txviz import limits as limits_
from txviz.batches import between_batches
from txviz.causal import agreement, answer_tokens, cost
from txviz.analysis.coref.answer import CONTRASTS, GENDER_SWAP, swap_gender
from txviz.causal.margins import attention_margins
from txviz.causal.patching import DEFAULT_CHUNK
from txviz.causal.report import STEPS, measure_pair
from txviz.loading.loaded import LoadedModel


@dataclass(frozen=True)
class CausalRequest:
    """One prompt pair and the words measured: ``answer``/``wrong`` are scored by their first token
    after a space (" trophy"); ``candidates`` and ``pronoun`` give each head's attention margin."""
    clean: str
    corrupt: str
    answer: str
    wrong: str
    candidates: tuple[str, ...]
    pronoun: str
    bos: str
    top_k: int = 10


def propose_counterfactual(prompt: str, deciding: str | None, candidates: tuple[str, str],
                           pronoun: str | None = None) -> tuple[str, str]:
    """(the counterfactual of ``prompt``, how it was made), one that flips the answer where it can: the
    deciding word swapped for its contrast wherever it stands (big ⇄ small, in the completion too), else
    the pronoun's gender (she ⇄ he: the candidates must differ in gender for the answer to flip), else the
    first two candidates swapped, which leaves the pronoun meaning the same one and says so."""
    swap = CONTRASTS.get((deciding or "").lower())
    if swap:
        pattern = re.compile(rf"\b{re.escape(deciding)}\b")
        return pattern.sub(swap, prompt), f"“{deciding}” replaced by “{swap}”"
    flipped = swap_gender(prompt, pronoun) if pronoun else None
    if flipped is not None:
        return flipped, (f"“{pronoun}” replaced by “{GENDER_SWAP[pronoun.lower()]}”: the answer flips when the "
                         "candidates differ in gender")
    first, second = candidates
    pattern = re.compile(rf"\b({re.escape(first)}|{re.escape(second)})\b")
    swapped = pattern.sub(lambda m: second if m.group() == first else first, prompt)
    how = f"“{first}” and “{second}” swapped"
    if pronoun:
        how += f"; “{pronoun}” still means the same one, so this tests name order, not the answer"
    return swapped, how


def length_mismatch(clean_tokens, corrupt_tokens) -> str | None:
    """None when the two prompts have the same token count, else what differs and what to change."""
    if len(clean_tokens) == len(corrupt_tokens):
        return None
    first = next((i for i, (a, b) in enumerate(zip(clean_tokens, corrupt_tokens)) if a != b),
                 min(len(clean_tokens), len(corrupt_tokens)))
    shown = lambda tokens: " ".join(f"“{t}”" for t in tokens[first:first + 4])  # noqa: E731
    return (f"The sentence has {len(clean_tokens)} tokens and the counterfactual {len(corrupt_tokens)}: patching "
            f"swaps activations position by position, so both must have the same token count. They part at token "
            f"{first} ({shown(clean_tokens)} against {shown(corrupt_tokens)}). Replace the word by one of the "
            "same token count (the hover over the token strip shows them), or change both prompts.")


def prepare(loaded: LoadedModel, request: CausalRequest, settings: limits_.Limits):
    """(clean ids, corrupt ids, answer tokens), or PromptError saying what to change."""
    clean = encode(loaded, request.clean, request.bos, settings)
    corrupt = encode(loaded, request.corrupt, request.bos, settings)
    problem = length_mismatch(list(clean.tokens), list(corrupt.tokens))
    if problem:
        raise PromptError(problem)
    try:
        tokens = answer_tokens(loaded.tokenizer, request.answer, request.wrong)  # each read as after a space
    except ValueError as error:
        raise PromptError(str(error)) from None
    return clean, corrupt, tokens


def estimate(loaded: LoadedModel, clean_ids, corrupt_ids, settings: limits_.Limits,
             chunk_size: int = DEFAULT_CHUNK) -> limits_.Estimate:
    """What the run of this pair takes, or PromptError when the limits refuse it: the estimate
    ``txviz patch`` checks too (txviz.causal.cost.pair_estimate: each chunk of variants counted from the
    first layer and token it changes, in forward passes of one prompt)."""
    return within_budget(cost.pair_estimate(loaded.config, clean_ids, corrupt_ids, element_bytes=loaded.dtype.itemsize,
                                            gflops=settings.gflops, grid=True, chunk_size=chunk_size), settings)


def passes(loaded: LoadedModel, clean_ids, corrupt_ids, chunk_size: int = DEFAULT_CHUNK) -> float:
    """The run's work in forward passes of one prompt (txviz.causal.cost), as ``run`` does it."""
    config = loaded.config
    return cost.pair_passes(config.n_layers, config.n_heads, clean_ids, corrupt_ids, grid=True, chunk_size=chunk_size)


def step_passes(loaded: LoadedModel, clean_ids, corrupt_ids, chunk_size: int = DEFAULT_CHUNK) -> tuple[float, ...]:
    """``passes`` step by step, in STEPS order (the shared clean and counterfactual runs with the first step):
    what each step's share of the progress bar is, so the time left read from it follows the work."""
    config = loaded.config
    n_layers, n_tokens = config.n_layers, len(list(clean_ids))
    first = cost.first_difference(clean_ids, corrupt_ids)
    per_pass = n_layers * n_tokens
    sweep = {"patching": cost.head_sweep(n_layers, config.n_heads, n_tokens, first, chunk_size) / per_pass,
             "ablation": cost.head_sweep(n_layers, config.n_heads, n_tokens, 0, chunk_size) / per_pass,
             "grid": cost.grid_sweep(n_layers, clean_ids, corrupt_ids, chunk_size) / per_pass}
    fixed = {"dla": cost.PAIR_PASSES["shared"] + cost.PAIR_PASSES["dla"], "margins": cost.PAIR_PASSES["margins"],
             "attribution": cost.PAIR_PASSES["attribution"]}
    return tuple({**sweep, **fixed}[name] for name in ("dla", "patching", "ablation", "margins", "attribution", "grid"))


def run(loaded: LoadedModel, request: CausalRequest, settings: limits_.Limits,
        progress: Callable[[float, str], None] | None = None) -> dict:
    """The causal report of ``request`` (the keys of ``patch_report`` with the residual grid), reported
    after each step and each batch of variants as ``progress(fraction done, "step k of 6 (name), batch i of n")``,
    the fraction counted in the work of each step (``step_passes``)."""
    clean, corrupt, tokens = prepare(loaded, request, settings)
    estimate(loaded, clean.ids, corrupt.ids, settings)
    on_step, on_batch = _reporters(progress or (lambda fraction, message: None),
                                   step_passes(loaded, clean.ids, corrupt.ids))
    with threads_for_this_run(), between_batches(on_batch):  # the cores free now, decided again every batch
        results = measure_pair(loaded.model, torch.tensor(list(clean.ids)), torch.tensor(list(corrupt.ids)),
                               tokens.answer_id, tokens.wrong_id, margins=lambda: _margins(loaded.model, clean, request),
                               grid=True, progress=on_step)
    return _report(results, clean, corrupt, tokens, request.top_k)


def _reporters(progress: Callable[[float, str], None], weights: tuple[float, ...]):
    """(measure_pair's per-step callback, the per-batch hook), both reporting to ``progress`` the share of
    the work done, each step weighing ``weights[step]`` (one per STEPS)."""
    step = [0]
    done_before = [0.0, *itertools.accumulate(weights)]  # work done when each step starts
    total_work = done_before[-1] or 1.0

    def on_step(done: int, total: int) -> None:
        step[0] = done
        progress(done_before[done] / total_work, f"step {min(done + 1, total)} of {total} "
                 f"({STEPS[min(done, total - 1)]})" if done < total else "done")

    def on_batch(done: int, total: int) -> None:
        n, current = len(STEPS), step[0]
        fraction = (done_before[current] + weights[min(current, n - 1)] * done / total) / total_work
        progress(fraction, f"step {current + 1} of {n} ({STEPS[current]}), batch {done} of {total}")

    return on_step, on_batch


def _margins(model, encoding, request: CausalRequest) -> torch.Tensor | None:
    try:
        return attention_margins(model, encoding, request.clean, request.pronoun, request.candidates, request.answer)
    except ValueError:
        return None  # the pronoun or a candidate is not a whole word of the prompt: no margin to show


def _report(results: dict, clean, corrupt, tokens, top_k: int) -> dict:
    dla, patching, margins = results["dla"], results["patching"], results["margins"]
    grid = lambda t: t.numpy().astype(float)  # noqa: E731
    return {"clean_logit_diff": dla.total, "corrupt_logit_diff": results["corrupt_diff"], "embed_dla": dla.embed,
            **tokens.to_dict(), "clean_tokens": list(clean.tokens), "corrupt_tokens": list(corrupt.tokens),
            "dla": grid(dla.heads), "patching": grid(patching), "ablation": grid(results["ablation"]),
            "attribution": grid(results["attribution"]), "margin": None if margins is None else grid(margins),
            "mlp_dla": grid(dla.mlps), "residual_grid": grid(results["grid"]),
            "attribution_agreement": agreement(results["attribution"], patching, k=top_k),
            "margin_patching_agreement": None if margins is None else agreement(margins, patching, k=top_k)}
