"""What bounds the Attention page's new-prompt time (its target: a new 64-token prompt, every figure
painted, ≤ 0.7 s): the page against its floor, side by side in one chromium.

    python -m tests.helpers.bench_floor [--repeats 5] [--levels sidebar trace chart]

The floor is ``tests/helpers/floor_app`` served by Streamlit at three levels (its docstring): the app's
sidebar alone, with the page's trace and head table, and with the page's one plotly chart. Each level and
the real page get a server of their own; the rounds alternate between them, so a busy machine slows all
alike. Per level: the median wall time from Ctrl+Enter to every figure painted (the same wait for all: the
``heatmap`` container's text changed, every rerun answered, every plotly chart holding the new prompt's
data, the page's components repainted, then two animation frames), and the renderer main thread's CPU
time per prompt from a Chrome trace of that one prompt (it barely moves with load; chrome_profile.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from tests.helpers import bench_app
from tests.helpers.chrome_profile import main_thread_cpu_ms

FLOOR_ROOT = Path(__file__).resolve().parent / "floor_app"
LEVELS = ("sidebar", "trace", "chart")
PAGE = "page"  # the real Attention page
FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"


def new_prompt(page, prompt: str) -> float:
    """Seconds from Ctrl+Enter in the prompt box to every figure of the new prompt painted."""
    from tests.helpers.browser import POLL_MS

    box = page.locator(".st-key-prompt textarea")
    box.fill(prompt)
    before = bench_app.mark_drawn(page)
    started = time.perf_counter()
    box.press("Control+Enter")
    bench_app.wait_drawn(page, before, polling=POLL_MS)  # polled: the renderer's CPU is measured
    page.evaluate(FRAMES)
    return time.perf_counter() - started


def _open(stack: ExitStack, browser, level: str):
    from tests.helpers.browser import streamlit_server, track_reruns, wait_idle

    if level == PAGE:
        url = stack.enter_context(streamlit_server())
    else:
        url = stack.enter_context(streamlit_server(env={"TXVIZ_FLOOR": level}, app_root=FLOOR_ROOT))
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    track_reruns(context)
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector(".st-key-heatmap", timeout=300_000)
    wait_idle(page, timeout_ms=300_000)
    return page


def run(repeats: int, levels: tuple[str, ...]) -> dict:
    from tests.helpers.browser import chromium_browser

    names = (*levels, PAGE)
    prompts = bench_app.prompts_of(64, repeats + 1)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    cpu_ms: dict[str, list[float]] = {name: [] for name in names}
    load = [os.getloadavg()[0]]
    with ExitStack() as stack, tempfile.TemporaryDirectory() as scratch:
        browser = stack.enter_context(chromium_browser())
        pages = {name: _open(stack, browser, name) for name in names}
        for name in names:  # warm: every element's code loaded once
            new_prompt(pages[name], prompts[0])
        for round_, prompt in enumerate(prompts[1:]):
            for name in names[round_ % len(names):] + names[:round_ % len(names)]:  # rotate: no fixed position
                trace = os.path.join(scratch, f"{name}-{round_}.json")
                browser.start_tracing(page=pages[name], path=trace, categories=[
                    "devtools.timeline", "disabled-by-default-devtools.timeline", "v8.execute", "blink"])
                seconds[name].append(new_prompt(pages[name], prompt))
                browser.stop_tracing()
                cpu_ms[name].append(main_thread_cpu_ms(trace))
    load.append(os.getloadavg()[0])
    return {"new_prompt_s": {n: round(statistics.median(s), 3) for n, s in seconds.items()},
            "renderer_main_cpu_ms": {n: round(statistics.median(c), 1) for n, c in cpu_ms.items()},
            "samples_s": {n: [round(x, 3) for x in s] for n, s in seconds.items()},
            "repeats": repeats, "load_average": load}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.helpers.bench_floor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--levels", nargs="+", choices=LEVELS, default=list(LEVELS))
    args = parser.parse_args(argv)
    result = run(args.repeats, tuple(args.levels))
    print(json.dumps(result, indent=1))
    for name, s in result["new_prompt_s"].items():
        print(f"{name:>8}: new 64-token prompt {s:.3f} s, renderer main thread {result['renderer_main_cpu_ms'][name]:.0f} ms CPU")
    print(f"load average {result['load_average'][0]:.1f} → {result['load_average'][1]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
