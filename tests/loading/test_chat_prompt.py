"""A prompt wrapped in a chat template that opens with the token the BOS policy would prepend: the policy
becomes "none", so the model reads that token once (SmolLM2's ChatML opens with <|im_start|>, its BOS;
Gemma's template with <bos>, which is also its sink). A different token is still prepended, and a prompt
outside the template keeps its policy."""

from __future__ import annotations

import pytest
import tokenizers
from tokenizers import models, pre_tokenizers

from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf
from txviz.loading import load
from txviz.loading.errors import TokenizerError
from txviz.loading.tokenizer.chat_prompt import wrap_prompt
from txviz.loading.tokenizer.tokenizer import Tokenizer

MESSAGE = [{"role": "user", "content": "the the"}]


@pytest.fixture(scope="module")
def chatml(tmp_path_factory) -> Tokenizer:
    path = tmp_path_factory.mktemp("chatml") / "tiny.gguf"
    config = tiny(name="tiny-chatml")
    write_gguf(path, config, weights_of(config))
    return load(str(path), device="cpu").tokenizer


def bos_template_tokenizer(chat_template: str | None) -> Tokenizer:
    """A word-level vocabulary whose BOS is also its sink (it has no document-boundary token), as Gemma's."""
    backend = tokenizers.Tokenizer(models.WordLevel({"<unk>": 0, "<bos>": 1, "<eos>": 2, "the": 3}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.add_special_tokens(["<bos>", "<eos>"])
    return Tokenizer(backend, bos_token="<bos>", eos_token="<eos>", chat_template=chat_template)


def read(tokenizer: Tokenizer, bos: str, chat: bool) -> list[int]:
    text, policy = wrap_prompt(tokenizer, "the the", bos, chat)
    return list(tokenizer.encode(text, bos=policy).ids)


def test_a_chatml_template_that_opens_with_the_bos_takes_no_second_one(chatml):
    template = list(chatml.encode(chatml.apply_chat_template(MESSAGE)).ids)
    assert template[0] == chatml.bos_id
    assert read(chatml, "bos", chat=True) == template
    assert read(chatml, "none", chat=True) == template
    assert chatml.sink_id != chatml.bos_id
    assert read(chatml, "sink", chat=True) == [chatml.sink_id] + template
    assert read(chatml, "bos", chat=False) == [chatml.bos_id] + list(chatml.encode("the the").ids)


def test_a_template_that_opens_with_the_sink_takes_no_second_one():
    tokenizer = bos_template_tokenizer("{{ bos_token }}{{ messages[0]['content'] }}")
    assert tokenizer.sink_id == tokenizer.bos_id == 1
    for bos in ("bos", "sink", "none"):
        assert read(tokenizer, bos, chat=True) == [1, 3, 3]
        assert read(tokenizer, bos, chat=False) == ([] if bos == "none" else [1]) + [3, 3]


def test_a_template_without_the_bos_keeps_the_policy():
    tokenizer = bos_template_tokenizer("{{ messages[0]['content'] }}")
    assert read(tokenizer, "bos", chat=True) == [1, 3, 3]
    assert read(tokenizer, "none", chat=True) == [3, 3]


def test_a_model_without_a_chat_template_refuses_the_wrap_and_keeps_plain_text():
    tokenizer = bos_template_tokenizer(None)
    with pytest.raises(TokenizerError, match="no chat template"):
        wrap_prompt(tokenizer, "the the", "bos", chat=True)
    assert wrap_prompt(tokenizer, "the the", "bos", chat=False) == ("the the", "bos")
