"""A cheap check of the model files the app offers, before anyone can pick one: header only, parsed where
the OS can stop it.

``problems(paths)`` says, for each .gguf file or checkpoint directory, why it cannot be loaded (one line)
or None. The untrusted part, parsing the header, runs in a child process with memory, CPU and wall
limits (txviz.loading.isolated, worker ``header_check``): a GGUF file through the bounded reader, a
directory's config.json and its safetensors headers (no tensor data). A file that makes that child run
out of time or memory is broken for that reason. What the child describes is then judged here with the
loader's own checks, in arithmetic only: the GGUF config (txviz.loading.gguf.loader.config_from_header, its size
bounds and tokenizer field types), every tensor's name and shape against that config, the layers
present, the parameters implied against those held; for a directory, its config (Hugging Face or the
lab's) and the parameters. So a file that passes is one ``load`` would not refuse before dequantizing;
a tokenizer.json only has its size checked (over 128 MiB is refused; its regexes run, bounded, when
text is encoded).

Verdicts are kept per process by (path, size, mtime) of the file, or of every config and weight file of
a directory: the sidebar pays the check once per file version. Several files are checked in one child
(one interpreter start); if that child fails, each is checked alone so one hostile file cannot condemn
the others.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from types import SimpleNamespace

from txviz.loading.errors import ModelLoadError
from txviz.loading.isolated import IsolatedError, Limits, run_worker

READER = Path(__file__).parent / "gguf" / "reader.py"
SECONDS_PER_FILE = 10.0  # SmolLM2's header (49k tokens, 49k merges) takes ~1 s here; Gemma 3's 262k tokens ~3 s
LIMITS = Limits(seconds=SECONDS_PER_FILE, memory_bytes=768 << 20)
PARAMS_SLACK = 4  # as txviz.loading.gguf.loader.check_sizes: a config implying far more weights than held is hostile

_verdicts: dict[tuple, str | None] = {}
_checking: dict[tuple, threading.Event] = {}  # versions a check is running for, set when its verdict is kept
_lock = threading.Lock()  # guards both dicts only: a check runs outside it, so a session never waits on
# another's check of a file it does not need (a new hostile file took other sessions' sidebars 10 s)
CHECKING = "its header is being checked (by another session): it is offered once the check passes"


def fingerprint(path: str | Path) -> tuple:
    """What a verdict is kept under: the path and the size and mtime of every file the check reads."""
    path = Path(path)
    if not path.is_dir():
        stat = path.stat()
        return str(path), stat.st_size, stat.st_mtime_ns
    files = sorted(p for p in path.iterdir() if p.name == "config.json" or p.name.endswith((".safetensors", ".json")))
    return str(path), tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files if p.is_file())


def problem(path: str | Path) -> str | None:
    """Why ``path`` (a .gguf file or a checkpoint directory) cannot be loaded, or None."""
    return problems([path])[str(path)]


def problems(paths: list[str | Path], *, wait: bool = True) -> dict[str, str | None]:
    """{path: reason or None} for each path, checked once per version of its files. A version another
    thread is checking is waited for, or, with ``wait=False`` (the sidebar's listing), reported as
    ``CHECKING`` so that the page goes on at once."""
    verdicts: dict[str, str | None] = {}
    keys: dict[str, tuple] = {}
    for path in map(str, paths):
        try:
            if _checkable(Path(path)):
                keys[path] = fingerprint(path)
            else:  # the loader names what it is instead (a pickle, a folder with no config.json)
                verdicts[path] = None
        except OSError as error:
            verdicts[path] = f"{path}: cannot read it: {error.strerror or error}"
    mine, others = _claim(keys)
    if mine:
        _check_claimed(mine, keys)
    if wait:
        for event in others.values():
            event.wait()
    with _lock:
        verdicts.update({path: _verdicts.get(key, CHECKING) for path, key in keys.items()})
    return verdicts


def _claim(keys: dict[str, tuple]) -> tuple[list[str], dict[str, threading.Event]]:
    """(the paths this thread checks, {path: event} of those another thread is checking)."""
    mine, others = [], {}
    with _lock:
        for path, key in keys.items():
            if key in _verdicts:
                continue
            if key in _checking:
                others[path] = _checking[key]
            else:
                _checking[key] = threading.Event()
                mine.append(path)
    return mine, others


def _check_claimed(paths: list[str], keys: dict[str, tuple]) -> None:
    results: dict[str, str | None] = {}
    try:
        results = _check(paths)
    finally:  # if the check itself failed (raised), nothing is kept, but nobody may wait forever on it
        with _lock:
            for path in paths:
                if path in results:
                    _verdicts[keys[path]] = results[path]
                _checking.pop(keys[path]).set()


def _checkable(path: Path) -> bool:
    """A .gguf file or a directory with a config.json: what discovery lists and a header check can read."""
    return (path.is_file() and path.suffix.lower() == ".gguf") or (path / "config.json").is_file()


def forget() -> None:
    """Drop every kept verdict (tests)."""
    with _lock:
        _verdicts.clear()


def _check(paths: list[str]) -> dict[str, str | None]:
    try:
        described = _describe(paths)
    except IsolatedError as error:
        if len(paths) > 1:  # find which file it was: each alone
            return {path: verdict for one in paths for path, verdict in _check([one]).items()}
        return {paths[0]: f"{paths[0]}: its header could not be checked within the limits ({error})"}
    return {result["path"]: _judge(result) for result in described}


def _describe(paths: list[str]) -> list[dict]:
    from txviz.limits import current

    limits = Limits(seconds=SECONDS_PER_FILE * len(paths), memory_bytes=LIMITS.memory_bytes)
    request = {"paths": paths, "reader": str(READER), "max_config_bytes": current().max_config_bytes}
    return run_worker("header_check", request, limits)["results"]


def _judge(result: dict) -> str | None:
    path = result["path"]
    if "error" in result:
        return f"{path}: {result['error']}"
    try:
        _judge_gguf(path, result["gguf"]) if "gguf" in result else _judge_dir(path, result["dir"])
    except ValueError as error:  # ModelLoadError, ConfigError: ours, with a message
        return str(error)
    except Exception as error:  # noqa: BLE001 - as txviz.loading.load's boundary: a file's fault, named
        return f"{path}: could not be loaded ({type(error).__name__}: {str(error)[:200]})"
    return None


def _judge_gguf(path: str, described: dict) -> None:
    """The loader's checks on the described header (no tensor data): config, then every tensor."""
    from txviz.loading.gguf.families import family_of
    from txviz.loading.gguf.loader import GGUFHeader, check_tensor_shapes, config_from_header, txviz_names

    elided = {key: value for key, value in described["metadata"].items() if isinstance(value, dict)}
    metadata = {key: value["head"] if key in elided else value for key, value in described["metadata"].items()}
    vocab_key = f"{metadata.get('general.architecture')}.vocab_size"
    if "tokenizer.ggml.tokens" in elided and vocab_key not in metadata:  # the size the whole list would give
        metadata[vocab_key] = elided["tokenizer.ggml.tokens"]["count"]
    rows = described["tensors"]
    config = config_from_header(GGUFHeader(path, metadata, {name: kind for name, _, kind, _ in rows}))
    import numpy as np

    tensors = [SimpleNamespace(name=name, shape=np.array(dims, dtype=np.int64), n_elements=n)
               for name, dims, _, n in rows]
    family = family_of(str(metadata.get("general.architecture", "")), path)  # config_from_header knew it
    try:
        check_tensor_shapes(SimpleNamespace(tensors=tensors), config, family)
    except ModelLoadError as error:
        raise ModelLoadError(f"{path}: {error}") from None
    homeless = next((t.name for t in tensors if txviz_names(t.name, config, family) is None), None)
    if homeless:
        raise ModelLoadError(f"{path}: tensor {homeless} has no place in a {config.n_layers}-layer decoder; "
                             "this GGUF variant is not supported")


def _judge_dir(path: str, described: dict) -> None:
    """The directory's config as the loader reads it, and the parameters it implies against those held."""
    from txviz.model.counts import count_params
    from txviz.loading.hf.config import config_from_dict, quantization_refusal
    from txviz.loading.tokenizer.tokenizer import tokenizer_json_too_large
    from txviz.loading.zoo import FORMAT_KEY, txviz_config_from_dict

    tokenizer_json = Path(path) / "tokenizer.json"  # its size only: parsing it is the loader's, bounded by this
    too_large = tokenizer_json.is_file() and tokenizer_json_too_large(tokenizer_json)
    if too_large:
        raise ModelLoadError(too_large)
    raw = described["config"]
    if FORMAT_KEY in raw:
        config = txviz_config_from_dict(raw, Path(path) / "config.json")
    else:
        refusal = quantization_refusal(raw, path)
        if refusal:
            raise ModelLoadError(refusal)
        config = config_from_dict(raw, name=Path(path).name, source=str(path))
    held = sum(math.prod(shape) for _, _, shape in described["tensors"])
    described_params = count_params(config)
    if described_params > PARAMS_SLACK * held:
        raise ModelLoadError(f"{path}: config.json describes a model of {described_params:,} parameters, but "
                             f"its weights hold {held:,}")
