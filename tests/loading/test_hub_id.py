"""Hub ids and the operator's policy: parsing, telling an id from a path, and TXVIZ_HUB."""

from __future__ import annotations

import pytest

from txviz.loading.errors import ModelLoadError
from txviz.loading.hub_id import HubId, looks_like_hub_id, parse_hub_id
from txviz.loading.hub_policy import DEFAULT_MAX_DOWNLOAD, HubPolicy


@pytest.mark.parametrize("text, repo, revision", [
    ("HuggingFaceTB/SmolLM2-135M", "HuggingFaceTB/SmolLM2-135M", "main"),
    ("Qwen/Qwen2.5-0.5B@v1.0", "Qwen/Qwen2.5-0.5B", "v1.0"),
    ("org/name@refs/pr/3", "org/name", "refs/pr/3"),
    (" org/name@" + "a" * 40 + " ", "org/name", "a" * 40),
])
def test_parse(text, repo, revision):
    parsed = parse_hub_id(text)
    assert (parsed.repo, parsed.revision) == (repo, revision)
    assert parsed.pinned == (len(revision) == 40)


@pytest.mark.parametrize("text", ["name", "org/name/extra", "org/--bad", "org/a..b", "org/name@", "org/name@../x",
                                  "/abs/path", "org/name@main/", "-org/name"])
def test_parse_refuses(text):
    with pytest.raises(ModelLoadError, match="not a Hub id"):
        parse_hub_id(text)


def test_str_keeps_the_revision():
    assert str(HubId("org/name")) == "org/name" and str(HubId("org/name", "dev")) == "org/name@dev"


def test_an_existing_path_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert looks_like_hub_id("org/name")
    (tmp_path / "org" / "name").mkdir(parents=True)
    assert not looks_like_hub_id("org/name")
    assert not looks_like_hub_id("models/tiny.gguf") and not looks_like_hub_id("./org/other")


@pytest.mark.parametrize("switch, shared, allowed, refused", [
    (None, False, ["any/repo"], []),
    (None, True, [], ["any/repo"]),
    ("all", True, ["any/repo"], []),
    ("off", False, [], ["any/repo"]),
    ("HuggingFaceTB/*, qwen/Qwen3-0.6B", True, ["huggingfacetb/SmolLM2-135M", "Qwen/Qwen3-0.6B"],
     ["Qwen/Qwen3-8B", "evil/HuggingFaceTB"]),
])
def test_policy(switch, shared, allowed, refused):
    policy = HubPolicy.from_env({} if switch is None else {"TXVIZ_HUB": switch}, shared=shared)
    assert all(policy.allows(repo) for repo in allowed) and not any(policy.allows(repo) for repo in refused)
    assert policy.enabled == bool(allowed)


def test_policy_limits():
    assert HubPolicy.from_env({}).max_download_bytes == DEFAULT_MAX_DOWNLOAD
    policy = HubPolicy.from_env({"TXVIZ_HUB_MAX_DOWNLOAD": "2MiB", "TXVIZ_HUB_MAX_MEMORY": "1GB"})
    assert (policy.max_download_bytes, policy.max_memory_bytes) == (2 << 20, 10**9)
