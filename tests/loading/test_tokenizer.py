"""The tokenizer of the default model, rebuilt from GGUF metadata, against transformers' tokenizer and
llama.cpp's definition of the "smollm" pre-tokenizer; BOS policies, offsets, chat template, errors."""

from __future__ import annotations

import pytest
import tokenizers
from tokenizers import Regex, models, pre_tokenizers, processors

from tests.helpers.hf_reference import gguf_read_once, needs_transformers
from txviz.loading.gguf.loader import read_gguf_header
from txviz.loading.errors import TokenizerError
from txviz.loading.tokenizer.bpe import GPT2_SPLIT
from txviz.loading.tokenizer.tokenizer import Tokenizer, byte_level_alphabet

pytestmark = pytest.mark.default_model

PLAIN_TEXTS = [
    "Hello world, how are you?", "a  b", "hello\n\n  world", "   leading", "trailing   ", "tabs\tand\r\nCRLF",
    "it's they're we'll I'd", "The café — naïve résumé", "I 😀 you 👩\u200d👩\u200d👧 ok", "你好，世界",
    "שלום עולם", "مرحبا بالعالم", "def f(x):\n    return x**2", "<|im_start|>user\nHi<|im_end|>\n", "",
]
DIGIT_TEXTS = ["x  5", "a 12345 b", "3.14159", "  42  ", "abc123def", "year 2024, page ٣", "v1.2.3-rc4"]


@pytest.fixture(scope="module")
def tok(default_model) -> Tokenizer:
    return default_model.tokenizer


@pytest.fixture(scope="module")
def header(default_gguf_path):
    return read_gguf_header(default_gguf_path)


@pytest.fixture(scope="module")
def hf_tokenizer(default_gguf_path):
    transformers = pytest.importorskip("transformers")
    with gguf_read_once():  # its two reads of the file become one (tests/helpers/hf_reference.py)
        return transformers.AutoTokenizer.from_pretrained(default_gguf_path.parent, gguf_file=default_gguf_path.name)


def token_bytes(tok: Tokenizer, token_id: int) -> bytes:
    alphabet = byte_level_alphabet()
    return bytes(alphabet[ch] for ch in tok.id_to_token(token_id))


# ---- ids ----------------------------------------------------------------------------------------
@needs_transformers  # on the transformers worker: its reference is built once per session
@pytest.mark.parametrize("text", PLAIN_TEXTS)
def test_ids_equal_transformers_without_digits(tok, hf_tokenizer, text):
    assert list(tok.encode(text).ids) == hf_tokenizer(text, add_special_tokens=False).input_ids


@needs_transformers  # on the transformers worker: its reference is built once per session
@pytest.mark.parametrize("text", DIGIT_TEXTS)
def test_digits_follow_the_smollm_pre_tokenizer(tok, hf_tokenizer, text):
    """transformers drops the Digits step of "smollm"; with it put back, the ids agree."""
    reference = tokenizers.Tokenizer.from_str(hf_tokenizer.backend_tokenizer.to_str())
    reference.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), reference.pre_tokenizer])
    encoding = tok.encode(text)
    assert list(encoding.ids) == reference.encode(text, add_special_tokens=False).ids
    digit_spans = [(s, e) for s, e in encoding.offsets if any(ch.isdigit() for ch in text[s:e])]
    assert digit_spans and all(e - s == 1 for s, e in digit_spans), "every digit is its own token"


