"""Rebuild a byte-level BPE tokenizer (GGUF ``tokenizer.ggml.model`` = "gpt2") from a GGUF file's
vocabulary, merges and pre-tokenizer *name*, the way llama.cpp's ``llama-vocab.cpp`` reads them.

GGUF files carry no tokenizer.json; the pre-tokenizer is only named, so each name llama.cpp knows maps to
the split it stands for. The split regexes are also the published ones txviz trusts to run in-process
(txviz.loading.tokenizer.isolation).
"""

from __future__ import annotations

import tokenizers
from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers

from txviz.loading.errors import TokenizerError

# GPT-2's pre-tokenizer regex (what ByteLevel(use_regex=True) applies) and the ones llama.cpp names.
GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def _byte_level_after(split: str | None) -> pre_tokenizers.PreTokenizer:
    """ByteLevel with GPT-2's own regex (split=None), or after a custom regex split."""
    if split is None:
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])


def _digits_then_gpt2() -> pre_tokenizers.PreTokenizer:
    # llama.cpp's regex list {"\p{N}", GPT-2's}: every digit alone, then GPT-2's split
    return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), _byte_level_after(None)])


# tokenizer.ggml.pre → pre-tokenizer, following llama-vocab.cpp's groups of names. Unknown names are
# refused: a wrong split gives plausible-looking but different ids.
GGUF_PRE_TOKENIZERS = {
    **{name: lambda: _byte_level_after(None) for name in ("default", "gpt-2", "gpt2", "phi-2", "jina-es")},
    **{name: _digits_then_gpt2 for name in ("smollm", "starcoder", "refact", "command-r", "codeshell",
                                             "exaone", "minerva-7b")},
    **{name: lambda: _byte_level_after(LLAMA3_SPLIT) for name in ("llama3", "llama-v3", "llama-bpe",
                                                                  "falcon3", "pixtral")},
    **{name: lambda: _byte_level_after(QWEN2_SPLIT) for name in ("qwen2", "deepseek-r1-qwen")},
}
GGUF_CONTROL, GGUF_USER_DEFINED = 3, 4  # llama.cpp's token types


def build_gguf_backend(*, model: str, pre: str, tokens: list[str], merges: list[str],
                       token_types: list[int]) -> tokenizers.Tokenizer:
    if model != "gpt2":
        raise TokenizerError(f"GGUF tokenizer model {model!r} is not supported (only byte-level BPE, 'gpt2')")
    if pre not in GGUF_PRE_TOKENIZERS:
        raise TokenizerError(f"GGUF pre-tokenizer {pre!r} is not supported; known: {sorted(GGUF_PRE_TOKENIZERS)}")
    vocab = {token: index for index, token in enumerate(tokens)}
    pairs = [tuple(merge.split(" ", 1)) for merge in merges]
    # llama.cpp looks a whole word up in the vocabulary before merging only for llama3-style vocabularies
    bpe = models.BPE(vocab=vocab, merges=pairs, ignore_merges=pre in ("llama3", "llama-v3", "llama-bpe"))
    backend = tokenizers.Tokenizer(bpe)
    backend.pre_tokenizer = GGUF_PRE_TOKENIZERS[pre]()
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                for t, kind in zip(tokens, token_types) if kind == GGUF_CONTROL])
    backend.add_tokens([AddedToken(t, special=False, normalized=False)
                        for t, kind in zip(tokens, token_types) if kind == GGUF_USER_DEFINED])
    return backend
