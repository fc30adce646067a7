"""An isolated worker's wall-clock limit is for its work on the input, not for starting an interpreter
(txviz/loading/isolated.py): the clock starts at the child's READY byte. A child made slow to start
(a sleep before the worker script runs) still answers within a limit shorter than its start; a child
that never gets ready is stopped after STARTUP_SECONDS with a reason that says so."""

from __future__ import annotations

import subprocess

import pytest

from txviz.loading import isolated

TOKENIZER = ('{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,'
             '"pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":null,'
             '"model":{"type":"WordLevel","vocab":{"a":0,"b":1,"[UNK]":2},"unk_token":"[UNK]"}}')


def slow_start(monkeypatch, seconds: float) -> None:
    """Every worker child sleeps ``seconds`` before its script runs, as a loaded machine delays a start."""
    real = subprocess.Popen

    def popen(args, **kwargs):
        executable, flag, script = args
        code = (f"import runpy, sys, time; time.sleep({seconds}); sys.argv = [{script!r}]; "
                f"runpy.run_path({script!r}, run_name='__main__')")
        return real([executable, flag, "-c", code], **kwargs)

    monkeypatch.setattr(isolated.subprocess, "Popen", popen)


def test_a_slow_start_does_not_count_against_the_limit(monkeypatch):
    slow_start(monkeypatch, 1.0)
    reply = isolated.run_worker("tokenize", {"tokenizer": TOKENIZER, "text": "a b c"}, isolated.Limits(seconds=0.5))
    assert reply["ids"] == [0, 1, 2]


def test_a_child_that_never_gets_ready_is_stopped_with_its_reason(monkeypatch):
    slow_start(monkeypatch, 30.0)
    monkeypatch.setattr(isolated, "STARTUP_SECONDS", 0.5)
    with pytest.raises(isolated.IsolatedError, match="did not start within 0.5 s") as caught:
        isolated.run_worker("tokenize", {"tokenizer": TOKENIZER, "text": "a"}, isolated.Limits(seconds=5))
    assert caught.value.kind == "timeout"
