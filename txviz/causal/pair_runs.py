"""The two plain runs that every measurement of one prompt pair starts from, made once for all of them.

Patching every head, the residual grid and attribution patching all read the counterfactual's activations
(head outputs, the residual entering each layer); the head sweeps and the grid all resume from the clean
prompt's plain run (txviz.causal.shared_prefix.clean_run), whose last logits also give the clean logit
difference; the counterfactual's own difference comes from its run. Run per step, that was four calls of
the counterfactual and six of the clean prompt where one each gives the same tensors: a recorder only
keeps what passes, so recording more points changes no number.
"""

from __future__ import annotations

from functools import cached_property

import torch

from txviz.causal.activations import Activations, run_with_activations
from txviz.causal.metric import logit_diff
from txviz.causal.patching import as_batch
from txviz.causal.shared_prefix import CleanRun, clean_run

POINTS = ("head_out", "resid_pre")  # what the steps patch from the counterfactual: heads, the residual grid


class PairRuns:
    """Each run is made when a step first asks for it (a memo hit asks only for the counterfactual's)."""

    def __init__(self, model, clean_ids: torch.Tensor, corrupt_ids: torch.Tensor):
        self._model, self._clean_ids, self._corrupt_ids = model, as_batch(clean_ids), as_batch(corrupt_ids)

    @cached_property
    def clean(self) -> CleanRun:
        return clean_run(self._model, self._clean_ids, POINTS)

    @cached_property
    def _corrupt_run(self) -> tuple[torch.Tensor, Activations]:
        return run_with_activations(self._model, self._corrupt_ids, POINTS, last_only=True)

    @property
    def corrupt(self) -> Activations:
        return self._corrupt_run[1]

    def corrupt_diff(self, answer_id: int, wrong_id: int) -> float:
        """The counterfactual's logit difference: what ``patching.clean_diff`` gives for its ids."""
        return float(logit_diff(self._corrupt_run[0], answer_id, wrong_id)[0])
