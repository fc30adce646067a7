"""Where txviz keeps what it fetches and writes: ``TXVIZ_HOME`` (default ``~/.cache/txviz``) holds the
known models' .gguf files and their float32 copies. The one reader of that setting, and the one test of
whether an error says that disk is full (a fetch and the float32 copy both write there)."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def txviz_home() -> Path:
    return Path(os.environ.get("TXVIZ_HOME") or Path.home() / ".cache" / "txviz").expanduser()


DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
DISK_FULL_TEXT = ("No space left on device", "Disk quot", "File too large", "os error 28", "os error 122",
                  "os error 27")


def disk_is_full(exc: BaseException | str) -> bool:
    """Whether an error (an OSError, or a message such as safetensors' or pip's) says the disk is full."""
    if isinstance(exc, OSError) and exc.errno in DISK_FULL:
        return True
    return any(text.lower() in str(exc).lower() for text in DISK_FULL_TEXT)
