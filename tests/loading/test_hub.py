"""Models from the Hub through huggingface_hub's own client, against a Hub on 127.0.0.1
(tests/helpers/hub_server.py) serving tiny checkpoints built here: download, cache reuse, offline mode,
revision pinning, refusals (pickles, sizes, gated and missing repos, the operator's policy) and a download
killed mid-way. HF_ENDPOINT always points at the local server (or at a closed port): no test reaches the
network."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from tests.helpers.hub_server import HubServer
from tests.helpers.tiny_hf import build, save
from txviz.loading.errors import ModelLoadError
from txviz.loading.hf.loader import load_hf_dir
from txviz.loading.hub import ensure_hub_model
from txviz.loading.hub_policy import HubPolicy

pytestmark = pytest.mark.transformers
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Two tiny llama checkpoints of the same shape with different weights."""
    root = tmp_path_factory.mktemp("hub_checkpoints")
    return save(build("llama_gqa", seed=0), root / "v1"), save(build("llama_gqa", seed=1), root / "v2")


@pytest.fixture
def hub(tmp_path, monkeypatch):
    for name in ("HF_HUB_OFFLINE", "HF_HUB_CACHE", "HF_TOKEN", "HF_HUB_ENABLE_HF_TRANSFER", "TXVIZ_HUB",
                 "TXVIZ_HUB_MAX_DOWNLOAD", "TXVIZ_HUB_MAX_MEMORY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    with HubServer() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


def _logits(path) -> torch.Tensor:
    loaded = load_hf_dir(path)
    return loaded.model(torch.arange(12)[None] % loaded.config.vocab_size)


def _cached_files(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "hub").rglob("*") if p.is_file())


def test_download_then_load(hub, checkpoints, tmp_path):
    commit = hub.publish("org/tiny", checkpoints[0])
    reports, threads = [], set()

    def report(fraction, message):
        reports.append((fraction, message))
        threads.add(threading.get_ident())

    snapshot = ensure_hub_model("org/tiny", progress=report)
    assert threads == {threading.get_ident()}  # a Streamlit bar can only be drawn from the session's thread
    assert snapshot.commit == commit and snapshot.pinned_id == f"org/tiny@{commit}"
    assert snapshot.path == tmp_path / "hf_home" / "hub" / "models--org--tiny" / "snapshots" / commit
    assert set(snapshot.files) == {"config.json", "generation_config.json", "model.safetensors"}
    torch.testing.assert_close(_logits(snapshot.path), _logits(checkpoints[0]), rtol=0, atol=0)
    assert max(fraction for fraction, _ in reports) == 1.0
    fetched = [message for _, message in reports if message.startswith("Downloading")]
    assert fetched and fetched[-1].endswith(("of " + fetched[-1].split(" of ")[-1]))  # the bar ends full
    assert reports[-2][0] == 1.0 and snapshot.fetched_bytes == (checkpoints[0] / "model.safetensors").stat().st_size \
        + (checkpoints[0] / "generation_config.json").stat().st_size


def test_cache_is_reused(hub, checkpoints):
    commit = hub.publish("org/tiny", checkpoints[0])
    ensure_hub_model("org/tiny")
    again = ensure_hub_model("org/tiny")
    assert hub.fetched("model.safetensors") == 1 and again.fetched_bytes == 0
    hub.requests.clear()
    assert ensure_hub_model(f"org/tiny@{commit}").commit == commit
    assert hub.requests == []  # a pinned commit complete in the cache asks the Hub nothing


def test_offline_uses_the_cache_only(hub, checkpoints, monkeypatch):
    hub.publish("org/tiny", checkpoints[0])
    first = ensure_hub_model("org/tiny")
    hub.requests.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    assert ensure_hub_model("org/tiny").path == first.path and hub.requests == []
    with pytest.raises(ModelLoadError, match="org/other is not in the Hub cache .* HF_HUB_OFFLINE"):
        ensure_hub_model("org/other")


