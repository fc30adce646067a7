"""Streamlit's scan of the installed packages for component manifests, done once per test process.

Each ``AppTest`` instance starts a ``BidiComponentManager`` that reads the metadata of every installed
distribution (``streamlit.components.v2.manifest_scanner.scan_component_manifests``): measured
2026-12-01, 0.1–0.2 CPU s per AppTest and about a quarter of the CPU of the AppTest page files. The
installed packages do not change during a test session, and this app declares its component inline
(app/components/head_maps), not in a manifest: one scan per process gives every AppTest the same list."""

from __future__ import annotations

import sys
from functools import wraps

_SCANNER = "streamlit.components.v2.manifest_scanner"


def scan_once() -> None:
    """Memoize the scan, once streamlit is imported (a test process that never imports it pays nothing)."""
    if "streamlit" not in sys.modules:
        return
    import importlib

    try:  # a Streamlit without this module or name scans as it does: slower, nothing else changes
        scanner = importlib.import_module(_SCANNER)
        scan = scanner.scan_component_manifests
    except (ImportError, AttributeError):
        return
    if getattr(scan, "scanned_once", False):
        return
    found: list = []

    @wraps(scan)
    def scanned(max_workers=None):
        if not found:
            found.append(scan(max_workers))
        return list(found[0])

    scanned.scanned_once = True
    scanner.scan_component_manifests = scanned
