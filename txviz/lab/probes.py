"""Behavioural probes on the held-out stories: has a lab model learned to copy and to resolve pronouns?

Next-token checks, each over the validation positions where it applies (``n``):

* ``pronoun_gender``: where the next word is a gendered pronoun (he, she, him, her, his), does the
  model rank it above its other-gender counterparts? Chance is about 50 %; above it, the model tracks
  who is being talked about (a pronoun-resolving head attending back to the name).
* ``possessive_colour``: at "her"/"his" followed by a colour ("She took her … "), is the colour the
  top prediction? A story's two people have different colours, so well above 1/8 (the colours) the
  model must find whom the pronoun stands for and copy that person's colour: two hops.
* ``colour_object`` and ``name_surname``: at a colour or first name whose pair with the next word
  already occurred in the window ("her yellow" after "Grace had a yellow scarf"; "Mary" after "Mary
  Parker"), is that word the top prediction? An induction head's job (Olsson et al. 2022): find the
  earlier occurrence of the current token, copy what followed it. Chance is 1/16 (objects, surnames).
"""

from __future__ import annotations

import torch

from txviz.lab.corpus import COLOURS, FEMALE_NAMES, MALE_NAMES, OBJECTS, SURNAMES
from txviz.lab.data import LabData
from txviz.model import Decoder

EVAL_BATCH = 8
OTHER_GENDER = {"she": ("he",), "he": ("she",), "She": ("He",), "He": ("She",), "him": ("her",),
                "his": ("her",), "her": ("him", "his")}


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


def _gender_preferred(data: LabData, logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(where the target is a gendered pronoun, whether its logit beats every other-gender form)."""
    where = torch.zeros_like(targets, dtype=torch.bool)
    preferred = torch.zeros_like(targets, dtype=torch.bool)
    for word, others in OTHER_GENDER.items():
        at = targets == data.tokenizer.token_to_id("▁" + word)
        rival = logits[..., _ids(data, others)].max(-1).values  # (W, T)
        where |= at
        preferred |= at & (logits.gather(-1, targets[..., None])[..., 0] > rival)
    return where, preferred


@torch.inference_mode()
def probes(model: Decoder, data: LabData, context: int) -> dict:
    windows = data.val_windows(context)  # (W, T + 1)
    inputs, targets = windows[:, :-1], windows[:, 1:]
    logits = torch.cat([model(chunk) for chunk in inputs.split(EVAL_BATCH)])  # (W, T, V)
    correct = logits.argmax(-1) == targets
    colours, objects = _ids(data, COLOURS), _ids(data, OBJECTS)
    gendered, preferred = _gender_preferred(data, logits, targets)
    seen = _seen_pair_before(inputs, targets)
    checks = {
        "pronoun_gender": (gendered, preferred),
        "possessive_colour": (torch.isin(inputs, _ids(data, ("her", "his"))) & torch.isin(targets, colours), correct),
        "colour_object": (torch.isin(inputs, colours) & torch.isin(targets, objects) & seen, correct),
        "name_surname": (torch.isin(inputs, _ids(data, FEMALE_NAMES + MALE_NAMES))
                         & torch.isin(targets, _ids(data, SURNAMES)) & seen, correct),
    }
    return {name: {"accuracy": round(float(hit[where].float().mean()), 4), "n": int(where.sum())}
            for name, (where, hit) in checks.items()}
