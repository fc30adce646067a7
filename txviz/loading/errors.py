"""Errors every loader raises, so the app and CLI can show one clear message for a bad model file."""

from __future__ import annotations


class ModelLoadError(ValueError):
    """A model file or directory that cannot be loaded: truncated, corrupt, or of an unsupported kind.

    The message names the file and, where it applies, the tensor, the field or the type at fault.
    """
