"""The README's model section names exactly the families the code runs and sizes: the safetensors families
(txviz.loading.hf's registry), the GGUF architectures (txviz.loading.gguf) and the families only the
calculator reads (txviz.geometry's known families that do not run)."""

from __future__ import annotations

import re
from pathlib import Path

from txviz.geometry import KNOWN_TYPES
from txviz.loading.gguf.loader import SUPPORTED_ARCHITECTURES
from txviz.loading.hf.config import SUPPORTED

README = Path(__file__).resolve().parents[1] / "README.md"


def _bullet(section: str, label: str) -> str:
    start = section.index(f"- **{label}**")
    end = section.find("\n- **", start + 1)
    return section[start:end if end >= 0 else None]


def _names(text: str) -> set[str]:
    return set(re.findall(r"`([a-z0-9_]+)`", text))


def models_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Models: what runs")
    return text[start:text.index("\n## ", start + 1)]


def test_what_runs_is_what_the_loaders_register():
    runs = _bullet(models_section(), "Runs")
    safetensors, gguf = runs.split("GGUF files", 1)
    assert _names(safetensors) - {"model_type"} == set(SUPPORTED)
    assert _names(gguf) == set(SUPPORTED_ARCHITECTURES)


def test_what_is_only_sized_is_what_the_calculator_reads_and_nothing_runs():
    sized = _names(_bullet(models_section(), "Only sized")) - {"txviz", "config"}
    assert not sized & set(SUPPORTED)
    assert set(KNOWN_TYPES) - set(SUPPORTED) <= sized


def test_the_section_points_at_the_download_settings():
    where = _bullet(models_section(), "Where they come from")
    assert {"TXVIZ_HUB", "TXVIZ_HUB_MAX_DOWNLOAD", "TXVIZ_HUB_MAX_MEMORY"} <= set(re.findall(r"`(TXVIZ_\w+)`", where))
    assert "(#configuration)" in where
