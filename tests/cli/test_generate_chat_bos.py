"""``txviz generate --chat`` on a model whose chat template opens with its BOS (SmolLM2's ChatML opens with
<|im_start|>, its BOS): ``--bos bos`` feeds the model one <|im_start|> in front of "user", not two, as the
app's Decoding page does; ``--bos sink`` (another token) still prepends the sink. Checked on a tiny GGUF
with SmolLM2's tokenizer layout, on the ids the command reports it fed the model."""

from __future__ import annotations

import json

import pytest

from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf
from txviz.cli import main
from txviz.loading import load


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("chatml") / "tiny.gguf"
    config = tiny(name="tiny-chatml")
    write_gguf(path, config, weights_of(config))
    return str(path)


def prompt_ids(capsys, model_path: str, *argv: str) -> list[int]:
    assert main(["generate", "--model", model_path, "--device", "cpu", "--json", "--prompt", "the the",
                 "--max-new-tokens", "1", *argv]) == 0
    return json.loads(capsys.readouterr().out)["prompt_ids"]


def test_bos_before_a_chat_template_that_opens_with_it_is_not_doubled(capsys, model_path):
    tokenizer = load(model_path, device="cpu").tokenizer
    template = list(tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": "the the"}])).ids)
    assert template[0] == tokenizer.bos_id
    assert prompt_ids(capsys, model_path, "--chat", "--bos", "bos") == template
    assert prompt_ids(capsys, model_path, "--chat", "--bos", "bos", "--candidates", "2") == template
    assert prompt_ids(capsys, model_path, "--chat", "--bos", "sink") == [tokenizer.sink_id] + template
    assert prompt_ids(capsys, model_path, "--bos", "bos") == [tokenizer.bos_id] + list(tokenizer.encode("the the").ids)
