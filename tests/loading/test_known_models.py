"""The known models' table (txviz.loading.sources.KNOWN_MODELS) and their fetch: chunk wheels pinned by
version and sha256, fetched by the real pip from a local folder of tiny wheels built here (no network),
their members joined in order into one .gguf whose sha256 is checked, atomically: a corrupt chunk, a
wrong join or a killed fetch leaves nothing in the cache. The real pip runs where pip is under test (the
first wheel of a fetch end to end, a tampered chunk); the tests of txviz's own checks copy the wheels
instead (tests/helpers/local_wheels.py)."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers.local_wheels import REAL_PIP_GROUP, copy_from_links
from txviz.loading import fetch
from txviz.loading.fetch import ModelFetchError
from txviz.loading.sources import DEFAULT_MODEL_NAME, KNOWN_MODELS, KnownModel, PinnedWheel

SHA256 = re.compile(r"[0-9a-f]{64}")
CHUNKS = [b"GGUF" + bytes(range(256)) * 40, bytes(range(255, -1, -1)) * 50, b"tail of the model"]


# ---- the table ----------------------------------------------------------------------------------
@pytest.mark.parametrize("model", KNOWN_MODELS.values(), ids=list(KNOWN_MODELS))
def test_each_entry_is_pinned_and_whole(model: KnownModel):
    assert KNOWN_MODELS[model.name] is model and re.fullmatch(r"[a-z0-9][a-z0-9.-]+", model.name)
    assert SHA256.fullmatch(model.sha256) and model.size > 0 and model.filename.endswith(".gguf")
    assert model.wheels and model.license and model.homepage.startswith("https://")
    for wheel in model.wheels:
        assert SHA256.fullmatch(wheel.sha256) and wheel.size > 0
        assert re.fullmatch(r"\d+(\.\d+)*", wheel.version)  # an exact version, never a range
        assert "/" not in wheel.member
    members = [wheel.member for wheel in model.wheels]
    assert len(set(members)) == len(members) and members == sorted(members)  # parts 00, 01, … in order
    assert model.size > 0.8 * model.download_bytes  # the members are most of what is downloaded


def test_names_files_and_hashes_are_distinct_and_the_default_is_listed():
    models = list(KNOWN_MODELS.values())
    for field in ("name", "display_name", "filename", "sha256"):
        assert len({getattr(m, field) for m in models}) == len(models), field
    assert len({w.sha256 for m in models for w in m.wheels}) == sum(len(m.wheels) for m in models)
    assert DEFAULT_MODEL_NAME in KNOWN_MODELS and fetch.DEFAULT_GGUF_NAME == KNOWN_MODELS[DEFAULT_MODEL_NAME].filename
    assert len(KNOWN_MODELS["gemma3-270m"].wheels) == 4


# ---- fetching, with the real pip from a local folder -------------------------------------------
def build_wheel(folder: Path, package: str, version: str, members: dict[str, bytes]) -> Path:
    """A minimal valid wheel (METADATA, WHEEL, RECORD) holding ``members``."""
    module, info = package.replace("-", "_"), f"{package.replace('-', '_')}-{version}.dist-info"
    path = folder / f"{module}-{version}-py3-none-any.whl"
    files = {f"{module}/__init__.py": b"", **{f"{module}/data/{n}": d for n, d in members.items()},
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr(f"{info}/RECORD", "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n")
    return path


def sha256_of(path_or_bytes) -> str:
    data = path_or_bytes if isinstance(path_or_bytes, bytes) else Path(path_or_bytes).read_bytes()
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TXVIZ_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TXVIZ_DEFAULT_GGUF", raising=False)
    return tmp_path / "home"


@pytest.fixture
def chunked(tmp_path, monkeypatch) -> KnownModel:
    """A model in three chunk wheels in a local folder pip is pointed at (and nowhere else)."""
    links = tmp_path / "links"
    links.mkdir()
    wheels = []
    for index, chunk in enumerate(CHUNKS):
        package, member = f"txviz-test-chunk{index + 1}", f"model.gguf.part{index:02d}"
        path = build_wheel(links, package, "1.0.0", {member: chunk})
        wheels.append(PinnedWheel(package, "1.0.0", sha256_of(path), path.stat().st_size, member))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    joined = b"".join(CHUNKS)
    return KnownModel("test-chunked", "Test model", "test-chunked.gguf", sha256_of(joined), len(joined),
                      tuple(wheels), "none", "https://example.invalid")


@pytest.fixture
def without_pip(monkeypatch):
    """The pinned wheels copied from the local folder (hashes checked) instead of a pip run each."""
    monkeypatch.setattr(fetch.pip_download, "download", copy_from_links)


@pytest.fixture
def pip_for_the_first_wheel(monkeypatch) -> list[str]:
    """The real pip fetches the first chunk wheel, the copy the rest: each pip run costs ~0.8 CPU s, and a
    second and third run would say nothing more about pip. Returns the requirements pip was given."""
    real, given = fetch.pip_download.download, []

    def download(requirement, directory, **kwargs):
        if given:
            return copy_from_links(requirement, directory, **kwargs)
        given.append(requirement)
        return real(requirement, directory, **kwargs)

    monkeypatch.setattr(fetch.pip_download, "download", download)
    return given


@pytest.mark.xdist_group(REAL_PIP_GROUP)
def test_the_chunks_are_fetched_checked_and_joined_in_order(home, chunked, pip_for_the_first_wheel):
    reports = []
    path = fetch.ensure(chunked, lambda f, m: reports.append((f, m)))
    assert path == home / "test-chunked.gguf" and path.read_bytes() == b"".join(CHUNKS)
    assert os.listdir(home) == ["test-chunked.gguf"]  # no scratch folder, no partial file
    fractions = [f for f, _ in reports]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and all(0 <= f <= 1 for f in fractions)
    assert any("part 3 of 3" in m for _, m in reports)
    assert fetch.is_fetched(chunked)
    assert [r.split(" ")[0] for r in pip_for_the_first_wheel] == ["txviz-test-chunk1==1.0.0"]
    os.environ["PIP_FIND_LINKS"] = str(home / "nowhere")  # restored by monkeypatch: a second fetch would fail
    assert fetch.ensure(chunked) == path


@pytest.mark.xdist_group(REAL_PIP_GROUP)
def test_a_chunk_that_is_not_the_pinned_one_is_refused_by_pip(home, chunked, tmp_path):
    links = Path(os.environ["PIP_FIND_LINKS"])
    build_wheel(links, "txviz-test-chunk1", "1.0.0", {"model.gguf.part00": b"tampered"})  # same file name
    with pytest.raises(ModelFetchError, match="(?is)txviz-test-chunk1==1.0.0.*DO NOT MATCH THE HASHES"):
        fetch.ensure(chunked)
    assert not home.exists() or os.listdir(home) == []


def test_a_corrupt_download_is_caught_by_its_own_hash_check(home, chunked, monkeypatch):
    real = copy_from_links  # the hash was checked on download, then the file changed: fetch's own check catches it

    def download(requirement, directory, **kwargs):  # pip got a wheel that is not the pinned one
        output = real(requirement, directory, **kwargs)
        for wheel in directory.glob("txviz_test_chunk3-*.whl"):
            wheel.write_bytes(wheel.read_bytes()[:-20] + b"\0" * 20)
        return output

    monkeypatch.setattr(fetch.pip_download, "download", download)
    with pytest.raises(ModelFetchError, match="txviz_test_chunk3-1.0.0-py3-none-any.whl has sha256 .* the pinned"):
        fetch.ensure(chunked)
    assert os.listdir(home) == []


def test_members_that_do_not_join_to_the_pinned_file_leave_nothing(home, chunked, without_pip):
    shuffled = replace(chunked, wheels=(chunked.wheels[1], chunked.wheels[0], chunked.wheels[2]))
    with pytest.raises(ModelFetchError, match="joined test-chunked.gguf has sha256"):
        fetch.ensure(shuffled)
    assert os.listdir(home) == []


def test_a_killed_fetch_leaves_no_model_and_the_next_fetch_sweeps_its_leftovers(home, chunked, without_pip):
    """SIGKILL while the second member is being joined: no cleanup runs, yet the cache holds no .gguf."""
    assert killed_status(lambda: fetch.ensure(chunked), dies_at="part01") == signal.SIGKILL
    left = sorted(p.name for p in home.iterdir())
    assert not (home / "test-chunked.gguf").exists()
    assert any(n.startswith(".fetch-") for n in left) and any(".partial-" in n for n in left), left
    old = time.time() - 2 * fetch.LEFTOVER_AGE_S
    for entry in home.iterdir():
        os.utime(entry, (old, old))
    fetch.ensure(chunked)
    assert os.listdir(home) == ["test-chunked.gguf"]


def killed_status(work, dies_at: str, timeout_s: float = 120) -> int:
    """Run ``work`` in a forked copy of this process that SIGKILLs itself when a zip member whose name ends
    with ``dies_at`` is opened; the signal that ended it (0: it ended without one). A fork, not a fresh
    interpreter: one importing torch and txviz to run the same fetch cost ~1.7 CPU s (measured 2026-12-02)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest, whatever happens
        try:
            opened = zipfile.ZipFile.open

            def open_then_die(self, name, *args, **kwargs):
                if str(getattr(name, "filename", name)).endswith(dies_at):
                    os.kill(os.getpid(), signal.SIGKILL)
                return opened(self, name, *args, **kwargs)

            zipfile.ZipFile.open = open_then_die
            work()
        finally:
            os._exit(1)
    deadline = time.monotonic() + timeout_s
    while (done := os.waitpid(pid, os.WNOHANG)) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"the forked fetch was still running after {timeout_s} s")
        time.sleep(0.01)
    return os.WTERMSIG(done[1]) if os.WIFSIGNALED(done[1]) else 0


def test_fresh_leftovers_of_a_fetch_that_may_be_running_are_kept(home):
    home.mkdir()
    (home / ".fetch-abc").mkdir()
    (home / ".model.gguf.partial-123").write_bytes(b"x")
    fetch.sweep_leftovers(home)
    assert sorted(os.listdir(home)) == [".fetch-abc", ".model.gguf.partial-123"]
    fetch.sweep_leftovers(home, older_than_s=-1)
    assert os.listdir(home) == []


def test_a_member_missing_from_its_wheel_is_named(home, chunked, without_pip):
    wrong = replace(chunked, wheels=(replace(chunked.wheels[0], member="other.part00"), *chunked.wheels[1:]))
    with pytest.raises(ModelFetchError, match="holds 0 files named other.part00"):
        fetch.ensure(wrong)
    assert os.listdir(home) == []
