"""``python -m tests.helpers.hostile_bench``: each kind of hostile input (huge arrays, counts and sizes,
chat templates, RoPE scalings that divide by zero, catastrophic regexes, malformed files) on small files
generated here, as a user meets it on the command line, and what a concurrent session feels meanwhile.

Per case, a fresh process runs ``txviz.cli.main(argv)`` after importing txviz, and reports the seconds
from the call to its answer, the peak RSS it added over what it had after the imports (MB, from VmHWM
reset before the call), its exit status, and whether a traceback reached the user. Work done in a capped
child (templates, a file's own regexes, header checks) is not in that figure: each child is bounded by
its own address-space limit (txviz.loading.isolated.Limits).

Then one line: a second "session" (a thread doing repeated 64-token traces of the zoo's tiny base
model, with every attention map captured) timed alone and while this same process (as an app server
would) loads, renders and encodes every hostile file through the library; the slowdown ratio is the
median trace time with / without. For scale, the same while the process loads a good tiny GGUF as many
times: two threads of one interpreter share its lock, so any load slows a session sharing the process.
Output: a markdown table and the load average (the machine is shared).
``--json`` prints the rows instead.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

from tests.helpers.hostile_gguf import patch_after, tiny_gguf, wrap_first_offset

ROOT = Path(__file__).resolve().parents[2]
ZOO_BASE = ROOT / "assets" / "zoo" / "base"
CASE_TIMEOUT_S = 120


# ---- the hostile files -------------------------------------------------------------------------
@contextlib.contextmanager
def _writer_method(name: str, replacement):
    """gguf.GGUFWriter.<name> replaced while a file is written (how the tiny writer is made hostile)."""
    import gguf

    original = getattr(gguf.GGUFWriter, name)
    setattr(gguf.GGUFWriter, name, replacement)
    try:
        yield original
    finally:
        setattr(gguf.GGUFWriter, name, original)


def _tokens_as_string(path: Path) -> Path:
    with _writer_method("add_token_list", lambda self, tokens: self.add_string("tokenizer.ggml.tokens", "".join(tokens))):
        return tiny_gguf(path)


def _with_template(path: Path, template: str) -> Path:
    with _writer_method("add_chat_template", lambda self, _: self.add_string("tokenizer.chat_template", template)):
        return tiny_gguf(path)


def _zoo_copy(path: Path, config: dict | None = None, pre_tokenizer: dict | None = None) -> Path:
    shutil.copytree(ZOO_BASE, path)
    if config:
        raw = json.loads((path / "config.json").read_text())
        (path / "config.json").write_text(json.dumps({**raw, **config}))
    if pre_tokenizer:
        raw = json.loads((path / "tokenizer.json").read_text())
        (path / "tokenizer.json").write_text(json.dumps({**raw, "pre_tokenizer": pre_tokenizer}))
    return path


def _hf_huge(path: Path) -> Path:
    from tests.helpers.tiny_hf import build, edit_config, save

    save(build("llama_gqa"), path)
    edit_config(path, lambda config: {**config, "num_hidden_layers": 10 ** 9})
    return path


def worst_prompt() -> str:
    """Regex attempts just under onig's retry limit, as many as the longest prompt holds."""
    from txviz.limits import Limits

    return ("a" * 22 + "b") * (Limits().max_prompt_chars // 23)


KINDS = ("huge array", "huge count", "huge size", "template", "rope division", "regex", "malformed")


def hostile_cases(folder: Path) -> list[tuple[str, str, list[str], Path | None]]:
    """(kind, what, CLI argv, the file) for each hostile case, grouped by kind (``KINDS``)."""
    from gguf import GGUFValueType as T

    f = folder
    split = {"type": "Split", "pattern": {"Regex": "(a+)+c"}, "behavior": "Isolated", "invert": False}
    info = lambda path: ["info", "--model", str(path)]  # noqa: E731
    files = [
        ("huge array", "GGUF array claiming 2^62 items", patch_after(tiny_gguf(f / "c1.gguf"), b"test.items", "<Q", 2 ** 62, 8)),
        ("huge count", "GGUF block_count 10^9", patch_after(tiny_gguf(f / "c2a.gguf"), b"llama.block_count", "<I", 10 ** 9)),
        ("huge count", "GGUF expert_count 10^6", tiny_gguf(f / "c2b.gguf", {"{arch}.expert_count": (10 ** 6, T.UINT32)})),
        ("huge count", "HF num_hidden_layers 10^9", _hf_huge(f / "c2c")),
        ("huge count", "lab n_layers 10^9", _zoo_copy(f / "c2d", {"n_layers": 10 ** 9})),
        ("huge size", "GGUF head_dim (key_length) 2^28", patch_after(tiny_gguf(f / "c3a.gguf"), b"llama.attention.key_length", "<I", 1 << 28)),
        ("huge size", "GGUF embedding_length 2^31", patch_after(tiny_gguf(f / "c3b.gguf"), b"llama.embedding_length", "<I", 1 << 31)),
        ("rope division", "yarn with rope_theta 1", tiny_gguf(f / "c5a.gguf", {"{arch}.rope.scaling.type": ("yarn", T.STRING),
                                                                             "{arch}.rope.scaling.factor": (4.0, T.FLOAT32),
                                                                             "{arch}.rope.scaling.original_context_length": (16, T.UINT32)},
                                                              rope_theta=1.0)),
        ("rope division", "yarn beta_fast 1e-320", tiny_gguf(f / "c5b.gguf", {"{arch}.rope.scaling.type": ("yarn", T.STRING),
                                                                             "{arch}.rope.scaling.factor": (4.0, T.FLOAT32),
                                                                             "{arch}.rope.scaling.original_context_length": (16, T.UINT32),
                                                                             "{arch}.rope.scaling.yarn_beta_fast": (1e-320, T.FLOAT64)})),
        ("malformed", "GGUF tensor offset 2^64-32", wrap_first_offset(tiny_gguf(f / "c7a.gguf"))),
        ("malformed", "GGUF token list given as a string", _tokens_as_string(f / "c7b.gguf")),
    ]
    cases = [(case, what, info(path), path) for case, what, path in files]
    for what, template in (("chat template 7 ** 11529602", "{{ (7 ** 11529602) > 0 }}"),
                           ("chat template [0]*200000000", "{{ ([0]*200000000)|length }}")):
        path = _with_template(f / f"c4{len(cases)}.gguf", template)
        cases.append(("template", what, ["generate", "--model", str(path), "--prompt", "hi", "--chat", "--max-new-tokens", "1"], path))
    regex = _zoo_copy(f / "c6", pre_tokenizer=split)
    cases.append(("regex", "tokenizer.json (a+)+c, 100k-char worst prompt",
                  ["trace", "--model", str(regex), "--prompt", worst_prompt()], regex))
    cases.append(("malformed", "bench --model /nonexistent/x.gguf", ["bench", "--model", "/nonexistent/x.gguf"], None))
    cases.append(("malformed", "memory --gpu-gib 1e300", ["memory", "--preset", "gpt2", "--gpu-gib", "1e300"], None))
    cases.append(("malformed", "NaN flipped into the fp32 cache copy", ["generate", "--prompt", "hi", "--max-new-tokens", "1"],
                  _flipped_copy_home(f)))
    return cases


def _flipped_copy_home(folder: Path) -> Path:
    """A TXVIZ_HOME whose default model is a tiny GGUF with its float32 copy, a NaN written into the copy."""
    from txviz.loading.gguf import float32_copy

    home, gguf_path = folder / "home", tiny_gguf(folder / "c7c.gguf")
    with _environment(TXVIZ_HOME=str(home), TXVIZ_DEFAULT_GGUF=str(gguf_path)):
        float32_copy.load_gguf_cached(gguf_path, device="cpu")
        copy = float32_copy.dequantized_copy_path(gguf_path)
    data = bytearray(copy.read_bytes())
    start = 8 + struct.unpack_from("<Q", data)[0]
    at = start + (len(data) - start) // 2 // 4 * 4
    data[at:at + 4] = struct.pack("<f", float("nan"))
    copy.write_bytes(bytes(data))
    return home


def _case_environment(case: tuple) -> dict[str, str]:
    """The flipped-copy case runs with its own home and default model; the others with a fresh home."""
    _, _, _, path = case
    if path is not None and path.name == "home":
        return {"TXVIZ_HOME": str(path), "TXVIZ_DEFAULT_GGUF": str(path.parent / "c7c.gguf")}
    return {"TXVIZ_HOME": str((path or Path(tempfile.gettempdir())).parent / "empty-home")}


@contextlib.contextmanager
def _environment(**values: str):
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)