def test_revision_pinning(hub, checkpoints):
    old = hub.publish("org/tiny", checkpoints[0])
    new = hub.publish("org/tiny", checkpoints[1])
    assert ensure_hub_model("org/tiny").commit == new
    pinned = ensure_hub_model(f"org/tiny@{old}")
    torch.testing.assert_close(_logits(pinned.path), _logits(checkpoints[0]), rtol=0, atol=0)
    torch.testing.assert_close(_logits(ensure_hub_model("org/tiny").path), _logits(checkpoints[1]), rtol=0, atol=0)
    hub.publish("org/tiny", checkpoints[0], branch="dev")
    assert ensure_hub_model("org/tiny@dev").commit not in (old, new)


def test_pickle_only_repo_is_refused_by_name(hub, checkpoints):
    hub.publish("org/pickled", {"config.json": (checkpoints[0] / "config.json").read_bytes(),
                                "pytorch_model.bin": b"\x80\x04not to be unpickled"})
    with pytest.raises(ModelLoadError, match=r"org/pickled holds only pickled weights \(pytorch_model.bin\)"):
        ensure_hub_model("org/pickled")
    assert not any(path.endswith(".bin") for _, path in hub.requests)


def test_pickles_beside_safetensors_are_not_fetched(hub, checkpoints):
    files = {p.name: p.read_bytes() for p in checkpoints[0].iterdir()}
    hub.publish("org/both", {**files, "pytorch_model.bin": b"\x80\x04pickle", "training_args.pt": b"x"})
    snapshot = ensure_hub_model("org/both")
    assert not any(path.endswith((".bin", ".pt")) for _, path in hub.requests)
    assert not list(snapshot.path.glob("*.bin"))


def test_size_refusals_give_both_numbers_before_any_weights(hub, checkpoints, tmp_path, monkeypatch):
    hub.publish("org/tiny", checkpoints[0])
    monkeypatch.setenv("TXVIZ_HUB_MAX_DOWNLOAD", "100KiB")
    with pytest.raises(ModelLoadError, match=r"org/tiny: 323\.\d KiB to download, over the limit of 100\.0 KiB"):
        ensure_hub_model("org/tiny")
    monkeypatch.delenv("TXVIZ_HUB_MAX_DOWNLOAD")
    monkeypatch.setenv("TXVIZ_HUB_MAX_MEMORY", "200KiB")
    with pytest.raises(ModelLoadError, match=r"needs 321\.\d KiB of memory in float32, over the 200\.0 KiB"):
        ensure_hub_model("org/tiny")
    assert hub.fetched("model.safetensors") == 0 and "model.safetensors" not in _cached_files(tmp_path / "hf_home")
    monkeypatch.setenv("TXVIZ_HUB_MAX_MEMORY", "400KiB")
    assert ensure_hub_model("org/tiny").memory_bytes == load_hf_dir(checkpoints[0]).n_params * 4


@pytest.mark.parametrize("repo, setup, reason", [
    ("org/gated", lambda hub, files: hub.gate("org/gated"), "org/gated is gated: accept its terms"),
    ("org/missing", lambda hub, files: None, "org/missing: no such model on the Hub"),
    ("org/tiny@nope", lambda hub, files: hub.publish("org/tiny", files), "org/tiny has no revision 'nope'"),
])
def test_one_line_reasons(hub, checkpoints, repo, setup, reason):
    setup(hub, checkpoints[0])
    with pytest.raises(ModelLoadError, match=reason) as error:
        ensure_hub_model(repo)
    assert "\n" not in str(error.value)


