"""tests/helpers/chrome_profile.py: self time on the renderer main thread, grouped, from a Chrome trace
(a small synthetic one here; the tool runs on a real one in the lead's profiles, see BENCHMARKS.md)."""

from __future__ import annotations

import json

import pytest

from tests.helpers.chrome_profile import grouped, main_thread_cpu_ms, main_thread_self_ms


def _span(name, ts, dur, tid=1, url=None, tdur=None):
    event = {"ph": "X", "name": name, "pid": 7, "tid": tid, "ts": ts, "dur": dur}
    if tdur is not None:
        event["tdur"] = tdur
    if url:
        event["args"] = {"data": {"url": url}}
    return event


def test_self_time_subtracts_nested_events_and_ignores_other_threads(tmp_path):
    events = [{"ph": "M", "name": "thread_name", "pid": 7, "tid": 1, "args": {"name": "CrRendererMain"}},
              {"ph": "M", "name": "thread_name", "pid": 7, "tid": 2, "args": {"name": "Compositor"}},
              _span("RunTask", 0, 10_000),  # 10 ms, holding 6 ms of React and 1 ms of layout inside it
              _span("FunctionCall", 1_000, 6_000, url="http://x/static/js/react-dom.Abc.js"),
              _span("Layout", 2_000, 1_000),  # nested in the React call
              _span("Paint", 12_000, 2_000),  # after the task
              _span("PaintArtifactCompositor::Update", 0, 50_000, tid=2)]  # another thread: not counted
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    self_ms = main_thread_self_ms(str(path))
    assert self_ms["RunTask"] == pytest.approx(4.0) and self_ms["JS react-dom"] == pytest.approx(5.0)
    assert self_ms["Layout"] == pytest.approx(1.0) and self_ms["Paint"] == pytest.approx(2.0)
    groups = grouped(self_ms)
    assert groups["React (react-dom)"] == pytest.approx(5.0) and groups["style and layout"] == pytest.approx(1.0)
    assert sum(groups.values()) == pytest.approx(12.0)  # the main thread's busy time, nothing counted twice
    assert "compositing" not in groups


def test_cpu_time_counts_each_outermost_event_once_on_the_main_thread(tmp_path):
    """A task that waited for a core: 10 ms of wall time, 3 ms of CPU; the nested call's CPU is inside it."""
    events = [{"ph": "M", "name": "thread_name", "pid": 7, "tid": 1, "args": {"name": "CrRendererMain"}},
              {"ph": "M", "name": "thread_name", "pid": 7, "tid": 2, "args": {"name": "Compositor"}},
              _span("RunTask", 0, 10_000, tdur=3_000),
              _span("FunctionCall", 1_000, 6_000, url="http://x/react-dom.Abc.js", tdur=2_000),  # nested
              _span("Paint", 12_000, 2_000, tdur=1_500),
              _span("PaintArtifactCompositor::Update", 0, 50_000, tid=2, tdur=40_000)]  # another thread
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert main_thread_cpu_ms(str(path)) == pytest.approx(4.5)
