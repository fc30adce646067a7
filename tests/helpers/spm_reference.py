"""Google's SentencePiece library as the reference for a SentencePiece BPE vocabulary stored in a GGUF file
(``tokenizer.ggml.model`` = "llama": Gemma): the file's pieces, scores and types become a ``ModelProto``, and
SentencePiece's own encoder runs on it.

Gemma's original tokenizer *is* a SentencePiece model, so this is the reference that llama.cpp's and
transformers' ports imitate; building it takes about a second, where transformers' GGUF tokenizer derives
merges for all 262k pieces first (~30 CPU s on this machine). Two steps undo what the GGUF keeps differently:
- llama.cpp's converter wrote the spaces of user-defined pieces (Gemma's runs of spaces) as " "; the
  ``.model`` file spells them "▁", the normalized space, which is where SentencePiece matches them;
- SentencePiece never matches control pieces (``<bos>``, ``<start_of_turn>``) in text; the GGUF's users
  (llama.cpp with special parsing, transformers) do, so the text is cut at them first and each becomes its id.
The pieces come from the ``gguf`` package's own reader, not txviz's, so the two sides share no code.
"""

from __future__ import annotations

import re

import pytest

GGUF_CONTROL, GGUF_USER_DEFINED = 3, 4  # the same numbers as SentencePiece's ModelProto.SentencePiece.Type
SPACE = "\u2581"
SPECIAL_IDS = {"unk_id": "tokenizer.ggml.unknown_token_id", "bos_id": "tokenizer.ggml.bos_token_id",
               "eos_id": "tokenizer.ggml.eos_token_id", "pad_id": "tokenizer.ggml.padding_token_id"}


class SentencePieceReference:
    """``encode(text) -> ids`` by SentencePiece, with control pieces matched in the text (no BOS added)."""

    def __init__(self, fields):
        spm = pytest.importorskip("sentencepiece", reason="sentencepiece (the test extra) is not installed")
        from sentencepiece import sentencepiece_model_pb2

        tokens = fields["tokenizer.ggml.tokens"].contents()
        types = fields["tokenizer.ggml.token_type"].contents()
        proto = _model_proto(sentencepiece_model_pb2, fields, tokens, types)
        self._processor = spm.SentencePieceProcessor()
        self._processor.LoadFromSerializedProto(proto.SerializeToString())
        self._control_ids = {token: i for i, (token, kind) in enumerate(zip(tokens, types)) if kind == GGUF_CONTROL}
        longest_first = sorted(self._control_ids, key=len, reverse=True)
        self._control = re.compile("(" + "|".join(map(re.escape, longest_first)) + ")")

    @property
    def vocab_size(self) -> int:
        return self._processor.get_piece_size()

    def encode(self, text: str) -> list[int]:
        ids = []
        for index, part in enumerate(self._control.split(text)):  # odd indices: the control pieces cut out
            if index % 2:
                ids.append(self._control_ids[part])
            elif part:
                ids.extend(self._processor.encode(part))
        return ids


def _model_proto(pb, fields, tokens, types):
    scores = fields["tokenizer.ggml.scores"].contents()
    proto = pb.ModelProto()
    trainer = proto.trainer_spec
    trainer.model_type, trainer.vocab_size, trainer.byte_fallback = pb.TrainerSpec.BPE, len(tokens), True
    for name, key in SPECIAL_IDS.items():
        setattr(trainer, name, int(fields[key].contents()) if key in fields else -1)
    normalizer = proto.normalizer_spec  # "identity": no NFKC, spaces kept as they are, only escaped to "▁"
    normalizer.name, normalizer.escape_whitespaces, normalizer.remove_extra_whitespaces = "identity", True, False
    prefix = fields.get("tokenizer.ggml.add_space_prefix")
    normalizer.add_dummy_prefix = bool(prefix.contents()) if prefix is not None else True
    for token, score, kind in zip(tokens, scores, types):
        piece = proto.pieces.add()
        piece.piece = token.replace(" ", SPACE) if kind == GGUF_USER_DEFINED else token
        piece.score, piece.type = score, kind
    return proto
