"""Isolated workers are bounded per process, not per call (txviz/loading/worker_gate.py): hostile encodes
started at once by many sessions run a few at a time, and the address space their children may take adds
up to the process's budget, however many ask."""

from __future__ import annotations

import threading
import time

import psutil
import pytest

from txviz.loading import isolated, worker_gate
from txviz.loading.worker_gate import GateBusy, WorkerGate

MIB = 1 << 20
# a Split with a catastrophic regex: each "a" * 22 + "b" is just under onig's retry limit, so the text keeps
# a child busy until its wall-clock limit stops it
HOSTILE = ('{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,'
           '"pre_tokenizer":{"type":"Split","pattern":{"Regex":"(a+)+c"},"behavior":"Isolated","invert":false},'
           '"post_processor":null,"decoder":null,'
           '"model":{"type":"WordLevel","vocab":{"a":0,"b":1,"[UNK]":2},"unk_token":"[UNK]"}}')
WORST = ("a" * 22 + "b") * 2000


def _children() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children():
        try:
            if any("workers/tokenize.py" in part for part in child.cmdline()):
                found.append(child)
        except psutil.Error:
            pass
    return found


def _address_space_limit(child: psutil.Process) -> int | None:
    try:
        soft, _ = child.rlimit(psutil.RLIMIT_AS)
        return soft
    except psutil.Error:
        return None


def _hostile_encodes_at_once(n: int, memory_bytes: int) -> tuple[int, dict[int, int], list[str]]:
    """Start ``n`` hostile encodes at once; (most children alive at one time, each child's address-space
    limit by pid, the kinds of error each ended with)."""
    kinds: list[str] = []

    def encode() -> None:
        try:
            isolated.run_worker("tokenize", {"tokenizer": HOSTILE, "text": WORST},
                                isolated.Limits(seconds=0.6, memory_bytes=memory_bytes))
        except isolated.IsolatedError as error:
            kinds.append(error.kind)

    threads = [threading.Thread(target=encode) for _ in range(n)]
    for thread in threads:
        thread.start()
    most, limits = 0, {}
    while any(thread.is_alive() for thread in threads):
        alive = _children()
        most = max(most, len(alive))
        for child in alive:
            limit = _address_space_limit(child)
            if limit not in (None, psutil.RLIM_INFINITY):
                limits[child.pid] = limit
        time.sleep(0.02)
    for thread in threads:
        thread.join()
    return most, limits, kinds


@pytest.fixture
def gate(monkeypatch):
    """The process's gate, built from the settings this test gives (and forgotten after it)."""
    monkeypatch.setenv("TXVIZ_WORKERS", "2")
    monkeypatch.setenv("TXVIZ_WORKERS_MEMORY", "600MiB")
    worker_gate.process_gate.cache_clear()
    yield worker_gate.process_gate()
    worker_gate.process_gate.cache_clear()


def test_hostile_encodes_from_many_sessions_run_within_the_process_budget(gate):
    most, limits, kinds = _hostile_encodes_at_once(4, 256 * MIB)
    assert kinds == ["timeout"] * 4  # each still ends in its own one-line reason
    assert 1 <= most <= gate.slots  # two at a time: 256 MiB each fits twice in 600 MiB
    # each child capped its address space at its own mapping + the granted 256 MiB (not more)
    assert limits and all(limit <= 256 * MIB + 200 * MIB for limit in limits.values()), limits


def test_a_worker_that_asks_for_more_than_half_the_budget_runs_alone(gate):
    most, limits, kinds = _hostile_encodes_at_once(3, 400 * MIB)
    assert kinds == ["timeout"] * 3
    assert most == 1  # two would take 800 MiB of the 600


def test_a_worker_that_asks_for_more_than_the_budget_gets_the_budget():
    gate = WorkerGate(slots=2, memory_bytes=100 * MIB)
    with gate.hold(1 << 30, wait_seconds=1) as granted:
        assert granted == 100 * MIB
        assert gate.memory_in_use == 100 * MIB
    assert gate.memory_in_use == 0 and gate.running == 0


def test_a_request_waits_for_a_slot_and_is_refused_past_its_bound():
    gate = WorkerGate(slots=1, memory_bytes=100 * MIB)
    with gate.hold(MIB, wait_seconds=1):
        started = time.monotonic()
        with pytest.raises(GateBusy, match="at most 1"):
            with gate.hold(MIB, wait_seconds=0.2):
                pass
        assert time.monotonic() - started >= 0.2
    with gate.hold(MIB, wait_seconds=0.2) as granted:  # freed: the next one runs at once
        assert granted == MIB


def test_a_slot_freed_by_a_failed_worker_is_given_back(gate, monkeypatch):
    monkeypatch.setattr(isolated, "_run", lambda *args: (_ for _ in ()).throw(isolated.IsolatedError("crash", "x")))
    for _ in range(5):  # more than the slots: each failure gave its slot back
        with pytest.raises(isolated.IsolatedError):
            isolated.run_worker("tokenize", {"tokenizer": HOSTILE, "text": "a"})
    assert gate.running == 0 and gate.memory_in_use == 0


def test_bad_settings_say_which():
    with pytest.raises(ValueError, match="at least|slot"):
        WorkerGate(0, MIB)
