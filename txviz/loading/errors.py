"""Errors every loader and the tokenizer raise, so the app and CLI can show one clear message for a bad
model file or an input the tokenizer cannot take."""

from __future__ import annotations


class ModelLoadError(ValueError):
    """A model file or directory that cannot be loaded: truncated, corrupt, or of an unsupported kind.

    The message names the file and, where it applies, the tensor, the field or the type at fault.
    """


class TokenizerError(ValueError):
    """Input the tokenizer cannot handle: not a string, an unknown policy or id, no chat template."""