def test_unreachable_hub(hub, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(ModelLoadError, match="org/tiny: cannot reach the Hub"):
        ensure_hub_model("org/tiny")


def test_policy_refuses_before_asking(hub, checkpoints):
    hub.publish("org/tiny", checkpoints[0])
    with pytest.raises(ModelLoadError, match="Hub ids are off here.*TXVIZ_HUB"):
        ensure_hub_model("org/tiny", policy=HubPolicy.from_env({}, shared=True))
    with pytest.raises(ModelLoadError, match="org/tiny is not among the Hub repos allowed here"):
        ensure_hub_model("org/tiny", policy=HubPolicy.from_env({"TXVIZ_HUB": "other/*"}, shared=True))
    assert hub.requests == []
    assert ensure_hub_model("org/tiny", policy=HubPolicy.from_env({"TXVIZ_HUB": "org/*"}, shared=True)).commit


KILLED = """
import sys
from txviz.loading.hub import ensure_hub_model
ensure_hub_model("org/tiny")
"""


def test_download_killed_mid_way_leaves_nothing_that_loads(hub, checkpoints, monkeypatch):
    commit = hub.publish("org/tiny", checkpoints[0])
    hub.stall_after("model.safetensors", 1000)
    child = subprocess.Popen([sys.executable, "-c", KILLED], cwd=ROOT, env=dict(os.environ),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert hub.stalled.wait(120), "the download never started"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        hub.release()
    snapshot = Path(os.environ["HF_HOME"]) / "hub" / "models--org--tiny" / "snapshots" / commit
    assert (snapshot / "config.json").is_file() and not (snapshot / "model.safetensors").exists()
    with pytest.raises(ModelLoadError):
        load_hf_dir(snapshot)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match=r"incomplete in the cache \(missing .*model.safetensors\)"):
        ensure_hub_model("org/tiny")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    done = ensure_hub_model("org/tiny")  # online again: the download is finished
    torch.testing.assert_close(_logits(done.path), _logits(checkpoints[0]), rtol=0, atol=0)


def test_load_and_the_command_line_take_a_hub_id(hub, checkpoints, capsys):
    import json

    from txviz.cli import main
    from txviz.loading import load

    commit = hub.publish("org/tiny", checkpoints[0])
    loaded = load("org/tiny")
    assert loaded.source == f"org/tiny@{commit}" and loaded.metadata["hub"]["commit"] == commit
    assert loaded.n_params == load_hf_dir(checkpoints[0]).n_params
    hub.publish("org/tiny", checkpoints[1])  # main moves on; the pinned source still names the first weights
    torch.testing.assert_close(load(loaded.source).model(torch.arange(5)[None]), loaded.model(torch.arange(5)[None]))
    assert main(["info", "--model", "org/tiny", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["source"].startswith("org/tiny@") and json.loads(out)["source"] != loaded.source
    assert main(["info", "--model", "org/tiny"]) == 0
    assert "org/tiny@" in capsys.readouterr().out


def test_a_repo_of_one_gguf_loads_it_and_several_are_named(hub, tmp_path):
    from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf
    from txviz.loading import load
    from txviz.loading.gguf.loader import load_gguf

    config = tiny()
    gguf_file = write_gguf(tmp_path / "tiny.Q8.gguf", config, weights_of(config))
    commit = hub.publish("org/tiny-gguf", {"README.md": b"# tiny", "tiny.Q8.gguf": gguf_file.read_bytes()})
    loaded = load("org/tiny-gguf")
    assert loaded.format == "gguf" and loaded.source == f"org/tiny-gguf@{commit}"
    ids = torch.arange(6)[None]
    torch.testing.assert_close(loaded.model(ids), load_gguf(gguf_file).model(ids), rtol=0, atol=0)
    assert not any(path.endswith("README.md") for _, path in hub.requests)
    hub.publish("org/many-gguf", {"a.Q4_K_M.gguf": b"x", "a.Q8_0.gguf": b"y"})
    with pytest.raises(ModelLoadError, match=r"org/many-gguf holds 2 GGUF files \(a.Q4_K_M.gguf, a.Q8_0.gguf"):
        ensure_hub_model("org/many-gguf")


def test_a_hub_model_is_named_by_its_repo_and_short_commit(hub, checkpoints):
    """The sidebar's and ``txviz info``'s name: the repo with its commit shortened as the download's messages
    write it, not the snapshot's last path part (``tiny@`` and 40 hex digits, without the organisation)."""
    from txviz.loading import load
    from txviz.loading.display_name import display_name

    commit = hub.publish("org/tiny", checkpoints[0])
    assert display_name(load("org/tiny")) == f"org/tiny@{commit[:12]}"
