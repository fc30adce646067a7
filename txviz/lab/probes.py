"""Behavioural probes on the held-out stories: has a lab model learned to copy and to resolve pronouns?

Two next-token accuracies, each over the validation positions where it applies:

* ``possessive_colour``: at "her"/"his" followed by a colour ("She took her … "), is the colour
  predicted? Each story gives its two people different colours, so above ~50 % the model must find
  whom the pronoun stands for and copy that person's colour (seed §1.1; a pronoun-resolving head).
* ``colour_object``: at a colour whose (colour, object) pair already occurred in the window ("… her
  yellow …" after "Grace had a yellow scarf"), is the object predicted? An induction head's job
  (Olsson et al. 2022): find the earlier occurrence of the current token, copy what followed it.
"""

from __future__ import annotations

import torch

from txviz.lab.corpus import COLOURS, OBJECTS
from txviz.lab.data import LabData
from txviz.model import Decoder

EVAL_BATCH = 8


def _ids(data: LabData, words) -> torch.Tensor:
    return torch.tensor([data.tokenizer.token_to_id("▁" + word) for word in words])


def _seen_pair_before(inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(W, T) True where the bigram (inputs[t], targets[t]) already occurred earlier in the window."""
    seen = torch.zeros_like(inputs, dtype=torch.bool)
    for w in range(inputs.shape[0]):
        pairs: set[tuple[int, int]] = set()
        for t, pair in enumerate(zip(inputs[w].tolist(), targets[w].tolist())):
            seen[w, t] = pair in pairs
            pairs.add(pair)
    return seen


@torch.inference_mode()
def probes(model: Decoder, data: LabData, context: int) -> dict:
    windows = data.val_windows(context)  # (W, T + 1)
    inputs, targets = windows[:, :-1], windows[:, 1:]
    predicted = torch.cat([model(chunk).argmax(-1) for chunk in inputs.split(EVAL_BATCH)])  # (W, T)
    colours, objects = _ids(data, COLOURS), _ids(data, OBJECTS)
    where = {
        "possessive_colour": torch.isin(inputs, _ids(data, ("her", "his"))) & torch.isin(targets, colours),
        "colour_object": torch.isin(inputs, colours) & torch.isin(targets, objects) & _seen_pair_before(inputs, targets),
    }
    correct = predicted == targets
    return {name: {"accuracy": round(float(correct[mask].float().mean()), 4), "n": int(mask.sum())}
            for name, mask in where.items()}
