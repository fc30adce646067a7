"""How long the Decoding page's step viewer takes in chromium from the reader's input to the chart's
change painted: a click on a generated token's pill (a scrub) and a change of the layer or head.

It starts the app on its own port (or uses ``--url``), opens the Decoding page with the bench's
prompt (the shipped text's first 64 tokens, as ``txviz bench --decoding`` uses), chat off, greedy,
48 new tokens, generates once, then times each input in the page itself: the input event's own time
stamp (``event.timeStamp``, captured on the document) to the first frame after the chart's SVG changed
(a MutationObserver, then requestAnimationFrame and a task after it). Between inputs it waits for the
page to be idle (the viewer sends the step back once the reader stops, and the page's server parts
follow it), so each input starts from a quiet page. It also counts the websocket frames the browser
sent between an input and its paint (0: the charts did not wait for the server) and the bytes the
server sent on the rerun that follows (the run's records are not sent again).

    python -m tests.helpers.decoding_scrub_latency [--model default|gemma3-270m] [--zoo moe_top2] [--scrubs 12]
        [--changes 12] [--screenshots DIR] [--url http://127.0.0.1:PORT]

Prints the median and min-max of each kind with ``uptime``'s load and the machine."""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import time
from contextlib import nullcontext
from pathlib import Path
from urllib.parse import urlencode

from tests.helpers.browser import CHROMIUM, CHROMIUM_ARGS, CONTEXT_OPTIONS, ERROR, IDLE, streamlit_server

PROMPT_TOKENS, NEW_TOKENS = 64, 48
PROBE = """() => {
  const probe = window.__scrubProbe = { start: null, end: null, sent: 0 };
  for (const type of ["pointerdown", "keydown", "input", "change"]) {
    document.addEventListener(type, (event) => { if (probe.start === null) probe.start = event.timeStamp; }, true);
  }
  const done = () => requestAnimationFrame(() => setTimeout(() => { if (probe.end === null) probe.end = performance.now(); }, 0));
  const watch = new MutationObserver(() => { if (probe.start !== null && probe.end === null) done(); });
  document.querySelectorAll('.txviz-dec-steps svg.dec-sampler, .txviz-dec-steps svg.dec-row')
    .forEach((svg) => watch.observe(svg, { childList: true, attributes: true }));
}"""


def bench_prompt(model: str) -> str:
    """The shipped text's first 64 tokens as text (what the bench's worker feeds the model)."""
    from txviz.analysis.texts import read_text
    from txviz.loading import load

    tokenizer = load(model).tokenizer
    ids = tokenizer.encode(read_text(), bos="none").ids[:PROMPT_TOKENS]
    return tokenizer.decode(list(ids))


