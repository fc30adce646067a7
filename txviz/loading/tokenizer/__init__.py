"""The tokenizer wing: text ⇄ token ids with an explicit BOS policy (``tokenizer``), rebuilt from a GGUF
file's fields (``bpe`` for byte-level BPE, ``spm`` for SentencePiece), a file's own regexes and chat
templates run in capped child processes (``isolation``, ``chat_template``), and tokens as readable text
(``token_text``). Nothing is named here: import the module that holds what you need."""
