"""Hugging Face Hub ids as txviz takes them: ``org/name`` or ``org/name@revision``.

A revision is a branch, a tag or a commit; txviz resolves it to the commit and keeps that in what it
reports (and the app in its URL), so a shared link reproduces the same weights after the branch moves.
An existing path always wins over an id it shadows, as a path wins over a known model's name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from txviz.loading.errors import ModelLoadError

# the Hub's own rule for a repo id (huggingface_hub's validate_repo_id): letters, digits, - _ . ; no "--" or ".."
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_ID = re.compile(rf"(?P<repo>{_PART}/{_PART})(?:@(?P<revision>[A-Za-z0-9][A-Za-z0-9._/-]{{0,199}}))?")
COMMIT = re.compile(r"[0-9a-f]{40}")
DEFAULT_REVISION = "main"
_FILE_SUFFIXES = (".gguf", ".safetensors", ".json", ".bin", ".pt", ".pth")  # a file name, not a repo


@dataclass(frozen=True)
class HubId:
    repo: str  # "org/name"
    revision: str = DEFAULT_REVISION  # a branch, tag or 40-hex commit

    @property
    def pinned(self) -> bool:
        return bool(COMMIT.fullmatch(self.revision))

    def __str__(self) -> str:
        return self.repo if self.revision == DEFAULT_REVISION else f"{self.repo}@{self.revision}"


def parse_hub_id(text: str) -> HubId:
    """``org/name[@revision]`` as a HubId, or a ModelLoadError saying what a Hub id looks like."""
    match = _ID.fullmatch(str(text).strip())
    if not match or "--" in match["repo"] or ".." in match["repo"] or ".." in (match["revision"] or "") \
            or (match["revision"] or "").endswith(("/", ".lock")):
        raise ModelLoadError(f"{str(text)[:200]!r} is not a Hub id: write org/name or org/name@revision")
    return HubId(match["repo"], match["revision"] or DEFAULT_REVISION)


def looks_like_hub_id(text: str) -> bool:
    """Whether ``text`` reads as a Hub id rather than a path: org/name[@rev], no existing file or folder of
    that name, not a file name (``models/x.gguf`` is a missing path, not a repo)."""
    text = str(text).strip()
    if text.startswith(("/", ".", "~")) or text.lower().endswith(_FILE_SUFFIXES):
        return False
    try:
        parse_hub_id(text)
    except ModelLoadError:
        return False
    try:
        return not Path(text).exists()
    except OSError:
        return True
