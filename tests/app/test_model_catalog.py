"""The sidebar's model catalog (app/services/models.py): the known models first, then the models found in
the allowed directories, a zoo variant by its description and its short form; the description is kept by
app/cache.py per version of the variant's config.json."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st

from app import cache
from app.services import models
from app.services.zoo import zoo_path


@pytest.fixture(autouse=True)
def fresh_caches():
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


def test_the_catalog_offers_the_known_models_then_each_zoo_variant_by_its_description():
    asked = []

    def describe_dir(path: str, version: int) -> str:
        asked.append((path, version))
        return f"described: {Path(path).name}"

    options, broken = models.model_options(describe_dir)
    known = models.known_options()
    assert list(options)[:len(known)] == list(known) and not broken
    base = zoo_path("base_long")
    assert options["described: base_long"] == "zoo:base_long"  # what a link names, wherever the checkout lies
    assert (base, (Path(base) / "config.json").stat().st_mtime_ns) in asked


def test_a_zoo_description_is_kept_per_version_of_its_config(monkeypatch):
    variant = zoo_path("base_long")
    calls = []
    monkeypatch.setattr(models, "describe_zoo", lambda path: calls.append(path) or f"v{len(calls)}")
    first = cache.zoo_description(str(variant), 1)
    assert cache.zoo_description(str(variant), 1) == first and len(calls) == 1  # kept
    assert cache.zoo_description(str(variant), 2) == "v2"  # a new version of config.json: described again
