"""Models from the Hugging Face Hub, through the Hub's own client (huggingface_hub), into its own cache.

    snapshot = ensure_hub_model("HuggingFaceTB/SmolLM2-135M@main", progress=report)
    snapshot.path      # the snapshot folder the HF folder loader (or the GGUF loader) reads
    snapshot.commit    # the revision resolved to its commit: what a link keeps to get the same weights

Only what txviz reads is fetched: config, tokenizer and safetensors files (or one GGUF file); never a
pickle (.bin, .pt, ...), and a repo that holds only those is refused by name. Before any weights are
fetched, the files' sizes come from the Hub (``model_info`` with files metadata), config.json is fetched
and read as the loader would read it (a family txviz cannot run is refused here, not after gigabytes),
and the bytes still to fetch and the memory the model needs on the device are held against the
limits of txviz.loading.hub_policy, each refusal giving both numbers.

The Hub's environment is read at each call, not at import: ``HF_ENDPOINT``, ``HF_HOME`` /
``HF_HUB_CACHE`` (the cache layout is the client's: ``hub/models--org--name/{blobs,snapshots,refs}``)
and ``HF_HUB_OFFLINE``, under which the cache alone answers. A snapshot is used only when every file
chosen for it is there with its size: the client writes each file beside its place and renames it when
complete, so a download stopped mid-way leaves a snapshot that is refused here (and that the folder
loader refuses too, lacking its weights) and is completed by the next online call.
"""

from __future__ import annotations

import glob
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from txviz.limits import format_bytes
from txviz.loading.errors import ModelLoadError
from txviz.loading.hub_id import COMMIT, HubId, parse_hub_id
from txviz.loading.hub_policy import HubPolicy

Progress = Callable[[float, str], None]
CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
SIDE_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
              "special_tokens_map.json", "chat_template.jinja")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
GGUF_BITS_FLOOR = 4  # a GGUF's weights are estimated at no fewer bits each (Q4 and above; loaded dequantized)


@dataclass(frozen=True)
class HubSnapshot:
    id: HubId  # as asked
    commit: str
    path: Path  # the snapshot folder; for a GGUF repo, the .gguf file in it
    files: dict[str, int]  # name -> bytes, as the Hub lists them
    fetched_bytes: int = 0  # bytes this call downloaded (0: all from the cache)
    memory_bytes: int = 0  # what the model needs on the device, as estimated before downloading
    notes: tuple[str, ...] = field(default=())

    @property
    def pinned_id(self) -> str:
        return f"{self.id.repo}@{self.commit}"


