"""How soon the Decoding page shows what a click on Generate asked for, in headless chromium: the time from
the click to the first generated token painted, and to the 48th token shown, on SmolLM2 (the default model)
with the 64-token prompt of ``txviz bench --decoding`` (the shipped text's first 64 tokens, nothing before
them), the chat template off, greedy.

    python -m tests.helpers.decoding_first_token --port 8622 [--rounds 5] [--before DIR]

starts ``streamlit run app/main.py`` of this tree on ``--port`` (and of ``--before``, another checkout of the
app, on a free port), warms each server with one round that is not counted, then times ``--rounds``
rounds on each, alternating between the trees so that load that comes and goes falls on both alike. Each
round is a fresh page (a new browser context: a new session, no run kept). The times are read inside the
page, on its own clock: the click's event, the moment the token strip enters the page, the next frame after
it (painted), and the caption that says the 48th token has arrived. The load average and the machine are
printed beside the figures: the page shares the cores with the server and whatever else runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
from pathlib import Path
from urllib.parse import urlencode

from tests.helpers.browser import CHROMIUM, CHROMIUM_ARGS, CONTEXT_OPTIONS, ERROR, ROOT, track_reruns, wait_idle, \
    streamlit_server

PROMPT_TOKENS = 64
NEW_TOKENS = 48
GENERATE = ".st-key-dec_generate button"
SETTLE_MS = 1000  # after the page is idle and before the click: a reader looks at the page first
# Stamps, on the page's clock (performance.now(), ms): the click on Generate, the first token's strip in the
# DOM, the frame after it (a timeout queued from the next animation frame runs once that frame is painted),
# and the caption that counts the last token. A MutationObserver sees each change as it lands, so the probe
# itself polls rarely and takes no CPU from the page it measures.
STAMPS = r"""(() => {
  const stamps = window.__decodingStamps = {click: null, strip: null, painted: null, last: null};
  const lastToken = new RegExp(`token %(n)d of|%(n)d tokens generated`);
  document.addEventListener('click', (event) => {
    if (event.target.closest && event.target.closest('.st-key-dec_generate')) {
      Object.assign(stamps, {click: performance.now(), strip: null, painted: null, last: null});
    }
  }, true);
  new MutationObserver(() => {
    if (stamps.click === null) return;
    if (stamps.strip === null && document.querySelector('.txviz-strip span')) {
      stamps.strip = performance.now();
      requestAnimationFrame(() => setTimeout(() => { stamps.painted = performance.now(); }, 0));
    }
    if (stamps.last === null && [...document.querySelectorAll("[data-testid='stCaptionContainer']")]
        .some((caption) => lastToken.test(caption.innerText))) stamps.last = performance.now();
  }).observe(document, {subtree: true, childList: true, characterData: true});
})()""" % {"n": NEW_TOKENS}


def bench_prompt() -> str:
    """The text whose tokens are the decoding benchmark's prompt: the shipped text's first 64 tokens."""
    from txviz.analysis.texts import read_text
    from txviz.loading.known import load_default_model

    tokenizer = load_default_model(device="cpu").tokenizer
    text = tokenizer.decode(tokenizer.encode(read_text(), bos="none").ids[:PROMPT_TOKENS])
    n = len(tokenizer.encode(text, bos="none").ids)
    if n != PROMPT_TOKENS:
        raise RuntimeError(f"the prompt's text encodes to {n} tokens, not {PROMPT_TOKENS}")
    return text


def one_round(browser, url: str, prompt: str, seed: int, screenshot: Path | None = None) -> dict:
    """A fresh page of ``url``'s Decoding page, Generate clicked once it is idle; the stamps (seconds).
    ``screenshot``: the page once the run has ended, saved there."""
    context = browser.new_context(**CONTEXT_OPTIONS)
    track_reruns(context)
    context.add_init_script(STAMPS)
    page = context.new_page()
    try:
        query = urlencode({"prompt": prompt, "bos": "none", "dec_chat": "0", "dec_new": NEW_TOKENS,
                           "dec_sampler": "greedy", "dec_seed": seed})
        page.goto(f"{url}/decoding?{query}")
        page.wait_for_selector(GENERATE, timeout=300_000)
        wait_idle(page, timeout_ms=300_000)
        page.wait_for_timeout(SETTLE_MS)
        load = os.getloadavg()[0]
        page.locator(GENERATE).first.click()
        page.wait_for_function("() => window.__decodingStamps.last !== null && window.__decodingStamps.painted !== null",
                               timeout=180_000, polling=200)
        stamps = page.evaluate("() => Object.assign({origin: performance.timeOrigin}, window.__decodingStamps)")
        errors = page.locator(ERROR).count()
        if screenshot is not None:
            wait_idle(page, timeout_ms=300_000)
            page.screenshot(path=str(screenshot), full_page=False)
    finally:
        context.close()
    return {"first_s": (stamps["painted"] - stamps["click"]) / 1000, "strip_s": (stamps["strip"] - stamps["click"]) / 1000,
            "last_s": (stamps["last"] - stamps["click"]) / 1000, "load": load, "errors": errors,
            "epoch": {name: (stamps["origin"] + stamps[name]) / 1000 for name in ("click", "strip", "painted")}}


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} s ({min(values):.2f}–{max(values):.2f})"


def machine() -> str:
    name = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")), platform.processor() or "unknown CPU")
    return f"{name}, {os.cpu_count()} cores"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True, help="this tree's server; --before's gets a free port")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", type=Path, help="another checkout of the app, timed in turn with this one")
    parser.add_argument("--screenshot", type=Path, help="a folder: each tree's last round, once the run has ended")
    parser.add_argument("--stamps", action="store_true", help="print each round's click, strip and paint (epoch seconds)")
    args = parser.parse_args(argv)
    from contextlib import ExitStack

    from playwright.sync_api import sync_playwright

    if args.screenshot is not None:
        args.screenshot.mkdir(parents=True, exist_ok=True)
    trees = {"this tree": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    prompt = bench_prompt()
    print(f"{machine()}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start", flush=True)
    with ExitStack() as stack, sync_playwright() as playwright:
        urls = {name: stack.enter_context(streamlit_server(app_root=root, port=args.port if name == "this tree" else None,
                                                           timeout=300))
                for name, root in trees.items()}
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        results: dict[str, list[dict]] = {name: [] for name in trees}
        for name, url in urls.items():
            one_round(browser, url, prompt, seed=1)  # the model's load, the first run's imports: not counted
        for index in range(args.rounds):
            for name in (list(urls) if index % 2 == 0 else list(urls)[::-1]):
                shot = None if args.screenshot is None or index < args.rounds - 1 else \
                    args.screenshot / f"decoding_{name.replace(' ', '_')}.png"
                result = one_round(browser, urls[name], prompt, seed=100 + index, screenshot=shot)
                results[name].append(result)
                print(f"round {index + 1} {name}: first token painted {result['first_s']:.2f} s after the click "
                      f"(in the page {result['strip_s']:.2f} s), {NEW_TOKENS} tokens {result['last_s']:.2f} s, "
                      f"load {result['load']:.2f}, errors {result['errors']}", flush=True)
                if args.stamps:  # the page's moments on the machine's clock, to set beside a server's log
                    print("  " + ", ".join(f"{k} {v:.3f}" for k, v in result["epoch"].items()), flush=True)
        browser.close()
    for name, rounds in results.items():
        loads = [r["load"] for r in rounds]
        print(f"{name}: click → first token {spread([r['first_s'] for r in rounds])}; click → {NEW_TOKENS} tokens "
              f"{spread([r['last_s'] for r in rounds])}; {len(rounds)} fresh pages, load {min(loads):.2f}–{max(loads):.2f}, "
              f"{machine()}")


if __name__ == "__main__":
    main()
