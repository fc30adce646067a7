"""On the zoo's ``base_long``: the head that attention calls an induction head is the head whose ablation
hurts the loss on repeated sequences most.

The repeated sequences are the held-out stories' name → surname repeats ("Mary Parker … Mary" → "Parker"),
the positions the lab's ``name_surname`` probe scores: this model never learned to copy random tokens
(its loss on a repeated random sequence stays above 13 nats), so the classic random-token test says
nothing about it. Attention: each head's induction mass (txviz.analysis.heads.metrics.induction_pattern) from
those query rows; ablation: each head mean-ablated, the cross-entropy of the surname there.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from txviz.analysis.heads.metrics import induction_pattern, pattern_score
from txviz.capture.trace import trace
from txviz.causal.intervention import Intervention
from txviz.causal.patching import head_variants
from txviz.lab import zoo
from txviz.lab.corpus import FEMALE_NAMES, MALE_NAMES, SURNAMES, stories
from txviz.lab.tokenizer import encode_stream
from txviz.loading import load
from txviz.loading.zoo import SHIPPED_ZOO

WINDOWS, CONTEXT = 4, 128


def _word_ids(tokenizer, words) -> torch.Tensor:
    return torch.tensor([tokenizer.backend.token_to_id("▁" + word) for word in words])


def _surname_repeats(tokenizer):
    """(inputs, targets, where) per window: where the input is a first name seen before with its surname."""
    stream = torch.tensor(encode_stream(tokenizer.backend, stories("val", zoo.CORPUS)))
    windows = stream[:WINDOWS * (CONTEXT + 1)].view(WINDOWS, CONTEXT + 1)
    names, surnames = _word_ids(tokenizer, FEMALE_NAMES + MALE_NAMES), _word_ids(tokenizer, SURNAMES)
    for window in windows:
        inputs, targets = window[:-1], window[1:]
        pattern = induction_pattern(inputs)
        where = torch.isin(inputs, names) & torch.isin(targets, surnames) & pattern.any(-1)
        yield inputs, targets, where, pattern & where[:, None]


def test_the_attention_induction_head_is_the_one_whose_ablation_hurts_repeats_most():
    loaded = load(SHIPPED_ZOO / "base_long", device="cpu")
    model, config = loaded.model, loaded.config
    variants = [[]] + head_variants(config.n_layers, config.n_heads, value="mean")
    attention, harm = torch.zeros(config.n_layers, config.n_heads), torch.zeros(config.n_layers, config.n_heads)
    for inputs, targets, where, rows in _surname_repeats(loaded.tokenizer):
        probs = trace(model, inputs, ("attn_probs",))["attn_probs"][:, 0]
        attention += pattern_score(probs, rows)
        with torch.no_grad():
            logits = model(inputs[None].expand(len(variants), -1), record=Intervention(variants))[:, where]
        loss = F.cross_entropy(logits.flatten(0, 1), targets[where].repeat(len(variants)), reduction="none")
        loss = loss.view(len(variants), -1).mean(1)
        harm += (loss[1:] - loss[0]).view_as(harm)
    by_attention, by_ablation = int(attention.argmax()), int(harm.argmax())
    assert by_attention == by_ablation, (attention, harm)
    runner_up = harm.flatten().topk(2).values[1]
    assert harm.max() > 2 * runner_up  # not a near tie: the head carries the copying