def hub_cache_dir() -> Path:
    """The client's cache, from the environment now: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface"
    return Path(home).expanduser() / "hub"


def hub_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def ensure_hub_model(hub_id: str | HubId, *, dtype: torch.dtype = torch.float32, device: torch.device | None = None,
                     policy: HubPolicy | None = None, progress: Progress | None = None) -> HubSnapshot:
    """The snapshot of ``hub_id``, downloaded if needed, under ``policy`` (default: the environment's)."""
    hub_id = parse_hub_id(hub_id) if isinstance(hub_id, str) else hub_id
    policy = HubPolicy.from_env() if policy is None else policy
    if not policy.enabled:
        raise ModelLoadError("Hub ids are off here: the operator allows them with TXVIZ_HUB "
                             "(all, or repo patterns such as HuggingFaceTB/*)")
    if not policy.allows(hub_id.repo):
        raise ModelLoadError(f"{hub_id.repo} is not among the Hub repos allowed here (TXVIZ_HUB)")
    report = progress or (lambda fraction, message: None)
    if offline():
        return _from_cache(hub_id)
    if hub_id.pinned:  # a commit never changes: a complete cached snapshot needs no call to the Hub
        try:
            return _from_cache(hub_id)
        except ModelLoadError:
            pass
    from txviz.loading import hub_errors

    with hub_errors.one_line(hub_id):
        return _download(hub_id, dtype, device or torch.device("cpu"), policy, report)


def _download(hub_id: HubId, dtype: torch.dtype, device: torch.device, policy: HubPolicy,
              report: Progress) -> HubSnapshot:
    from huggingface_hub import HfApi, hf_hub_download, snapshot_download

    endpoint, cache = hub_endpoint(), hub_cache_dir()
    report(0.0, f"Asking the Hub about {hub_id}…")
    info = HfApi(endpoint=endpoint).model_info(hub_id.repo, revision=hub_id.revision, files_metadata=True)
    commit = info.sha
    listed = {s.rfilename: (s.lfs.size if s.lfs else s.size) or 0 for s in info.siblings or ()}

    def fetch_one(name: str) -> Path:
        return Path(hf_hub_download(hub_id.repo, name, revision=commit, cache_dir=cache, endpoint=endpoint))

    files = choose_files(hub_id.repo, listed, fetch_one)
    memory = memory_needed(hub_id.repo, files, fetch_one, dtype)
    storage = cache / f"models--{hub_id.repo.replace('/', '--')}"
    if hub_id.revision != commit:  # as the client records a branch or tag: refs/<revision> names its commit
        _write_ref(storage / "refs" / hub_id.revision, commit)
    snapshot = storage / "snapshots" / commit
    to_fetch = {name: size for name, size in files.items() if not (snapshot / name).is_file()}
    check_sizes(hub_id.repo, sum(to_fetch.values()), memory, dtype, device, policy)
    total = sum(to_fetch.values())
    report(0.0, f"{hub_id.repo}@{commit[:12]}: {len(files)} files, {format_bytes(total)} to fetch; "
                f"{format_bytes(memory)} of memory in {str(dtype).removeprefix('torch.')}")
    path = on_this_thread(lambda relay: snapshot_download(
        hub_id.repo, revision=commit, cache_dir=cache, endpoint=endpoint, max_workers=4,
        allow_patterns=[glob.escape(name) for name in files],
        tqdm_class=progress_bar(total, relay, f"Downloading {hub_id.repo}")), report)
    report(1.0, f"{hub_id.repo}@{commit[:12]} is in the cache")
    return _complete(hub_id, commit, Path(path), files, fetched=total, memory=memory)


def _write_ref(ref: Path, commit: str) -> None:
    if ref.is_file() and ref.read_text().strip() == commit:
        return
    ref.parent.mkdir(parents=True, exist_ok=True)
    partial = ref.with_name(f".{ref.name}.{os.getpid()}.tmp")
    partial.write_text(commit)
    partial.replace(ref)


def choose_files(repo: str, listed: dict[str, int], fetch_one: Callable[[str], Path]) -> dict[str, int]:
    """{name: bytes} of what txviz reads from a repo listing {name: bytes} (top-level files only): the
    config and tokenizer files, and the safetensors weights (the index and the shards it names, else
    model.safetensors, else every safetensors file) or else its one GGUF file."""
    top = {name: size for name, size in listed.items() if "/" not in name}
    safetensors = sorted(name for name in top if name.endswith(".safetensors"))
    ggufs = sorted(name for name in top if name.lower().endswith(".gguf"))
    if INDEX in top:
        index = json.loads(fetch_one(INDEX).read_text(encoding="utf-8"))
        shards = sorted(set((index.get("weight_map") or {}).values()))
        missing = [name for name in shards if name not in top]
        if not shards or missing:
            raise ModelLoadError(f"{repo}: {INDEX} names shards the repo lacks ({', '.join(missing[:3]) or 'none'})")
        weights = [INDEX, *shards]
    elif "model.safetensors" in top:
        weights = ["model.safetensors"]
    elif safetensors:
        weights = safetensors
    elif len(ggufs) == 1:
        return {ggufs[0]: top[ggufs[0]]}
    elif ggufs:
        raise ModelLoadError(f"{repo} holds {len(ggufs)} GGUF files ({', '.join(ggufs[:4])}…): txviz takes a repo "
                             "with one; download the one you want and give its path")
    else:
        pickles = sorted(name for name in top if name.lower().endswith(PICKLE_SUFFIXES))
        if pickles:
            raise ModelLoadError(f"{repo} holds only pickled weights ({', '.join(pickles[:3])}): refused, because "
                                 "unpickling can run arbitrary code; txviz fetches safetensors or GGUF only")
        raise ModelLoadError(f"{repo} has no safetensors or GGUF weights")
    if CONFIG not in top:
        raise ModelLoadError(f"{repo} has weights but no {CONFIG}")
    return {name: top[name] for name in [*SIDE_FILES, *weights] if name in top}


def memory_needed(repo: str, files: dict[str, int], fetch_one: Callable[[str], Path], dtype: torch.dtype) -> int:
    """Bytes the loaded model takes in ``dtype``: its parameters counted from config.json as the loader
    reads it (a config the loader refuses is refused now), or, for a GGUF file, from its size."""
    element = torch.finfo(dtype).bits // 8 if dtype.is_floating_point else 4
    if CONFIG not in files:  # a GGUF file: its parameters at no fewer than GGUF_BITS_FLOOR bits each
        return sum(files.values()) * 8 // GGUF_BITS_FLOOR * element
    from txviz.limits import current
    from txviz.loading.hf.config import config_from_dict, parse_config_json
    from txviz.model.counts import count_params

    raw = parse_config_json(fetch_one(CONFIG), max_bytes=current().max_config_bytes)[0]
    if raw.get("quantization_config"):
        raise ModelLoadError(f"{repo} is a quantized checkpoint; txviz loads unquantized safetensors weights")
    return count_params(config_from_dict(raw, name=repo, source=repo)) * element


def device_memory(device: torch.device) -> int:
    """Bytes free for a model on ``device`` now: CUDA's free memory, or the system's available memory."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_sizes(repo: str, download: int, memory: int, dtype: torch.dtype, device: torch.device,
                policy: HubPolicy) -> None:
    if download > policy.max_download_bytes:
        raise ModelLoadError(f"{repo}: {format_bytes(download)} to download, over the limit of "
                             f"{format_bytes(policy.max_download_bytes)} (TXVIZ_HUB_MAX_DOWNLOAD)")
    available = device_memory(device)
    limit = available if policy.max_memory_bytes is None else min(available, policy.max_memory_bytes)
    if memory > limit:
        where = "TXVIZ_HUB_MAX_MEMORY" if limit == policy.max_memory_bytes else f"available on {device}"
        raise ModelLoadError(f"{repo}: needs {format_bytes(memory)} of memory in {str(dtype).removeprefix('torch.')}, "
                             f"over the {format_bytes(limit)} {where}")


def on_this_thread(work: Callable[[Progress], object], report: Progress, poll_seconds: float = 0.2):
    """``work(relay)`` run in a helper thread while this thread passes on the latest progress it relayed:
    the client reports from its download threads, and a caller's ``report`` (a Streamlit bar, bound to
    the session's thread) must only be called on the caller's own thread."""
    latest: list[tuple[float, str] | None] = [None]  # one slot, replaced whole: no update is half-seen
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = work(lambda fraction, message: latest.__setitem__(0, (fraction, message)))
        except BaseException as error:  # noqa: BLE001 - raised again on the caller's thread
            outcome["error"] = error

    worker = threading.Thread(target=run, name="txviz-hub-download", daemon=True)
    worker.start()
    shown = None
    while shown is not latest[0] or worker.is_alive():
        worker.join(poll_seconds)
        if latest[0] is not shown:
            shown = latest[0]
            report(*shown)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def progress_bar(total: int, report: Progress, label: str):
    """A tqdm class for the client's snapshot_download that reports its byte count to ``report``; it
    prints nothing. The client gives the bytes of every file to one bar (unit "B", "Reconstructing…")."""
    from tqdm.auto import tqdm

    class Bar(tqdm):
        def __init__(self, *args, **kwargs):
            self.counts = kwargs.get("unit") == "B" and str(kwargs.get("desc", "")).startswith("Reconstructing")
            self.done = 0
            super().__init__(*args, **{**kwargs, "disable": True})

        def update(self, n=1):
            if self.counts and n:
                self.done += n
                report(min(self.done / total, 1.0) if total else 1.0,
                       f"{label}: {format_bytes(self.done)} of {format_bytes(total)}")

    return Bar


def _from_cache(hub_id: HubId) -> HubSnapshot:
    """The cached snapshot of the revision, if complete (HF_HUB_OFFLINE, or a pinned commit)."""
    folder = hub_cache_dir() / f"models--{hub_id.repo.replace('/', '--')}"
    ref = folder / "refs" / hub_id.revision
    commit = hub_id.revision if hub_id.pinned else (ref.read_text().strip() if ref.is_file() else None)
    if commit is None or not COMMIT.fullmatch(commit) or not (folder / "snapshots" / commit).is_dir():
        raise ModelLoadError(f"{hub_id} is not in the Hub cache ({hub_cache_dir()}) and HF_HUB_OFFLINE is set")
    snapshot = folder / "snapshots" / commit
    listed = _cached_listing(hub_id, commit, snapshot)
    files = choose_files(hub_id.repo, listed, lambda name: snapshot / name)
    return _complete(hub_id, commit, snapshot, files)


def _cached_listing(hub_id: HubId, commit: str, snapshot: Path) -> dict[str, int]:
    """{name: bytes} of the repo at ``commit`` as the client cached its listing when it downloaded; a
    snapshot written without one (by another tool) is judged by the files it holds."""
    from huggingface_hub import get_cached_repo_tree
    from huggingface_hub.errors import CachedRepoTreeNotFoundError

    try:
        return {f.path: f.size for f in get_cached_repo_tree(hub_id.repo, revision=commit, cache_dir=hub_cache_dir())}
    except CachedRepoTreeNotFoundError:
        return {p.name: p.stat().st_size for p in snapshot.iterdir() if p.is_file()}


def _complete(hub_id: HubId, commit: str, snapshot: Path, files: dict[str, int], *, fetched: int = 0,
              memory: int = 0) -> HubSnapshot:
    missing = [name for name, size in files.items()
               if not (snapshot / name).is_file() or (size and (snapshot / name).stat().st_size != size)]
    if missing:
        raise ModelLoadError(f"{hub_id.repo}@{commit[:12]} is incomplete in the cache (missing {', '.join(missing[:3])}); "
                             "run again online to finish the download")
    path = snapshot if CONFIG in files else snapshot / next(iter(files))
    return HubSnapshot(hub_id, commit, path, files, fetched, memory)


def load_hub_model(hub_id: str | HubId, *, device: torch.device | None = None, dtype: torch.dtype = torch.float32,
                   policy: HubPolicy | None = None, progress: Progress | None = None):
    """The LoadedModel of a Hub id: its snapshot loaded by the folder (or GGUF) loader, its source the id
    pinned to the commit, so that whoever reloads that source gets the same weights."""
    from dataclasses import replace

    from txviz.loading.gguf.loader import load_gguf
    from txviz.loading.hf.loader import load_hf_dir

    device = device or torch.device("cpu")
    snapshot = ensure_hub_model(hub_id, dtype=dtype, device=device, policy=policy, progress=progress)
    if snapshot.path.is_dir():  # the setting handed in, as load() hands it for a local directory
        from txviz.limits import current
        loaded = load_hf_dir(snapshot.path, device=device, dtype=dtype, max_config_bytes=current().max_config_bytes)
    else:
        loaded = load_gguf(snapshot.path, device=device, dtype=dtype)
    hub = {"repo": snapshot.id.repo, "revision": snapshot.id.revision, "commit": snapshot.commit,
           "path": str(snapshot.path), "files": snapshot.files}
    return replace(loaded, source=snapshot.pinned_id, metadata={**loaded.metadata, "hub": hub})
