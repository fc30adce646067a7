"""Where chromium's time goes when the Attention page takes a new prompt: a Chrome trace of a few new
64-token prompts, its renderer main thread's self time grouped by what ran (React, other JavaScript,
style and layout, paint, compositing, canvas), per prompt. The profile behind a missed browser target
(``python -m tests.helpers.bench_app`` says met or missed; this says what bounds it).

    python -m tests.helpers.chrome_profile --prompts 3 [--trace /tmp/trace.json]

Self time: each event's duration less that of the events nested in it on the same thread, so the
groups add up to the time the main thread was busy. That is wall time: under load it grows with the
time the thread waited for a core (busy 4.2 s per prompt at load 12, against 1.0 s quiet). The main
thread's CPU time (``main_thread_cpu_ms``: the thread time, ``tdur``, of its outermost events) barely
moves with load (0.92 s at load 12; 0.78 s at load 7): compare two apps by it when the machine is busy.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import tempfile

GROUPS = (  # (group, a test on the event's label), first match wins
    ("React (react-dom)", lambda label: label == "JS react-dom"),
    ("other JavaScript", lambda label: label.startswith("JS ") or label in ("RunMicrotasks", "V8.BytecodeBudgetInterrupt",
                                                                            "V8.HandleInterrupts", "EvaluateScript")),
    ("style and layout", lambda label: any(w in label for w in ("Style", "style", "Layout", "layout"))),
    ("paint", lambda label: "Paint" in label and "Compositor" not in label and "Artifact" not in label),
    ("compositing", lambda label: any(w in label for w in ("Compositor", "Commit", "Layerize", "Artifact"))),
    ("canvas", lambda label: "Canvas" in label),
    ("garbage collection", lambda label: "GC" in label or "marking" in label),
)


def _main_thread_spans(trace_path: str) -> list[dict]:
    """The complete events of a Chrome trace's renderer main thread(s), by thread, start, and outer first."""
    with open(trace_path) as handle:
        events = json.load(handle)
    events = events["traceEvents"] if isinstance(events, dict) else events
    main = {(e["pid"], e["tid"]) for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"
            and e["args"].get("name") == "CrRendererMain"}
    return sorted((e for e in events if (e.get("pid"), e.get("tid")) in main and e.get("ph") == "X" and "dur" in e),
                  key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"]))


def main_thread_self_ms(trace_path: str) -> collections.Counter:
    """Self time (ms) per event label on the renderer main thread(s) of a Chrome trace."""
    spans = _main_thread_spans(trace_path)
    self_ms, open_spans = collections.Counter(), []
    for event in spans:
        while open_spans and (open_spans[-1][1] <= event["ts"] or open_spans[-1][2] != (event["pid"], event["tid"])):
            open_spans.pop()
        label = _label(event)
        if open_spans:
            self_ms[open_spans[-1][0]] -= event["dur"] / 1000
        self_ms[label] += event["dur"] / 1000
        open_spans.append((label, event["ts"] + event["dur"], (event["pid"], event["tid"])))
    return self_ms


def main_thread_cpu_ms(trace_path: str) -> float:
    """CPU ms of the renderer main thread(s): the thread time (``tdur``) of each outermost event."""
    spans = _main_thread_spans(trace_path)
    total, ends = 0.0, {}
    for event in spans:
        thread = (event["pid"], event["tid"])
        if event["ts"] >= ends.get(thread, float("-inf")):  # not nested in the event before
            total += event.get("tdur", 0) / 1000
            ends[thread] = event["ts"] + event["dur"]
    return total


def _label(event: dict) -> str:
    if event["name"] != "FunctionCall":
        return event["name"]
    url = event.get("args", {}).get("data", {}).get("url", "")
    return "JS " + (url.rsplit("/", 1)[-1].split(".")[0] if url else "(anonymous)")


def grouped(self_ms: collections.Counter) -> dict[str, float]:
    out = collections.Counter()
    for label, ms in self_ms.items():
        group = next((name for name, test in GROUPS if test(label)), "other (task scheduling, messages, ...)")
        out[group] += ms
    return dict(out.most_common())


def profile(n_prompts: int, trace_path: str) -> dict:
    from tests.helpers import bench_app
    from tests.helpers.browser import CHART, chromium_browser, streamlit_server, wait_idle

    prompts = bench_app.prompts_of(64, n_prompts + 1)
    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.add_init_script(bench_app.OPEN_WATCH)
        with streamlit_server() as url:
            page.goto(url)
            page.wait_for_selector(f".st-key-heatmap {CHART}", timeout=300_000)
            wait_idle(page)
            n_figures = page.locator(bench_app.FIGURE).count()
            bench_app._new_prompt(page, prompts[0], n_figures)  # warm: every element's code loaded once
            browser.start_tracing(page=page, path=trace_path, categories=[
                "devtools.timeline", "disabled-by-default-devtools.timeline", "v8.execute", "blink"])
            seconds = [bench_app._new_prompt(page, prompt, n_figures) for prompt in prompts[1:]]
            browser.stop_tracing()
    per_prompt = {group: round(ms / n_prompts, 1) for group, ms in grouped(main_thread_self_ms(trace_path)).items()}
    return {"new_prompt_s": [round(s, 3) for s in seconds], "main_thread_ms_per_prompt": per_prompt,
            "main_thread_cpu_ms_per_prompt": round(main_thread_cpu_ms(trace_path) / n_prompts, 1),
            "load_average": list(os.getloadavg())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--trace", default=None, help="keep the Chrome trace here (default: a temporary file)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        result = profile(args.prompts, args.trace or os.path.join(scratch, "trace.json"))
    print(json.dumps(result, indent=1))
    busy = sum(result["main_thread_ms_per_prompt"].values())
    print(f"renderer main thread busy {busy:.0f} ms ({result['main_thread_cpu_ms_per_prompt']:.0f} ms of CPU) per new prompt (median new prompt "
          f"{sorted(result['new_prompt_s'])[len(result['new_prompt_s']) // 2]:.3f} s, load {result['load_average'][0]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
