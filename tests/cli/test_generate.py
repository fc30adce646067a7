"""``txviz generate`` past the model's context names the knob to turn (it once said
"1 tokens … Shorten it" when --max-new-tokens was what was too long)."""

from __future__ import annotations

import json

import pytest

from txviz.cli import main
from txviz.cli.prompts import check_context
from txviz.loading import load
from txviz.loading.zoo import SHIPPED_ZOO

MODEL = str(SHIPPED_ZOO / "base")


def test_too_many_new_tokens_names_max_new_tokens(capsys):
    context = load(MODEL, device="cpu").config.max_seq_len
    argv = ["generate", "--model", MODEL, "--device", "cpu", "--json", "--bos", "none", "--prompt", "Once"]
    assert main([*argv, "--max-new-tokens", str(context + 5)]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error == (f"The prompt has 1 token + {context + 5:,} new = {context + 6:,}; the model's context is "
                     f"{context:,} tokens. Lower --max-new-tokens to at most {context - 1:,}.")


def test_a_prompt_that_fills_the_context_says_shorten_the_prompt():
    with pytest.raises(ValueError, match=r"^The prompt has 8 tokens \+ 1 new = 9; the model's context is 8 tokens, "
                                         r"and the prompt alone fills it\. Shorten the prompt\.$"):
        check_context(8, 1, 8)
    check_context(7, 1, 8)  # exactly the context: fits
