"""``txviz bench`` on a model it cannot load (issue 17 §7): a missing path or a broken file is one line
``txviz: error: …`` and exit status 2, never a worker's traceback wrapped in a RuntimeError."""

from __future__ import annotations

import pytest

from txviz.cli import main


def test_a_missing_model_is_one_line_and_exit_2(capsys):
    assert main(["bench", "--model", "/nonexistent/x.gguf", "--tokens", "8"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "txviz: error: no such file or directory: /nonexistent/x.gguf"


@pytest.mark.parametrize("as_json", [False, True])
def test_a_broken_file_is_refused_by_the_worker_in_one_line(tmp_path, capsys, as_json):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + b"\xff" * 40)  # counts far past the file's end
    code = main(["bench", "--model", str(broken), "--tokens", "8", "--repeats", "1", "--no-hf"]
                + (["--json"] if as_json else []))
    out, err = capsys.readouterr()
    assert code == 2
    assert "Traceback" not in out + err and "RuntimeError" not in out + err
    text = out if as_json else err.strip().splitlines()[-1]
    assert "broken.gguf" in text and ("txviz: error:" in text or '"type": "ModelLoadError"' in text)