def load_line() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min); {platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def measure(page, act, sent_frames: list) -> tuple[float, int]:
    page.evaluate(PROBE)
    before = len(sent_frames)
    act()
    page.wait_for_function("() => window.__scrubProbe.end !== null", timeout=30_000, polling="raf")
    elapsed, = page.evaluate("() => [window.__scrubProbe.end - window.__scrubProbe.start]"),
    frames = len(sent_frames) - before  # frames the browser sent before the paint (the pick comes later)
    return float(elapsed[0]), frames


def wait_quiet(page) -> None:
    page.wait_for_timeout(400)  # the viewer sends the step once the reader has stopped (250 ms)
    page.wait_for_selector(IDLE, timeout=120_000)


def run(url: str, model: str, scrubs: int, changes: int, shots: Path | None, prompt: str | None = None,
        sampler: dict | None = None) -> dict:
    from playwright.sync_api import sync_playwright

    prompt = prompt or bench_prompt(model)
    query = urlencode({"model": model, "prompt": prompt, "bos": "none", "dec_chat": "0", "dec_new": NEW_TOKENS,
                       "dec_sampler": "greedy", **(sampler or {})})
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(**CONTEXT_OPTIONS)
        sent_frames, received = [], []

        def on_socket(socket):
            socket.on("framesent", lambda payload: sent_frames.append(len(payload)))
            socket.on("framereceived", lambda payload: received.append((time.perf_counter(), len(payload))))

        page.on("websocket", on_socket)
        page.goto(f"{url}/decoding?{query}")
        page.wait_for_selector(".st-key-dec_generate button", timeout=300_000)
        page.wait_for_selector(IDLE, timeout=120_000)
        page.locator(".st-key-dec_generate button").first.click()
        page.wait_for_selector(f".txviz-dec-steps[data-painted], {ERROR}", timeout=300_000)
        wait_quiet(page)
        if page.locator(ERROR).count():
            raise SystemExit(f"the page shows an error: {page.locator(ERROR).first.inner_text()}")
        pills = page.locator(".txviz-dec-steps .dec-pill")
        n = pills.count()
        rng = random.Random(0)
        scrub_ms, scrub_frames, rerun_bytes = [], [], []
        step = int(page.locator(".txviz-dec-steps").get_attribute("data-step"))
        for _ in range(scrubs):
            step = rng.choice([s for s in range(n) if s != step])
            ms, frames = measure(page, lambda: pills.nth(step).click(), sent_frames)
            shown = page.locator(".txviz-dec-steps svg.dec-sampler").get_attribute("data-step")
            assert shown == str(step), (shown, step)
            mark = len(received)
            wait_quiet(page)
            rerun_bytes.append(sum(size for _, size in received[mark:]))
            scrub_ms.append(ms)
            scrub_frames.append(frames)
        if shots:
            name = model.replace(":", "_").replace("/", "_")
            page.locator(".txviz-dec-steps").screenshot(path=str(shots / f"decoding-viewer-{name}.png"))
        layer_select, head_select = page.locator(".txviz-dec-steps .dec-layer"), page.locator(".txviz-dec-steps .dec-head")
        n_layers, n_heads = layer_select.locator("option").count(), head_select.locator("option").count()
        change_ms, change_frames = [], []
        for i in range(changes):
            select, count = (layer_select, n_layers) if i % 2 == 0 else (head_select, n_heads)
            current = int(select.input_value())
            value = rng.choice([v for v in range(count) if v != current] or [current])
            ms, frames = measure(page, lambda: select.select_option(str(value)), sent_frames)
            row = page.locator(".txviz-dec-steps svg.dec-row")
            assert row.get_attribute("data-layer" if i % 2 == 0 else "data-head") == str(value)
            wait_quiet(page)
            change_ms.append(ms)
            change_frames.append(frames)
        if page.locator(ERROR).count():
            raise SystemExit(f"the page shows an error: {page.locator(ERROR).first.inner_text()}")
        browser.close()
    return {"scrub_ms": scrub_ms, "scrub_frames": scrub_frames, "change_ms": change_ms, "change_frames": change_frames,
            "rerun_bytes": rerun_bytes, "steps": n}


def summary(name: str, values: list[float]) -> str:
    return f"{name}: median {statistics.median(values):.0f} ms ({min(values):.0f}-{max(values):.0f}), n={len(values)}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--scrubs", type=int, default=12)
    parser.add_argument("--changes", type=int, default=12)
    parser.add_argument("--url", help="a running app (else one is started on a free port)")
    parser.add_argument("--screenshots", type=Path)
    parser.add_argument("--zoo", help="a zoo model's name (assets/zoo/NAME): its own stories as the prompt, sampled")
    args = parser.parse_args(argv)
    if args.screenshots:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    before = load_line()
    with (nullcontext(args.url) if args.url else streamlit_server(env={**os.environ})) as url:
        if args.zoo:
            from txviz.lab.corpus import sample_text
            from txviz.loading.zoo import SHIPPED_ZOO

            args.model = str(SHIPPED_ZOO / args.zoo)
            result = run(url, args.model, args.scrubs, args.changes, args.screenshots, prompt=sample_text(3),
                         sampler={"dec_sampler": "sample", "dec_temp": "1.2", "dec_top_k": "8", "dec_seed": "1"})
        else:
            result = run(url, args.model, args.scrubs, args.changes, args.screenshots)
    how = "a zoo story as the prompt, sampled" if args.zoo else f"{PROMPT_TOKENS}-token prompt, greedy"
    print(f"Decoding step viewer in chromium, {args.model}, {how}, {NEW_TOKENS} new tokens "
          f"({result['steps']} generated), chat off")
    print(summary("scrub (a token's pill clicked -> the step's charts painted)", result["scrub_ms"]))
    print(summary("layer/head change (select -> the row's chart painted)", result["change_ms"]))
    print(f"websocket frames the browser sent before each paint: scrubs {max(result['scrub_frames'])} at most, "
          f"changes {max(result['change_frames'])} at most")
    print(f"bytes the server sent on the rerun after each scrub: median {statistics.median(result['rerun_bytes']):,.0f}, "
          f"largest {max(result['rerun_bytes']):,}")
    print(f"before: {before}; after: {load_line()}")


if __name__ == "__main__":
    main()