# ---- one case, in a fresh process ------------------------------------------------------------------
def _status_mb(field: str) -> float:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1]) / 1024


def _reset_peak_rss() -> None:
    """Make VmHWM (the peak RSS) start again from the present RSS, so the imports' own peak is not counted."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def _said(text: str) -> str:
    """The line a user reads: the error or the warning if there is one, else the last line."""
    lines = [re.sub(r"^\S+\.py:\d+: ", "", line.strip()) for line in text.splitlines() if line.strip()]
    told = [line for line in lines if line.startswith("txviz: error") or "Warning" in line or "Error" in line]
    return (told or lines or [""])[-1][:160]


def run_one(argv: list[str]) -> dict:
    """``txviz.cli.main(argv)`` timed, its output captured (this runs in the case's own process)."""
    import txviz.cli  # noqa: F401 - imported before the clock and the memory baseline start

    _reset_peak_rss()
    before, out = _status_mb("VmRSS"), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            status = txviz.cli.main(argv)
        except SystemExit as exit_:
            status = exit_.code
        except BaseException:  # noqa: BLE001 - what would reach the user as a traceback
            traceback.print_exc()
            status = "uncaught"
    seconds = time.perf_counter() - started
    text = out.getvalue()
    return {"seconds": round(seconds, 2), "extra_rss_mb": round(_status_mb("VmHWM") - before, 1),
            "status": status, "traceback": "Traceback" in text, "last_line": _said(text)}


def measure(case: tuple) -> dict:
    number, what, argv, _ = case
    env = {**os.environ, **_case_environment(case), "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run([sys.executable, "-m", "tests.helpers.hostile_bench", "--one"], input=json.dumps(argv),
                              capture_output=True, text=True, cwd=ROOT, env=env, timeout=CASE_TIMEOUT_S)
        row = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, IndexError, ValueError) as error:
        row = {"seconds": None, "extra_rss_mb": None, "status": "killed",
               "traceback": None, "last_line": f"{type(error).__name__}"}
    return {"case": number, "what": what, **row}


