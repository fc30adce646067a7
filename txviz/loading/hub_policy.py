"""Who decides which Hub repos txviz may download, and how much.

``TXVIZ_HUB`` is the operator's switch: ``all`` (or ``*``, ``1``, ``on``), ``off`` (or ``0``, ``none``),
or a list of repo patterns separated by commas or spaces (``HuggingFaceTB/*, Qwen/Qwen3-0.6B``; shell
wildcards, case-insensitive). Unset, the command line and ``load()`` allow every repo (one person's own
machine) and a shared app allows none: an operator who wants visitors to fetch models says so.

Before anything is downloaded, the files' sizes and the memory the model needs are checked against
``TXVIZ_HUB_MAX_DOWNLOAD`` (bytes still to fetch; default 8GiB) and the device's available memory,
lowered by ``TXVIZ_HUB_MAX_MEMORY`` where set (sizes as ``512MiB``, ``4GB``, ``2147483648``).
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from typing import Mapping

from txviz.limits import GIB, parse_size

ALL_WORDS = {"all", "*", "1", "on", "true", "yes"}
OFF_WORDS = {"off", "0", "none", "false", "no"}
DEFAULT_MAX_DOWNLOAD = 8 * GIB


@dataclass(frozen=True)
class HubPolicy:
    patterns: tuple[str, ...] | None  # None: every repo; (): none
    max_download_bytes: int = DEFAULT_MAX_DOWNLOAD
    max_memory_bytes: int | None = None  # None: the device's available memory only

    @property
    def enabled(self) -> bool:
        return self.patterns is None or bool(self.patterns)

    def allows(self, repo: str) -> bool:
        if self.patterns is None:
            return True
        return any(fnmatch.fnmatchcase(repo.lower(), pattern.lower()) for pattern in self.patterns)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, shared: bool = False) -> "HubPolicy":
        """The policy the environment sets; ``shared``: an app serving visitors (unset means off)."""
        environ = os.environ if environ is None else environ
        switch = (environ.get("TXVIZ_HUB") or "").strip()
        if not switch:
            patterns = () if shared else None
        elif switch.lower() in ALL_WORDS:
            patterns = None
        elif switch.lower() in OFF_WORDS:
            patterns = ()
        else:
            patterns = tuple(p for p in re.split(r"[,\s]+", switch) if p)
        memory = environ.get("TXVIZ_HUB_MAX_MEMORY", "").strip()
        download = environ.get("TXVIZ_HUB_MAX_DOWNLOAD", "").strip()
        return cls(patterns, parse_size(download) if download else DEFAULT_MAX_DOWNLOAD,
                   parse_size(memory) if memory else None)
