"""The built-in set's evaluation runs each sentence only up to its pronoun's token (txviz.analysis.coref.ranking
``_pronoun_masses``): held equal to the eager reading of the whole sentence, alone, on tiny models of every
attention kind and on SmolLM2.

Not bit-equal: the float sums inside the model depend on how many tokens a call has (the matrix products'
shapes), and the old whole-sentence batches already moved margins by up to 3.8e-6 on SmolLM2 between batch
sizes 1 and 16. Hence the tolerances below; the signs (a head right or wrong) are held exactly.
"""

from __future__ import annotations

import sys

import pytest
import torch

from tests.helpers.byte_tokenizer import ByteLevelTokenizer
from tests.helpers.tiny import VARIANTS
from txviz.analysis.coref import ranking
from txviz.analysis.coref.ranking import (CorefCase, answer_margin, builtin_cases, case_margins, locate,
                                          rank_heads)
from txviz.capture.trace import trace
from txviz.config import ModelConfig
from txviz.loading.loaded import LoadedModel
from txviz.model.transformer import Decoder

# Candidates after the pronoun get no attention from it (margin 0 or below): the cut must keep them at 0.
AFTER_PRONOUN = (CorefCase("When she arrived, Mary met John.", "she", ("Mary", "John"), "Mary"),
                 CorefCase("Mary said that she met John.", "she", ("Mary", "John"), "John"))


def whole_sentence_margins(loaded, cases, bos: str = "sink") -> torch.Tensor:
    """(N, L, H) the eager way: each whole sentence traced alone, the pronoun's row read from its maps."""
    rows = []
    for case in cases:
        encoding = loaded.tokenizer.encode(case.text, bos=bos)
        spans = locate(case, encoding)
        probs = trace(loaded.model, torch.as_tensor(list(encoding.ids)), capture=("attn_probs",))["attn_probs"]
        rows.append(answer_margin(rank_heads(probs[:, 0], spans.pronoun_row, spans.candidates), spans.answer))
    return torch.stack(rows)


@pytest.fixture(scope="module")
def tokenizer():
    return ByteLevelTokenizer()


def tiny_model(tokenizer, variant: str) -> LoadedModel:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=tokenizer.vocab_size, d_model=32, n_layers=2, n_heads=4, ffn_hidden=48,
                         max_seq_len=128, name=variant, **VARIANTS[variant])
    return LoadedModel(model=Decoder(config).eval(), tokenizer=tokenizer, config=config, source=variant,
                       format="test")


@pytest.mark.parametrize("variant", ["gqa", "sliding_window", "alibi", "learned"])
def test_cut_sentences_give_the_whole_sentences_margins(tokenizer, variant):
    loaded = tiny_model(tokenizer, variant)
    cases = [*builtin_cases()[::10], *AFTER_PRONOUN]
    cut = case_margins(loaded, cases, batch_size=5)
    whole = whole_sentence_margins(loaded, cases)
    torch.testing.assert_close(cut, whole, rtol=0, atol=1e-6)
    assert torch.equal(cut > 0, whole > 0)
    assert torch.equal(cut[-2], torch.zeros_like(cut[-2]))  # both candidates after the pronoun: a tie at 0


def test_no_token_after_a_pronoun_is_run(tokenizer, monkeypatch):
    loaded = tiny_model(tokenizer, "gqa")
    cases = builtin_cases()[::20]
    widths = []

    def spy(model, ids, *args, **kwargs):
        widths.append(ids.shape[-1])
        return trace(model, ids, *args, **kwargs)

    # the module itself: the package's attribute of that name is the function
    monkeypatch.setattr(sys.modules["txviz.capture.trace"], "trace", spy)
    ranking.case_margins(loaded, cases, batch_size=1)
    rows = [locate(case, tokenizer.encode(case.text, bos="sink")).pronoun_row for case in cases]
    assert widths == sorted(row + 1 for row in rows)  # one case per call, shortest first


@pytest.mark.default_model
def test_cut_sentences_on_smollm2(default_model):
    cases = builtin_cases()[::30]  # 8 cases, every kind: one batch
    cut = case_margins(default_model, cases)
    whole = whole_sentence_margins(default_model, cases)
    torch.testing.assert_close(cut, whole, rtol=0, atol=1e-5)
    assert torch.equal(cut > 0, whole > 0)