# ---- a concurrent session --------------------------------------------------------------------------
def _session(stop: threading.Event, times: list[float], repeats: int | None = None) -> None:
    import torch

    from txviz import trace
    from txviz.loading import load

    model = load(ZOO_BASE, device="cpu").model
    ids = torch.arange(64).remainder(model.config.vocab_size).unsqueeze(0)
    trace(model, ids, capture=("attn_probs",))  # warm
    while not stop.is_set() and (repeats is None or len(times) < repeats):
        started = time.perf_counter()
        trace(model, ids, capture=("attn_probs",))
        times.append(time.perf_counter() - started)


def _run_in_process(cases: list[tuple]) -> float:
    """Every case through the command line's code in this process; its seconds."""
    import txviz.cli

    started = time.perf_counter()
    for case in cases:
        with _environment(**_case_environment(case)), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            try:
                txviz.cli.main(case[2])
            except BaseException:  # noqa: BLE001 - measured above; here only the session's time counts
                pass
    return time.perf_counter() - started


def _session_during(cases: list[tuple]) -> tuple[list[float], float]:
    during, stop = [], threading.Event()
    thread = threading.Thread(target=_session, args=(stop, during))
    thread.start()
    seconds = _run_in_process(cases)
    stop.set()
    thread.join()
    return during, seconds


