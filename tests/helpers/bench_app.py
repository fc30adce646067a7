"""App latency on the default model, measured in one run (the app half of ``txviz bench``).

    python -m tests.helpers.bench_app            # a table with each target met or missed
    python -m tests.helpers.bench_app --json     # the raw figures

Server side, through Streamlit's AppTest (the page script run in this process, no browser): a head or
layer switch on a cached trace, and a new 64-token prompt to every figure of the Attention page. In a
real browser (``streamlit run`` + headless chromium, the browser-test harness): process start to the
first drawn figure with the weights already cached, a new 64-token prompt to every figure drawn, and a
head switch to the redrawn heatmap. Medians over ``--repeats``; every sample is in the JSON.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
TEXT = (ROOT / "assets" / "texts" / "how_a_model_reads.txt").read_text(encoding="utf-8")
TARGETS = {"server_head_switch_ms": 100.0, "server_prompt_64_s": 1.0, "browser_prompt_64_s": 1.0,
           "browser_start_to_first_figure_s": 10.0}


@functools.cache
def _tokenizer_and_config():
    """The default model's tokenizer and config, loaded once per process (the weights are let go): the
    prompts and the head and layer cycles need them, the timings do not (the app loads its own model)."""
    from txviz.loading import load

    loaded = load()
    return loaded.tokenizer, loaded.config


def prompts_of(n_tokens: int, count: int) -> list[str]:
    """``count`` different prompts of exactly ``n_tokens`` tokens (sink included), so that none is cached."""
    tokenizer, _ = _tokenizer_and_config()
    prompts = []
    for i in range(count):
        text = f"Note {i + 1}. " + TEXT[i * 40:]
        encoding = tokenizer.encode(text, bos="sink")
        cut = encoding.offsets[n_tokens - 1][1]  # the sink token adds one; the text keeps n - 1
        prompt = text[:cut]
        while len(tokenizer.encode(prompt, bos="sink").ids) > n_tokens:  # a merge across the cut
            prompt = prompt[:-1]
        prompts.append(prompt)
    return prompts


def _cycle(n: int, count: int) -> list[int]:
    """``count`` values in 1 … n−1, then 0, …, each different from the one before (heads, layers)."""
    return [(i + 1) % n for i in range(count)]


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


def server_latency(repeats: int, n_tokens: int = 64) -> dict:
    """Seconds of the page script per interaction, in this process (AppTest)."""
    from streamlit.testing.v1 import AppTest

    prompts = prompts_of(n_tokens, repeats + 1)
    at = AppTest.from_file(MAIN, default_timeout=600)
    at.query_params["prompt"] = prompts[0]
    started = time.perf_counter()
    at.run()  # loads the model: not a latency, reported apart
    first_run = time.perf_counter() - started
    _check(at)

    def timed(action) -> float:
        started = time.perf_counter()
        action().run()
        _check(at)
        return time.perf_counter() - started

    config = _config()
    heads = [timed(lambda h=h: at.number_input(key="head").set_value(h)) for h in _cycle(config.n_heads, 2 * repeats)]
    layers = [timed(lambda layer=layer: at.slider(key="layer").set_value(layer))
              for layer in _cycle(config.n_layers, 2 * repeats)]
    new_prompts = [timed(lambda p=p: at.sidebar.text_area(key="prompt").input(p)) for p in prompts[1:]]
    return {"first_run_s": round(first_run, 2), "head_switch_ms": _median_ms(heads),
            "layer_switch_ms": _median_ms(layers), "prompt_64_s": round(statistics.median(new_prompts), 3),
            "samples": {"head_switch_s": heads, "layer_switch_s": layers, "prompt_64_s": new_prompts}}


def _config():
    return _tokenizer_and_config()[1]


def _check(at) -> None:
    if at.exception or at.error:
        raise RuntimeError(f"the page failed: {[e.value for e in [*at.exception, *at.error]]}")


def browser_latency(repeats: int, n_tokens: int = 64) -> dict:
    """Seconds seen in headless chromium against a ``streamlit run`` server started here."""
    from tests.helpers.browser import CHART, ERROR, IDLE, chromium_browser, streamlit_server, wait_idle

    prompts = prompts_of(n_tokens, repeats)
    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        started = time.perf_counter()
        with streamlit_server() as url:
            page.goto(url)
            page.wait_for_selector(f".st-key-heatmap {CHART}", timeout=300_000)
            start_to_figure = time.perf_counter() - started
            wait_idle(page)
            n_charts = page.locator(CHART).count()

            prompt_times = []
            for prompt in prompts:
                box = page.locator(".st-key-prompt textarea")
                box.fill(prompt)
                before = page.locator(".st-key-heatmap").inner_text()
                started = time.perf_counter()
                box.press("Control+Enter")
                page.wait_for_function("t => document.querySelector('.st-key-heatmap')?.innerText !== t", arg=before,
                                       timeout=120_000)  # the new prompt's map is drawn
                page.wait_for_selector(IDLE, timeout=120_000)  # the script has sent everything
                page.wait_for_function("([selector, n]) => document.querySelectorAll(selector).length >= n",
                                       arg=[CHART, n_charts], timeout=60_000)
                prompt_times.append(time.perf_counter() - started)
                wait_idle(page)

            head_times = []
            for head in _cycle(_config().n_heads, 2 * repeats):
                box = page.locator(".st-key-head input")
                box.fill(str(head))
                started = time.perf_counter()
                box.press("Enter")
                page.wait_for_function(  # the title's own head, not "KV head N" that it shares
                    "h => new RegExp(', head ' + h + '([^0-9]|$)').test(document.querySelector('.st-key-heatmap')"
                    "?.innerText ?? '')", arg=head, timeout=60_000)
                page.wait_for_selector(f".st-key-heatmap {CHART}")
                head_times.append(time.perf_counter() - started)
                wait_idle(page)
            if page.locator(ERROR).count():
                raise RuntimeError("the page shows an exception")
    return {"start_to_first_figure_s": round(start_to_figure, 2), "figures": n_charts,
            "prompt_64_s": round(statistics.median(prompt_times), 3),
            "head_switch_ms": _median_ms(head_times),
            "samples": {"prompt_64_s": prompt_times, "head_switch_s": head_times}}


def run(repeats: int = 5, browser: bool = True) -> dict:
    import torch

    result = {"threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "repeats": repeats,
              "server": server_latency(repeats)}
    result["browser"] = browser_latency(repeats) if browser else None
    measured = {"server_head_switch_ms": result["server"]["head_switch_ms"],
                "server_prompt_64_s": result["server"]["prompt_64_s"]}
    if result["browser"]:
        measured |= {"browser_prompt_64_s": result["browser"]["prompt_64_s"],
                     "browser_start_to_first_figure_s": result["browser"]["start_to_first_figure_s"]}
    result["targets"] = {name: {"measured": value, "target": TARGETS[name], "met": value <= TARGETS[name]}
                         for name, value in measured.items()}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.helpers.bench_app", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=5, help="samples per interaction (default 5)")
    parser.add_argument("--no-browser", action="store_true", help="server side only (no chromium)")
    args = parser.parse_args(argv)
    result = run(args.repeats, browser=not args.no_browser)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    server, browser = result["server"], result["browser"]
    print(f"server (AppTest, page script): first run {server['first_run_s']} s · head switch "
          f"{server['head_switch_ms']} ms · layer switch {server['layer_switch_ms']} ms · new 64-token prompt "
          f"{server['prompt_64_s']} s")
    if browser:
        print(f"browser (chromium): start → first figure {browser['start_to_first_figure_s']} s · new 64-token "
              f"prompt → all {browser['figures']} figures {browser['prompt_64_s']} s · head switch "
              f"{browser['head_switch_ms']} ms")
    for name, target in result["targets"].items():
        print(f"  {name}: {target['measured']} (target ≤ {target['target']}) {'met' if target['met'] else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
