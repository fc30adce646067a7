"""A Decoding run (and the KV cache page's generation) in a chat template with "BOS" before the prompt: SmolLM2's ChatML template opens with
<|im_start|>, which is also its BOS, so the run reads one <|im_start|> in front of "system", not two (the
doubled BOS no reference tokenizer makes). Checked on a tiny GGUF with SmolLM2's tokenizer layout."""

from __future__ import annotations

import pytest

from app.services import decoding, generation
from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf
from txviz.limits import Limits
from txviz.loading import load


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    path = tmp_path_factory.mktemp("chatml") / "tiny.gguf"
    config = tiny(name="tiny-chatml")
    write_gguf(path, config, weights_of(config))
    return load(str(path), device="cpu")


def ids_of(loaded, bos: str, chat: bool) -> list[int]:
    inputs = decoding.DecodingInputs(source="tiny", prompt="the the", bos=bos, chat=chat, max_new_tokens=2)
    return decoding.prompt_ids(loaded, inputs, Limits())


def test_the_bos_before_a_template_that_opens_with_it_is_not_doubled(loaded):
    tokenizer = loaded.tokenizer
    wrapped = tokenizer.apply_chat_template([{"role": "user", "content": "the the"}])
    template = list(tokenizer.encode(wrapped).ids)
    assert template[0] == tokenizer.bos_id  # the template opens with the BOS itself
    assert ids_of(loaded, "bos", chat=True) == template  # one BOS, the template's
    assert ids_of(loaded, "none", chat=True) == template
    assert ids_of(loaded, "sink", chat=True) == [tokenizer.sink_id] + template  # a sink is another token: kept
    assert ids_of(loaded, "bos", chat=False) == [tokenizer.bos_id] + list(tokenizer.encode("the the").ids)


def test_the_kv_cache_pages_generation_reads_one_bos_too(loaded):
    template = ids_of(loaded, "none", chat=True)
    for bos in ("bos", "none"):
        result = generation.generate_from_prompt(loaded, "the the", bos, Limits(), 1, use_cache=True, chat=True)
        assert list(result.prompt_ids) == template
