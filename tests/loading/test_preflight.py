"""The discovery check (txviz.loading.preflight): each model file the app offers is judged by its
header alone, parsed in a capped child process. A broken file gets a one-line reason quickly and in
little memory; a good one passes; the verdict is kept per (path, size, mtime); a file that exhausts the
child's limits is broken for that reason, and condemns no other file checked with it."""

from __future__ import annotations

import json
import os
import shutil
import struct
import time
from pathlib import Path

import pytest

from tests.helpers.hf_reference import needs_transformers
from tests.helpers.hostile_gguf import patch_after, tiny_gguf, wrap_first_offset
from txviz.loading import isolated, load, preflight
from txviz.loading.zoo import SHIPPED_ZOO


@pytest.fixture(autouse=True)
def fresh_verdicts():
    preflight.forget()
    yield
    preflight.forget()


def hostile_ggufs(folder: Path) -> dict[str, Path]:
    """Small hostile GGUF files, each a good tiny one with a few bytes changed (or written so)."""
    cases = {name: tiny_gguf(folder / f"{name}.gguf") for name in
             ("array_2_62", "billion_layers", "head_dim_2_28", "offset_wraps")}
    patch_after(cases["array_2_62"], b"test.items", "<Q", 2 ** 62, skip=8)  # type ARRAY, item type, then the count
    patch_after(cases["billion_layers"], b"llama.block_count", "<I", 10 ** 9)
    patch_after(cases["head_dim_2_28"], b"llama.attention.key_length", "<I", 1 << 28)
    wrap_first_offset(cases["offset_wraps"])
    cases["truncated"] = tiny_gguf(folder / "truncated.gguf")
    cases["truncated"].write_bytes(cases["truncated"].read_bytes()[:-1000])
    return cases


EXPECTED = {"array_2_62": "not a readable GGUF file", "billion_layers": "n_layers=1,000,000,000 is beyond",
            "head_dim_2_28": "key/value sizes 268435456", "offset_wraps": "runs past the end",
            "truncated": "truncated or corrupt"}


def test_hostile_gguf_files_are_broken_with_the_reason_load_gives(tmp_path):
    cases = hostile_ggufs(tmp_path)
    good = tiny_gguf(tmp_path / "good.gguf")
    started = time.perf_counter()
    verdicts = preflight.problems([*cases.values(), good])
    assert time.perf_counter() - started < 20  # one child for all six (under load: ~1 s here)
    assert verdicts[str(good)] is None and load(good, device="cpu").config.n_layers == 2
    for name, path in cases.items():
        assert verdicts[str(path)] and EXPECTED[name] in verdicts[str(path)], (name, verdicts[str(path)])
        assert str(path) in verdicts[str(path)]


def test_a_string_where_the_token_list_belongs_is_broken(tmp_path, monkeypatch):
    import gguf

    monkeypatch.setattr(gguf.GGUFWriter, "add_token_list",
                        lambda self, tokens: self.add_string("tokenizer.ggml.tokens", "".join(tokens)))
    path = tiny_gguf(tmp_path / "tokens.gguf")
    assert "'tokenizer.ggml.tokens' must be a list of strings, got a string" in preflight.problem(path)


def _safetensors_with_header(directory: Path, header: dict, data: bytes) -> Path:
    raw = json.dumps(header).encode()
    (directory / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return directory


def _overlapping(header: dict) -> list[int]:
    """final_norm's span moved onto the embedding's first bytes, same length."""
    start, end = header["final_norm.weight"]["data_offsets"]
    embed_start = header["embed.weight"]["data_offsets"][0]
    return [embed_start, embed_start + end - start]


HOSTILE_HEADERS = {  # the reason each changed header must be refused with → the change
    "outside the file": lambda h: {**h, "embed.weight": {**h["embed.weight"], "data_offsets": [0, 2 ** 62]}},
    "no known dtype": lambda h: {**h, "embed.weight": {**h["embed.weight"], "dtype": "F99"}},
    "its shape": lambda h: {**h, "embed.weight": {**h["embed.weight"], "shape": [2 ** 40, 2 ** 40]}},
    "overlap": lambda h: {**h, "final_norm.weight": {**h["final_norm.weight"], "data_offsets": _overlapping(h)}},
}


def test_hostile_safetensors_headers_in_a_lab_directory_are_broken(tmp_path):
    """Each change in its own copy of a zoo directory, judged with an unchanged copy in one check (one
    child, as the sidebar judges what it lists; a child per case cost ~0.1 CPU s each, twice)."""
    unchanged = shutil.copytree(SHIPPED_ZOO / "base", tmp_path / "unchanged")
    directories = {reason: shutil.copytree(unchanged, tmp_path / f"case{i}") for i, reason in enumerate(HOSTILE_HEADERS)}
    for reason, directory in directories.items():
        raw = (directory / "model.safetensors").read_bytes()
        length = struct.unpack_from("<Q", raw)[0]
        header = json.loads(raw[8:8 + length])
        _safetensors_with_header(directory, HOSTILE_HEADERS[reason](header), raw[8 + length:])
    verdicts = preflight.problems([unchanged, *directories.values()])
    assert verdicts[str(unchanged)] is None
    for reason, directory in directories.items():
        verdict = verdicts[str(directory)]
        assert verdict and reason in verdict and str(directory) in verdict, (reason, verdict)


def test_a_header_length_past_the_file_and_a_lab_config_claiming_a_billion_layers(tmp_path):
    directory = shutil.copytree(SHIPPED_ZOO / "base", tmp_path / "base")
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "n_layers": 10 ** 9}))
    assert "n_layers=1,000,000,000 is beyond any real model" in preflight.problem(directory)
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "model.safetensors").write_bytes(struct.pack("<Q", 2 ** 60) + b"{}")
    assert "header claims" in preflight.problem(directory)


