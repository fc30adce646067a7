"""The same analysis timed in the app and on the command line, side by side, quiet or under a load this
script makes: the built-in coreference set (``txviz coref``) and the causal test (``txviz patch --grid``
on the pair the Heads page proposes for the trophy sentence).

    python -m tests.helpers.app_vs_cli                       # both analyses, as the machine is
    python -m tests.helpers.app_vs_cli --load 4              # + 4 busy processes for the whole run
    python -m tests.helpers.app_vs_cli --model gemma3-270m --what causal --repeats 2 --json
    python -m tests.helpers.app_vs_cli --tree /tmp/old       # the app and CLI of another checkout

The app side runs in a fresh process (no shared store kept from an earlier run): the Heads page through
Streamlit's AppTest (the page script in this process, as the server runs it, without a browser), opened
on the Coreference tab with the model loaded, then the click on the run button timed to the page drawn
again with the result, and the page's own estimate read beside it. The command-line side is a fresh
``python -m txviz.cli`` process: its own timing of the work (``seconds``, after the model load) and its
wall time. App and CLI alternate within each repeat, so both meet the same load; the 1-minute load
average and the run queue are printed beside every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TROPHY = "The trophy didn't fit in the suitcase because it was too big."
BUSY = "import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"


def _load_now() -> str:
    with open("/proc/loadavg") as handle:
        fields = handle.read().split()
    return f"load {fields[0]}, running {fields[3]}"


def _app_side(what: str, model: str) -> dict:
    """Runs inside a fresh process rooted at the tree under test: the page's own run, timed."""
    from streamlit.testing.v1 import AppTest

    from app import cache
    from app.services.causal import CausalRequest

    at = AppTest.from_file(str(Path.cwd() / "app" / "main.py"), default_timeout=900)
    at.query_params["coref_text"] = TROPHY  # a link with a sentence opens the Heads page on the Coreference tab
    if model != "default":
        at.query_params["model"] = model
    at.run()
    at.switch_page("app_pages/heads/page.py").run()
    assert not at.exception, [e.value for e in at.exception]
    key = "causal_run" if what == "causal" else "coref_builtin"
    out = {}
    if what == "causal":
        clean = next(w.value for w in at.text_input if w.key and w.key.startswith("causal_clean_"))
        corrupt = next(w.value for w in at.text_input if w.key and w.key.startswith("causal_corrupt_"))
        answer = next(w.value for w in at.selectbox if w.key and w.key.startswith("causal_answer_"))
        wrong = next(w.value for w in at.selectbox if w.key and w.key.startswith("causal_wrong_"))
        request = CausalRequest(clean, corrupt, answer, wrong, ("trophy", "suitcase"), "it", "sink")
        out = {"clean": clean, "corrupt": corrupt, "answer": answer, "wrong": wrong,
               "estimate_s": round(cache.causal_estimate(model, request).seconds, 1)}
    elif hasattr(cache, "coref_seconds"):  # an older app shows no estimate for the set
        out["estimate_s"] = round(cache.coref_seconds(model, "sink"), 1)
    started = time.perf_counter()
    at.button(key=key).click().run()
    out["seconds"] = round(time.perf_counter() - started, 2)
    assert not at.exception, [e.value for e in at.exception]
    assert at.metric, "the run drew no result"
    if "run_ratios" in getattr(cache, "SHARED_STORES", {}):  # what the next estimate learns from this run
        out["ratio"] = cache._shared("run_ratios").peek((what, model))[1]
    return out


def _python(tree: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, *args], cwd=tree, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(tree)})
    if done.returncode:
        raise SystemExit(f"{' '.join(args[:4])} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def _app(tree: Path, what: str, model: str) -> dict:
    lines = _python(tree, "-m", "tests.helpers.app_vs_cli", "--side", "app", "--what", what, "--model", model)
    return json.loads(lines.strip().splitlines()[-1])


def _cli(tree: Path, what: str, model: str, app: dict) -> dict:
    args = ["-m", "txviz.cli", "coref" if what == "coref" else "patch", "--json", "--model", model]
    if what == "causal":
        args += ["--clean", app["clean"], "--corrupt", app["corrupt"], "--answer", app["answer"],
                 "--wrong", app["wrong"], "--candidates", "trophy,suitcase", "--pronoun", "it", "--grid", "--bos", "sink"]
    else:
        args += ["--bos", "sink"]
    started = time.perf_counter()
    result = json.loads(_python(tree, *args))
    return {"seconds": result["seconds"], "wall_s": round(time.perf_counter() - started, 2)}


def _busy(n: int, seconds: float) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=seconds)]) for _ in range(n)]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--what", nargs="+", choices=["coref", "causal"], default=["coref", "causal"])
    parser.add_argument("--model", default="default")
    parser.add_argument("--load", type=int, default=0, help="busy processes started for the run (killed at its end)")
    parser.add_argument("--load-seconds", type=float, default=900, help="the longest a busy process lives")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose app and CLI are timed")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--side", choices=["app"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.side == "app":
        print(json.dumps(_app_side(args.what[0], args.model)))
        return
    busy = _busy(args.load, args.load_seconds)
    rows = []
    try:
        if busy:
            time.sleep(5)  # the busy processes running before the first figure
        for repeat in range(args.repeats):
            for what in args.what:
                before = _load_now()
                app = _app(args.tree, what, args.model)
                cli = _cli(args.tree, what, args.model, app)
                row = {"what": what, "model": args.model, "repeat": repeat, "extra_load": args.load,
                       "app_s": app["seconds"], "cli_s": cli["seconds"], "cli_wall_s": cli["wall_s"],
                       "app_over_cli": round(app["seconds"] / cli["seconds"], 2),
                       "estimate_s": app.get("estimate_s"), "ratio": app.get("ratio"), "before": before,
                       "after": _load_now()}
                rows.append(row)
                if not args.json:
                    estimate = "" if row["estimate_s"] is None else f", estimate {row['estimate_s']} s"
                    print(f"{what:6s} {args.model}: app {row['app_s']} s, CLI {row['cli_s']} s (wall {row['cli_wall_s']} s), "
                          f"app/CLI {row['app_over_cli']}{estimate}; +{args.load} busy; {before} → {row['after']}",
                          flush=True)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
