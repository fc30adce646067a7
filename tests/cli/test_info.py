"""``txviz info`` names the model as a person knows it: a known model by its own name (not the GGUF's
training-run label), any other by its file or directory name, as the app's sidebar does."""

from __future__ import annotations

import json
import shutil

import pytest

from txviz.cli import main
from txviz.loading.zoo import SHIPPED_ZOO


def info(capsys, *argv) -> dict:
    assert main(["info", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_directory_is_named_by_its_folder(tmp_path, capsys, monkeypatch):
    shutil.copytree(SHIPPED_ZOO / "base", tmp_path / "my base model")
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    assert info(capsys, "--model", str(tmp_path / "my base model"))["name"] == "my base model"


@pytest.mark.default_model
def test_the_default_model_is_named_by_its_own_name_not_the_gguf_label(default_model_home, capsys, monkeypatch):
    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    out = info(capsys)
    assert out["name"] == "SmolLM2-135M-Instruct" and out["config"]["name"] != out["name"]