def session_slowdown(cases: list[tuple], benign: list[tuple], repeats: int = 100) -> dict:
    """Median 64-token trace time of a session thread alone (before and after), while this process runs
    every hostile case through the command line's code, and while it runs as many loads of a good tiny
    file (what any load costs a session sharing the interpreter)."""
    import torch

    torch.set_num_threads(1)  # one intra-op thread: two spinning OpenMP threads on a loaded 2-core machine
    before: list[float] = []  # make the figure swing by 40x from run to run, whatever the hostile files do
    _session(threading.Event(), before, repeats)
    hostile, hostile_s = _session_during(cases)
    good, good_s = _session_during(benign)
    after: list[float] = []
    _session(threading.Event(), after, repeats)  # alone again: the machine's load drifts
    ms = lambda times: round(1000 * statistics.median(times), 1)  # noqa: E731
    alone = statistics.median(before + after)
    return {"alone_ms": round(1000 * alone, 1), "before_ms": ms(before), "after_ms": ms(after),
            "during_ms": ms(hostile), "worst_during_ms": round(1000 * max(hostile), 1), "traces_during": len(hostile),
            "hostile_s": round(hostile_s, 1), "ratio": round(statistics.median(hostile) / alone, 2),
            "benign_ms": ms(good), "benign_s": round(good_s, 1), "benign_ratio": round(statistics.median(good) / alone, 2)}


# ---- the report ------------------------------------------------------------------------------------
def markdown(rows: list[dict], slowdown: dict, load: tuple[float, float, float]) -> str:
    lines = ["| case | hostile input | s to the answer | peak extra RSS MB | exit | traceback | what the user reads |",
             "|---|---|---|---|---|---|---|"]
    for row in sorted(rows, key=lambda row: KINDS.index(row["case"])):
        said = row["last_line"].replace("|", "\\|")
        lines.append(f"| {row['case']} | {row['what']} | {row['seconds']} | {row['extra_rss_mb']} "
                     f"| {row['status']} | {'yes' if row['traceback'] else 'no'} | {said[:110]} |")
    lines.append("")
    lines.append(f"Concurrent session (64-token trace of the zoo's base model with every attention map, a thread of "
                 f"the same process, one torch thread): {slowdown['alone_ms']} ms median alone ({slowdown['before_ms']} "
                 f"before, {slowdown['after_ms']} after), {slowdown['during_ms']} ms median "
                 f"(worst {slowdown['worst_during_ms']} ms, {slowdown['traces_during']} traces) while the process ran "
                 f"every case above ({slowdown['hostile_s']} s): slowdown ×{slowdown['ratio']}; "
                 f"{slowdown['benign_ms']} ms while it loaded a good tiny GGUF as many times ({slowdown['benign_s']} s): "
                 f"×{slowdown['benign_ratio']}. "
                 f"Load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}, {os.cpu_count()} CPUs.")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"]:
        print(json.dumps(run_one(json.loads(sys.stdin.read()))))
        return 0
    with tempfile.TemporaryDirectory(prefix="txviz-hostile-") as scratch:
        cases = hostile_cases(Path(scratch))
        rows = [measure(case) for case in cases]
        for row in rows:  # no path of this machine in a table that is committed
            row["last_line"] = row["last_line"].replace(scratch, "…").replace(str(ROOT) + "/", "")
        good = tiny_gguf(Path(scratch) / "good.gguf")
        benign = [("-", "good tiny GGUF", ["info", "--model", str(good)], good)] * len(cases)
        slowdown = session_slowdown(cases, benign)
        load = os.getloadavg()
    if "--json" in argv:
        print(json.dumps({"rows": rows, "slowdown": slowdown, "load_average": load}))
    else:
        print(markdown(rows, slowdown, load))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