@needs_transformers
def test_hugging_face_directories_good_and_huge(tmp_path):
    from tests.helpers.tiny_hf import build, edit_config, save

    good = save(build("llama_gqa"), tmp_path / "good")
    huge = save(build("llama_gqa"), tmp_path / "huge")
    edit_config(huge, lambda config: {**config, "num_hidden_layers": 10 ** 9})
    verdicts = preflight.problems([good, huge])
    assert verdicts[str(good)] is None
    assert "beyond any real model" in verdicts[str(huge)]


def test_verdicts_are_kept_per_size_and_mtime(tmp_path, monkeypatch):
    path = tiny_gguf(tmp_path / "model.gguf")
    calls = []
    real = isolated.run_worker
    monkeypatch.setattr(preflight, "run_worker", lambda *a, **k: calls.append(a) or real(*a, **k))
    assert preflight.problem(path) is None and preflight.problem(path) is None
    assert len(calls) == 1
    patch_after(path, b"llama.block_count", "<I", 10 ** 9)
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10 ** 9))  # a new version of the file
    assert "beyond any real model" in preflight.problem(path)
    assert len(calls) == 2


def test_a_file_that_exhausts_the_child_is_broken_and_the_others_are_judged_alone(tmp_path, monkeypatch):
    good, slow = tiny_gguf(tmp_path / "good.gguf"), tiny_gguf(tmp_path / "slow.gguf")
    real = isolated.run_worker

    def worker(name, request, limits):  # the slow file takes longer than any limit, as a hostile one would
        if str(slow) in request["paths"]:
            return real(name, request, isolated.Limits(seconds=0.01, memory_bytes=limits.memory_bytes))
        return real(name, request, limits)

    monkeypatch.setattr(preflight, "run_worker", worker)
    verdicts = preflight.problems([good, slow])
    assert verdicts[str(good)] is None
    assert "could not be checked within the limits (stopped after 0.01 s)" in verdicts[str(slow)]


def test_a_pickle_or_a_folder_without_config_is_left_to_the_loader(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"\x80\x04pickle")
    (tmp_path / "folder").mkdir()
    assert preflight.problems([tmp_path / "weights.bin", tmp_path / "folder"]) == \
        {str(tmp_path / "weights.bin"): None, str(tmp_path / "folder"): None}


@pytest.mark.skipif(not (SHIPPED_ZOO / "alibi" / "config.json").is_file(), reason="the zoo is not trained")
def test_the_shipped_zoo_passes_in_one_child_quickly():
    directories = sorted(str(d) for d in SHIPPED_ZOO.iterdir() if (d / "config.json").is_file())
    started = time.perf_counter()
    assert preflight.problems(directories) == dict.fromkeys(directories)
    assert time.perf_counter() - started < 10


def test_a_check_in_progress_holds_up_only_those_who_need_that_file(tmp_path, monkeypatch):
    """One session checking a new (slow) file must not stall another's sidebar: a file checked earlier
    answers at once, the file in progress is reported as being checked (wait=False, the sidebar) or
    waited for (wait=True, a load), and the check runs once. The check itself passes every file here
    without a child (its verdicts are the other tests'): what is under test is who waits for it."""
    import threading

    old, new = tiny_gguf(tmp_path / "old.gguf"), tiny_gguf(tmp_path / "new.gguf")
    monkeypatch.setattr(preflight, "_check", dict.fromkeys)  # {path: None}: every file passes
    assert preflight.problems([old]) == {str(old): None}
    release, calls = threading.Event(), []

    def slow_check(paths):
        calls.append(paths)
        assert release.wait(30)
        return dict.fromkeys(paths)

    monkeypatch.setattr(preflight, "_check", slow_check)
    first = threading.Thread(target=preflight.problems, args=([new],))
    first.start()
    while not calls:
        time.sleep(0.01)
    started = time.perf_counter()
    assert preflight.problems([old, new], wait=False) == {str(old): None, str(new): preflight.CHECKING}
    assert time.perf_counter() - started < 1
    waiting = {}
    second = threading.Thread(target=lambda: waiting.update(preflight.problems([new])))
    second.start()
    time.sleep(0.2)
    assert not waiting  # still waiting for the first session's check
    release.set()
    first.join(30), second.join(30)
    assert waiting == {str(new): None} and len(calls) == 1
