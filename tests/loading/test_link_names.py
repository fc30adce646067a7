"""The names a link gives a model in the zoo or the cache (``zoo:moe_top2``, ``cache:mine.gguf``): they do
not depend on where the checkout or the home lies, they lead back to the same model, an older link's
absolute path still opens, and no short form leads out of its directory."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf
from txviz.loading import load, sources
from txviz.loading.errors import ModelLoadError
from txviz.loading.sources import link_name, locate
from txviz.loading.zoo import SHIPPED_ZOO

pytestmark = pytest.mark.skipif(not (SHIPPED_ZOO / "base" / "config.json").is_file(), reason="the zoo is not shipped")


@pytest.fixture
def moved_zoo(tmp_path, monkeypatch):
    """The zoo of a checkout that lies elsewhere: the running txviz's zoo directory is a copy."""
    zoo = tmp_path / "another" / "checkout" / "assets" / "zoo"
    shutil.copytree(SHIPPED_ZOO / "base", zoo / "base")
    monkeypatch.setattr(sources, "SHIPPED_ZOO", zoo)
    return zoo


def test_a_zoo_model_is_named_by_its_short_form_and_the_form_leads_back_to_it():
    path = SHIPPED_ZOO / "moe_top2"
    assert link_name(str(path)) == "zoo:moe_top2"
    assert locate("zoo:moe_top2") == path.resolve()
    assert locate(str(path)) == path.resolve()  # an older link's absolute path still opens


def test_the_short_form_follows_the_checkout_wherever_it_lies(moved_zoo):
    found = locate("zoo:base")
    assert found == (moved_zoo / "base").resolve()
    assert link_name(str(moved_zoo / "base")) == "zoo:base"
    assert load(found).config.n_layers > 0
    with pytest.raises(ModelLoadError, match="outside the allowed"):  # the other checkout's zoo is no root now
        locate(str(SHIPPED_ZOO / "base"))


def test_a_model_in_the_cache_is_named_inside_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TXVIZ_HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "mine").mkdir(parents=True)
    config = tiny()
    model = write_gguf(tmp_path / "home" / "mine" / "tiny.gguf", config, weights_of(config))
    assert link_name(str(model)) == "cache:mine/tiny.gguf"
    assert locate("cache:mine/tiny.gguf") == model.resolve()


def test_other_names_are_kept_as_they_are(tmp_path, monkeypatch):
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))  # the operator's directories: no form means the same elsewhere
    config = tiny()
    model = write_gguf(tmp_path / "tiny.gguf", config, weights_of(config))
    for name in ("default", "gemma3-270m", "org/tiny@main", str(model), "relative/x.gguf", str(SHIPPED_ZOO)):
        assert link_name(name) == name
    assert locate(str(model)) == model.resolve()


@pytest.mark.parametrize("escape", ["zoo:../../etc", "zoo:../../../../../../etc/passwd", "zoo:base/../../..",
                                    "zoo:/etc/passwd", "zoo:..\\..\\etc", "zoo:", "zoo:..", "cache:../..",
                                    "cache:/etc/passwd", "zoo:base\x00"])
def test_a_short_form_never_leads_out_of_its_directory(escape):
    with pytest.raises(ModelLoadError):
        locate(escape)


def test_a_link_inside_the_zoo_that_leads_out_is_refused(moved_zoo):
    os.symlink("/etc", moved_zoo / "out")
    with pytest.raises(ModelLoadError, match="outside the allowed"):
        locate("zoo:out")
    (moved_zoo / "base" / "config.json").unlink()
    os.symlink("/etc/hostname", moved_zoo / "base" / "config.json")
    with pytest.raises(ModelLoadError, match="links outside"):
        locate("zoo:base")


def test_a_short_form_names_only_its_own_directory(moved_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("TXVIZ_HOME", str(tmp_path / "home"))  # an allowed root too, beside the zoo
    (tmp_path / "home").mkdir()
    config = tiny()
    model = write_gguf(tmp_path / "home" / "tiny.gguf", config, weights_of(config))
    assert locate("cache:tiny.gguf") == model.resolve()
    with pytest.raises(ModelLoadError, match="inside the zoo directory"):
        locate(f"zoo:{Path(os.path.relpath(model, moved_zoo)).as_posix()}")
