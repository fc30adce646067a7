"""The hostile-input measurement script (tests/helpers/hostile_bench.py) keeps working: one generated hostile
file and one bad command line go through its per-case runner, which reports the user's line, no
traceback and a small peak; a deliberate traceback is seen as one."""

from __future__ import annotations

from tests.helpers import hostile_bench
from tests.helpers.hostile_gguf import patch_after, tiny_gguf


def test_the_runner_reports_a_refused_file_and_a_missing_model(tmp_path):
    path = patch_after(tiny_gguf(tmp_path / "c1.gguf"), b"test.items", "<Q", 2 ** 62, 8)
    refused = hostile_bench.run_one(["info", "--model", str(path)])
    assert refused["status"] == 2 and not refused["traceback"]
    assert refused["last_line"].startswith("txviz: error:") and "not a readable GGUF file" in refused["last_line"]
    assert 0 <= refused["extra_rss_mb"] < 500 and refused["seconds"] < 30
    missing = hostile_bench.run_one(["bench", "--model", "/nonexistent/x.gguf"])
    assert missing["status"] == 2 and missing["last_line"] == "txviz: error: no such file or directory: /nonexistent/x.gguf"


def test_the_runner_sees_a_traceback(monkeypatch):
    import txviz.cli

    def crash(argv):
        raise RuntimeError("boom")

    monkeypatch.setattr(txviz.cli, "main", crash)
    row = hostile_bench.run_one(["info"])
    assert row["traceback"] and row["status"] == "uncaught" and "RuntimeError: boom" in row["last_line"]