@pytest.mark.parametrize("text", DIGIT_TEXTS + PLAIN_TEXTS)
def test_pre_tokenizer_is_llama_cpp_regex_list(tok, text):
    """llama.cpp's "smollm" is the regex list ["\\p{N}", GPT-2's regex], each splitting what the last left."""
    regex_list = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated"),
        pre_tokenizers.Split(Regex(GPT2_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    ours = tok.backend.pre_tokenizer
    assert ours.pre_tokenize_str(text) == regex_list.pre_tokenize_str(text)


# ---- offsets and readable tokens ----------------------------------------------------------------
@pytest.mark.parametrize("text", ["Hello, world!", "I 😀 you 🎉🎉", "你好，世界。日本語も", "שלום עולם, مرحبا",
                                  "mixed: naïve 中文 עברית 😀!"])
def test_offsets_map_back_to_the_text(tok, text):
    encoding = tok.encode(text)
    assert tok.decode(encoding.ids) == text
    assert b"".join(token_bytes(tok, i) for i in encoding.ids) == text.encode("utf-8")
    for token_id, token, (start, end) in zip(encoding.ids, encoding.tokens, encoding.offsets):
        raw = token_bytes(tok, token_id)
        try:
            whole = raw.decode("utf-8")
        except UnicodeDecodeError:  # part of a multi-byte character: its span is that character
            assert raw.strip(b" ") in text[start:end].encode("utf-8"), (token, text[start:end])
            assert "\\x" in token
            continue
        assert text[start:end] == whole == token


def test_readable_tokens_undo_byte_level_stand_ins(tok):
    encoding = tok.encode("Hi there\nfriend")
    assert encoding.tokens == ("Hi", " there", "\n", "friend")
    assert tok.id_to_token(encoding.ids[1]) == "Ġthere"  # the vocabulary entry itself


# ---- BOS policies -------------------------------------------------------------------------------
@needs_transformers  # on the transformers worker: its reference is built once per session
def test_bos_policies(tok, header, hf_tokenizer):
    text = "The cat sat."
    plain = tok.encode(text)
    assert plain.ids == tok.encode(text, bos="none").ids and not any(plain.special)
    bos, sink = tok.encode(text, bos="bos"), tok.encode(text, bos="sink")
    assert bos.ids[0] == tok.bos_id == header.metadata["tokenizer.ggml.bos_token_id"]
    assert sink.ids[0] == tok.sink_id == hf_tokenizer.convert_tokens_to_ids("<|endoftext|>")
    for prefixed in (bos, sink):
        assert prefixed.ids[1:] == plain.ids and prefixed.offsets[1:] == plain.offsets
        assert prefixed.offsets[0] == (0, 0) and prefixed.special[0]
    assert tok.eos_id == header.metadata["tokenizer.ggml.eos_token_id"]
    with pytest.raises(TokenizerError, match="BOS policy"):
        tok.encode(text, bos="always")


@needs_transformers  # on the transformers worker: its reference is built once per session
def test_backend_post_processor_adds_nothing(tok, tmp_path, hf_tokenizer):
    backend = tokenizers.Tokenizer.from_str(hf_tokenizer.backend_tokenizer.to_str())
    backend.post_processor = processors.TemplateProcessing(
        single="<|im_start|> $A <|im_end|>", special_tokens=[("<|im_start|>", 1), ("<|im_end|>", 2)])
    assert backend.encode("hi").ids[0] == 1  # the file would add tokens on its own…
    backend.save(str(tmp_path / "tokenizer.json"))
    loaded = Tokenizer.from_file(tmp_path / "tokenizer.json", bos_token="<|im_start|>")
    assert loaded.encode("hi").ids == tok.encode("hi").ids  # …the wrapper does not
    assert loaded.encode("hi", bos="bos").ids == (1, *tok.encode("hi").ids)


def test_tokenizer_without_bos_refuses_the_bos_policy():
    backend = tokenizers.Tokenizer(models.WordLevel({"a": 0, "b": 1}, unk_token="a"))
    with pytest.raises(TokenizerError, match="no bos token"):
        Tokenizer(backend).encode("a", bos="bos")


# ---- special tokens -----------------------------------------------------------------------------
def test_control_tokens_are_single_special_ids(tok, header):
    tokens, types = header.metadata["tokenizer.ggml.tokens"], header.metadata["tokenizer.ggml.token_type"]
    control = [(i, t) for i, (t, kind) in enumerate(zip(tokens, types)) if kind == 3]
    assert control
    for token_id, token in control:
        encoding = tok.encode(f"x{token}y")
        assert token_id in encoding.ids and len(encoding) == 3, token
        assert encoding.special == (False, True, False)
        assert encoding.tokens[1] == token
    assert tok.special_ids == {i for i, _ in control}


def test_decode_round_trip_and_skip_special(tok):
    text = "<|im_start|>user\nWhat is 2+2?<|im_end|>"
    ids = tok.encode(text).ids
    assert tok.decode(ids) == text
    assert tok.decode(ids, skip_special=True) == "user\nWhat is 2+2?"
    torch = pytest.importorskip("torch")
    assert tok.decode(torch.tensor(ids)) == text


# ---- chat template ------------------------------------------------------------------------------
CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}],
]


@needs_transformers  # on the transformers worker: its reference is built once per session
@pytest.mark.parametrize("messages", CONVERSATIONS)
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_chat_template_renders_chatml_like_transformers(tok, hf_tokenizer, messages, add_generation_prompt):
    ours = tok.apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
    assert ours == hf_tokenizer.apply_chat_template(messages, tokenize=False,
                                                    add_generation_prompt=add_generation_prompt)
    for m in messages:
        assert f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" in ours
    assert ours.endswith("<|im_start|>assistant\n") == add_generation_prompt


def small_tokenizer(template: str | None) -> Tokenizer:
    return Tokenizer(tokenizers.Tokenizer(models.WordLevel({"a": 0}, unk_token="a")), chat_template=template)


def test_chat_template_errors():
    with pytest.raises(TokenizerError, match="no chat template"):
        small_tokenizer(None).apply_chat_template([{"role": "user", "content": "hi"}])
    refusing = small_tokenizer("{{ raise_exception('only user messages') }}")
    with pytest.raises(TokenizerError, match="only user messages"):
        refusing.apply_chat_template([{"role": "user", "content": "hi"}])
    with pytest.raises(TokenizerError, match="role"):
        small_tokenizer("x").apply_chat_template([{"content": "no role"}])
    with pytest.raises(TokenizerError, match="list"):
        small_tokenizer("x").apply_chat_template("hi")


@pytest.mark.parametrize("template", [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",  # reaching Python objects
    "{% set seen = [] %}{{ seen.append(1) }}",  # mutating: the environment is immutable
])
def test_chat_template_runs_sandboxed(template):
    with pytest.raises(TokenizerError, match="SecurityError"):  # raised in the child, reported by name
        small_tokenizer(template).apply_chat_template([{"role": "user", "content": "hi"}])


# ---- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [None, b"bytes", 42, ["a list"]])
def test_encode_refuses_non_strings(tok, value):
    with pytest.raises(TokenizerError, match="must be a str"):
        tok.encode(value)


@pytest.mark.parametrize("ids", ["text", [1.5], [-1], [10**9]])
def test_decode_refuses_bad_ids(tok, ids):
    with pytest.raises(TokenizerError):
        tok.decode(ids)
