"""The Heads page's Circuit tab: the circuit of a prompt pair (txviz.circuit.report, what ``txviz circuit``
prints), the exact faithfulness of any top-n circuit of it, and the query–key breakdown of any attention
score of its clean prompt (what ``txviz qk`` prints). Checked against the limits first; never imports
Streamlit.

The same words (first token after a space), BOS policy and estimate as the command line, so the tab and
``txviz circuit`` give the same numbers for the same inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from app.services.prompts import PromptError, encode, within_budget
from txviz.threads import threads_for_this_run
from txviz import limits as limits_
from txviz.causal.metric import answer_tokens
from txviz.circuit.cost import circuit_estimate, circuit_passes
from txviz.circuit.patching import faithfulness, top_edges
from txviz.circuit.qk import QKBreakdown, qk_attribution
from txviz.circuit.report import CircuitResult, circuit_json, measure_circuit
from txviz.loading.loaded import LoadedModel


@dataclass(frozen=True)
class CircuitRequest:
    """A prompt pair of the same token length, the two words and the EAP-IG steps."""
    clean: str
    corrupt: str
    answer: str
    wrong: str
    bos: str
    steps: int = 5


@dataclass
class CircuitRun:
    """A run kept for its request: the measured result, the clean tokens, the words as scored."""
    result: CircuitResult
    clean_tokens: tuple[str, ...]
    corrupt_tokens: tuple[str, ...]
    words: dict

    def to_json(self, top: int) -> dict:
        return {**self.words, "clean_tokens": list(self.clean_tokens), "corrupt_tokens": list(self.corrupt_tokens),
                **circuit_json(self.result, top=top)}


def prepare(loaded: LoadedModel, request: CircuitRequest, settings: limits_.Limits):
    """(clean encoding, corrupt encoding, answer tokens), or PromptError saying what to change."""
    clean = encode(loaded, request.clean, request.bos, settings)
    corrupt = encode(loaded, request.corrupt, request.bos, settings)
    if len(clean.ids) != len(corrupt.ids):
        raise PromptError(f"The clean prompt has {len(clean.ids)} tokens and the corrupt one {len(corrupt.ids)}: "
                          "edge patching swaps activations position by position, so both need the same token count.")
    if list(clean.ids) == list(corrupt.ids):
        raise PromptError("The two prompts are the same tokens: there is nothing to patch.")
    try:
        tokens = answer_tokens(loaded.tokenizer, request.answer, request.wrong)
    except ValueError as error:
        raise PromptError(str(error)) from None
    return clean, corrupt, tokens


def estimate(loaded: LoadedModel, request: CircuitRequest, settings: limits_.Limits) -> limits_.Estimate:
    """What the run takes (txviz.circuit.cost.circuit_estimate, as ``txviz circuit`` checks), or PromptError."""
    clean, corrupt, _ = prepare(loaded, request, settings)
    return within_budget(circuit_estimate(loaded.config, clean.ids, corrupt.ids, steps=request.steps,
                                          element_bytes=loaded.dtype.itemsize, gflops=settings.gflops), settings)


def work(loaded: LoadedModel, request: CircuitRequest, settings: limits_.Limits) -> tuple[int, float]:
    """(tokens, forward passes of one prompt) the run does (txviz.circuit.cost.circuit_passes), or PromptError."""
    clean, _, _ = prepare(loaded, request, settings)
    counted = circuit_passes(loaded.config, len(clean.ids), request.steps)
    return len(clean.ids), sum(counted["passes"].values())


def run(loaded: LoadedModel, request: CircuitRequest, settings: limits_.Limits,
        progress: Callable[[int, int], None] | None = None) -> CircuitRun:
    clean, corrupt, tokens = prepare(loaded, request, settings)
    estimate(loaded, request, settings)
    with threads_for_this_run():
        result = measure_circuit(loaded.model, torch.tensor(list(clean.ids)), torch.tensor(list(corrupt.ids)),
                                 tokens.answer_id, tokens.wrong_id, steps=request.steps, progress=progress)
    return CircuitRun(result, tuple(clean.tokens), tuple(corrupt.tokens), tokens.to_dict())


def measured_faithfulness(run_: CircuitRun, n_edges: int) -> float:
    """The faithfulness of the top ``n_edges`` circuit, measured by running it (one patched run)."""
    pair = run_.result.pair
    with threads_for_this_run():
        return float(faithfulness(pair, top_edges(pair, run_.result.scores, n_edges))[0])


def breakdown(loaded: LoadedModel, run_: CircuitRun, layer: int, head: int, query: int, key: int) -> QKBreakdown:
    """Head ``head`` of ``layer`` scoring ``key`` from ``query`` on the clean prompt, from the run's outputs."""
    pair = run_.result.pair
    try:
        return qk_attribution(loaded.model, pair.clean_ids, layer, head, query, key, outputs=pair.clean.outputs)
    except ValueError as error:
        raise PromptError(str(error)) from None
