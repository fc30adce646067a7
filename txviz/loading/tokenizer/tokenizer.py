"""Text ⇄ token ids, with an explicit BOS policy and offsets the UI can map back onto the prompt.

A thin wrapper around a HuggingFace ``tokenizers.Tokenizer`` (the Rust BPE). Two rules keep what the
model sees visible (a library that adds tokens quietly leaves its users puzzled over inputs they
never wrote, as TransformerLens's bug tracker shows):

* Nothing is added behind the caller's back: the backend's post-processor is removed and the only
  thing that prepends a token is the ``bos`` policy of ``encode``: "none", "bos" (the tokenizer's
  BOS token) or "sink" (a document-boundary token the model saw at the start of pretraining
  documents, which then absorbs the attention that would otherwise pile onto the first word; Xiao et
  al. 2024, "Efficient Streaming Language Models with Attention Sinks").
* Every token carries its character span in the text and a human-readable string: byte-level BPE
  tokens ("Ġworld") are turned back into the bytes they stand for (" world"); a token holding only
  part of a multi-byte character shows its dangling bytes as ``\\x..`` escapes.

GGUF files carry no tokenizer.json, only vocabulary, merges and a pre-tokenizer *name*:
``txviz.loading.tokenizer.bpe`` rebuilds a byte-level BPE from those fields the way llama.cpp's
``llama-vocab.cpp`` reads them, ``txviz.loading.tokenizer.spm`` a SentencePiece one (Gemma's). Chat
templates come from model files: txviz.loading.tokenizer.chat_template renders them in Jinja's immutable
sandbox inside a capped child process.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

import tokenizers

from txviz.loading.errors import TokenizerError
from txviz.loading.tokenizer.bpe import build_gguf_backend
from txviz.loading.tokenizer.chat_template import ChatTemplateError, render_chat_template
from txviz.loading.tokenizer.isolation import encode_in_child, untrusted_regexes
from txviz.loading.tokenizer.spm import build_spm_backend

BosPolicy = Literal["none", "bos", "sink"]
BOS_POLICIES: tuple[str, ...] = ("none", "bos", "sink")

# Tokens that mark a document boundary in pretraining data, in order of preference. A chat model's
# BOS is often a chat marker instead (SmolLM2's is <|im_start|>), so the sink is looked up separately.
DOCUMENT_BOUNDARY_TOKENS = ("<|endoftext|>", "<|begin_of_text|>", "<s>", "<bos>")
# The largest published tokenizer.json files are tens of MB (Gemma 3's 262k tokens: 33 MB); tokenizers
# parses one in this process at several times its size in memory, so a larger file is refused unread.
MAX_TOKENIZER_JSON_BYTES = 128 << 20


def tokenizer_json_too_large(path: str | Path) -> str | None:
    """Why the tokenizer.json at ``path`` is refused for its size (one line), or None."""
    size = Path(path).stat().st_size
    if size <= MAX_TOKENIZER_JSON_BYTES:
        return None
    return (f"{path} is {size / 2**20:,.0f} MiB; tokenizer.json files are tens of MB (Gemma 3's is 33 MB), and "
            f"more than {MAX_TOKENIZER_JSON_BYTES >> 20} MiB is refused unread")


@dataclass(frozen=True)
class Encoding:
    """One tokenized text. ``offsets[i]`` is the (start, end) character span of token i in ``text``
    ((0, 0) for a prepended BOS/sink token); tokens that split one character share its span.
    ``dropped`` lists the characters (indices into ``text``) with a byte the vocabulary has no token
    for: a byte-level BPE without an unknown token skips such bytes, as the reference tokenizer does
    (SmolLM2 lacks e.g. 0x04, 0x1D and the bytes that open U+40000–U+BFFFF), so they never reach the
    model and ``decode`` cannot give them back."""

    ids: tuple[int, ...]
    tokens: tuple[str, ...]  # human-readable: " world", not "Ġworld"
    offsets: tuple[tuple[int, int], ...]
    special: tuple[bool, ...]
    text: str = ""
    dropped: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.ids)


@functools.lru_cache(maxsize=1)
def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's printable stand-ins for the 256 byte values (Radford et al. 2019, ``bytes_to_unicode``),
    inverted: stand-in character → byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    stand_ins, shift = {}, 0
    for byte in range(256):
        if byte in printable:
            stand_ins[chr(byte)] = byte
        else:
            stand_ins[chr(256 + shift)] = byte
            shift += 1
    return stand_ins


class Tokenizer:
    """``encode``/``decode`` with an explicit BOS policy, special-token ids and the chat template.

    ``backend`` is copied and its post-processor dropped. ``sink_token`` defaults to the first
    document-boundary token the vocabulary has (DOCUMENT_BOUNDARY_TOKENS), else the BOS token.
    ``adds_bos`` records whether the model's own tokenizer prepends BOS (Gemma's does, SmolLM2's does
    not): a hint for choosing the policy, never applied by ``encode`` itself.
    """

    def __init__(self, backend: tokenizers.Tokenizer, *, bos_token: str | None = None,
                 eos_token: str | None = None, sink_token: str | None = None,
                 chat_template: str | None = None, adds_bos: bool = False, copy_backend: bool = True):
        # a copy we may change (a 262k-token vocabulary costs seconds to copy: skipped for a fresh backend)
        self._backend = tokenizers.Tokenizer.from_str(backend.to_str()) if copy_backend else backend
        self._backend.post_processor = None  # the BOS policy alone adds tokens
        self.bos_token, self.eos_token = bos_token, eos_token
        added = self._backend.get_added_tokens_decoder()
        self._special_ids = frozenset(i for i, tok in added.items() if tok.special)
        self.sink_token = sink_token or self._default_sink()
        if chat_template is not None and not isinstance(chat_template, str):
            raise TokenizerError(f"chat template must be text, got {type(chat_template).__name__}")
        self.chat_template = chat_template
        self.adds_bos = adds_bos  # what the model's own tokenizer does by default; encode never does it silently
        for role, token in (("bos", bos_token), ("eos", eos_token), ("sink", self.sink_token)):
            if token is not None and self._backend.token_to_id(token) is None:
                raise TokenizerError(f"{role} token {token!r} is not in the vocabulary")
        decoder = self._backend.decoder
        self._byte_level = decoder is not None and b'"ByteLevel"' in decoder.__getstate__()
        self._missing_bytes = frozenset(byte for ch, byte in byte_level_alphabet().items()
                                        if self._backend.token_to_id(ch) is None) if self._byte_level else frozenset()
        # a file's own regexes run in a capped child process (txviz.loading.tokenizer.isolation)
        self._isolated_json = self._backend.to_str() if untrusted_regexes(self._backend) else None

    @property
    def isolated(self) -> bool:
        """True when this tokenizer encodes text in a child process (its file brought regexes of its own)."""
        return self._isolated_json is not None

    def _default_sink(self) -> str | None:
        """The first DOCUMENT_BOUNDARY_TOKENS entry that is a special token here: Gemma's "<s>" is a plain
        (strikethrough) tag, not a boundary, so its sink is its BOS."""
        for token in DOCUMENT_BOUNDARY_TOKENS:
            if self._backend.token_to_id(token) in self._special_ids:
                return token
        return self.bos_token

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_file(cls, tokenizer_json_path: str | Path, *, bos_token: str | None = None,
                  eos_token: str | None = None, sink_token: str | None = None,
                  chat_template: str | None = None) -> "Tokenizer":
        """A HuggingFace ``tokenizer.json``; the special tokens come from ``tokenizer_config.json``."""
        too_large = tokenizer_json_too_large(tokenizer_json_path)
        if too_large:
            raise TokenizerError(too_large)
        try:
            backend = tokenizers.Tokenizer.from_file(str(tokenizer_json_path))
        except Exception as exc:  # the Rust side raises a bare Exception on malformed JSON
            raise TokenizerError(f"cannot read tokenizer {tokenizer_json_path}: {exc}") from exc
        return cls(backend, bos_token=bos_token, eos_token=eos_token, sink_token=sink_token,
                   chat_template=chat_template)

    @classmethod
    def from_gguf_metadata(cls, metadata: Mapping[str, Any]) -> "Tokenizer":
        """Rebuild from a GGUF file's ``tokenizer.*`` key/values (plain Python values)."""
        tokens = list(metadata["tokenizer.ggml.tokens"])

        def token_at(key: str) -> str | None:
            index = metadata.get(key)
            return tokens[int(index)] if index is not None and 0 <= int(index) < len(tokens) else None

        model = str(metadata.get("tokenizer.ggml.model", "gpt2"))
        token_types = list(metadata.get("tokenizer.ggml.token_type", [1] * len(tokens)))
        if model == "llama":  # SentencePiece BPE: Llama 1/2, Gemma
            backend = build_spm_backend(
                tokens=tokens, scores=list(metadata.get("tokenizer.ggml.scores", [])), token_types=token_types,
                unknown_token=token_at("tokenizer.ggml.unknown_token_id"),
                add_space_prefix=bool(metadata.get("tokenizer.ggml.add_space_prefix", True)))
        else:
            backend = build_gguf_backend(model=model, pre=str(metadata.get("tokenizer.ggml.pre", "default")),
                                         tokens=tokens, merges=list(metadata.get("tokenizer.ggml.merges", [])),
                                         token_types=token_types)
        # llama.cpp adds BOS to a SentencePiece vocabulary unless the file says otherwise
        adds_bos = metadata.get("tokenizer.ggml.add_bos_token", model == "llama")
        return cls(backend, bos_token=token_at("tokenizer.ggml.bos_token_id"),
                   eos_token=token_at("tokenizer.ggml.eos_token_id"),
                   chat_template=metadata.get("tokenizer.chat_template"), adds_bos=bool(adds_bos),
                   copy_backend=False)

    @property
    def backend(self) -> tokenizers.Tokenizer:
        """The underlying ``tokenizers.Tokenizer`` (post-processor removed), for inspection."""
        return self._backend

    # ---- ids ----------------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self._backend.get_vocab_size(with_added_tokens=True)

    def _id_of(self, token: str | None) -> int | None:
        return None if token is None else self._backend.token_to_id(token)

    @property
    def bos_id(self) -> int | None:
        return self._id_of(self.bos_token)

    @property
    def eos_id(self) -> int | None:
        return self._id_of(self.eos_token)

    @property
    def sink_id(self) -> int | None:
        return self._id_of(self.sink_token)

    @property
    def missing_bytes(self) -> frozenset[int]:
        """Bytes a byte-level vocabulary has no token for: skipped when they occur (Encoding.dropped)."""
        return self._missing_bytes

    @property
    def special_ids(self) -> frozenset[int]:
        return self._special_ids

    def id_to_token(self, token_id: int) -> str:
        """The vocabulary entry itself (byte-level form, e.g. "Ġworld")."""
        self._check_ids([token_id])
        return self._backend.id_to_token(int(token_id))

    def token_to_id(self, token: str) -> int | None:
        return self._backend.token_to_id(token)

    def display(self, token_id: int) -> str:
        """The token as text a person can read (" world"); dangling UTF-8 bytes as ``\\x..``."""
        token = self.id_to_token(token_id)
        if token_id in self._special_ids:
            return token
        if self._byte_level:
            alphabet = byte_level_alphabet()
            if all(ch in alphabet for ch in token):
                return bytes(alphabet[ch] for ch in token).decode("utf-8", errors="backslashreplace")
            return token
        with rust_errors("decode a token"):
            return self._backend.decode([int(token_id)], skip_special_tokens=False) or token

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes a token stands for (a byte-level token, or a ``<0xAB>`` byte-fallback token, may
        hold part of a character: token_text.readable_tokens puts such tokens back together)."""
        token = self.id_to_token(token_id)
        if token_id not in self._special_ids:
            if self._byte_level and all(ch in byte_level_alphabet() for ch in token):
                return bytes(byte_level_alphabet()[ch] for ch in token)
            if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
                try:
                    return bytes([int(token[3:5], 16)])
                except ValueError:
                    pass
        return self.display(token_id).encode("utf-8", "surrogatepass")

    def _check_ids(self, ids: Sequence[int]) -> list[int]:
        out = []
        for token_id in ids:
            if isinstance(token_id, bool) or not hasattr(token_id, "__index__"):
                raise TokenizerError(f"token ids must be integers, got {token_id!r}")
            if not 0 <= int(token_id) < self.vocab_size:
                raise TokenizerError(f"token id {int(token_id)} is outside the vocabulary [0, {self.vocab_size})")
            out.append(int(token_id))
        return out

    # ---- text ---------------------------------------------------------------------------------
    def encode(self, text: str, bos: BosPolicy = "none") -> Encoding:
        if not isinstance(text, str):
            raise TokenizerError(f"text must be a str, got {type(text).__name__}")
        prefix = self._prefix_id(bos)
        raw_ids, raw_offsets = self._encode_raw(text)
        ids = ([prefix] if prefix is not None else []) + raw_ids
        offsets = ([(0, 0)] if prefix is not None else []) + raw_offsets
        return Encoding(ids=tuple(ids), tokens=tuple(self.display(i) for i in ids),
                        offsets=tuple(offsets), special=tuple(i in self._special_ids for i in ids), text=text,
                        dropped=self._dropped(text))

    def _encode_raw(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        try:
            if self._isolated_json is not None:
                return encode_in_child(self._isolated_json, text)
            with rust_errors("encode the text"):
                raw = self._backend.encode(text, add_special_tokens=False)
        except TypeError as exc:  # a lone surrogate ("\\ud800") is a str but not Unicode text
            raise TokenizerError(f"text is not valid Unicode (a lone surrogate?): {exc}") from None
        return list(raw.ids), [tuple(o) for o in raw.offsets]

    def _dropped(self, text: str) -> tuple[int, ...]:
        """Characters with a byte that has no token (see Encoding.dropped)."""
        if self._missing_bytes.isdisjoint(text.encode("utf-8")):
            return ()
        return tuple(i for i, ch in enumerate(text) if not self._missing_bytes.isdisjoint(ch.encode("utf-8")))

    def _prefix_id(self, bos: str) -> int | None:
        if bos not in BOS_POLICIES:
            raise TokenizerError(f"unknown BOS policy {bos!r}; choose one of {BOS_POLICIES}")
        if bos == "none":
            return None
        token_id = self.bos_id if bos == "bos" else self.sink_id
        if token_id is None:
            raise TokenizerError(f"this tokenizer has no {bos} token; use bos='none'")
        return token_id

    def decode(self, ids: Sequence[int], skip_special: bool = False) -> str:
        if isinstance(ids, (str, bytes)):
            raise TokenizerError(f"decode takes token ids, got {type(ids).__name__}")
        if hasattr(ids, "tolist"):  # a tensor or an array
            ids = ids.tolist()
        ids = self._check_ids(list(ids))
        with rust_errors("decode the ids"):
            return self._backend.decode(ids, skip_special_tokens=skip_special)

    # ---- chat ---------------------------------------------------------------------------------
    def apply_chat_template(self, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True,
                            **extra: Any) -> str:
        """Render ``messages`` ([{"role": ..., "content": ...}]) with the model's own template."""
        if not self.chat_template:
            raise TokenizerError("this tokenizer has no chat template; encode plain text instead")
        _check_messages(messages)
        context = dict(messages=[dict(m) for m in messages], add_generation_prompt=add_generation_prompt,
                       bos_token=self.bos_token or "", eos_token=self.eos_token or "", **extra)
        try:  # in a capped child process (txviz.loading.tokenizer.chat_template): the template comes from a model file
            return render_chat_template(self.chat_template, context)
        except ChatTemplateError as error:
            raise TokenizerError(str(error)) from None

    def __repr__(self) -> str:
        return (f"Tokenizer(vocab_size={self.vocab_size}, bos={self.bos_token!r}, eos={self.eos_token!r}, "
                f"sink={self.sink_token!r}, chat_template={'yes' if self.chat_template else 'no'})")


@contextlib.contextmanager
def rust_errors(action: str):
    """The tokenizer's Rust code runs a file's regexes and models: a catastrophic pattern such as
    ``(a+)+c`` makes it *panic*, which pyo3 raises as ``PanicException``, a BaseException that would
    kill the app's script thread. Here it becomes a TokenizerError, like any other failure of the file."""
    try:
        yield
    except TypeError:
        raise  # the caller's own input (a lone surrogate), reported by the caller
    except BaseException as error:  # noqa: BLE001 - PanicException is not an Exception
        if isinstance(error, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            raise
        message = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
        raise TokenizerError(f"the model's tokenizer failed to {action}: {message}") from None


def _check_messages(messages: Any) -> None:
    if isinstance(messages, (str, Mapping)) or not isinstance(messages, Sequence):
        raise TokenizerError("messages must be a list of {'role': ..., 'content': ...} dicts")
    for m in messages:
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise TokenizerError(f"each message needs string 'role' and 'content', got {m!r}")
