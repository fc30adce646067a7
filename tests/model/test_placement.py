"""A Decoder spread over devices with accelerate (txviz.model.placement) computes what it computes on one.

This machine has no second accelerator, so the split is over what exists: blocks run on the CPU while
others are offloaded to disk (weights on the meta device, read back for each forward), and blocks that
run on the meta device itself, where any tensor left on the CPU (a RoPE table, a mask, a KV cache)
raises. The two-GPU test runs where there are two GPUs.
"""

from __future__ import annotations

import json
import sys

import pytest
import torch

from tests.helpers.tiny import VARIANTS, random_decoder, random_ids, tiny_config
from txviz.generate import Sampling, generate
from txviz.model import KVCache
from txviz.model.placement import PlacementError, dispatch, layer_devices, offloaded
from txviz.capture.trace import trace

accelerate = pytest.importorskip("accelerate")

CPU, META = torch.device("cpu"), torch.device("meta")
CAPTURES = ("attn_probs", "q_rot", "k_rot", "resid", "head_summaries", "logits")
SPLIT_VARIANTS = ["mha", "sliding_window", "alibi", "learned", "moe"]


def pair(variant: str, **overrides):
    """The same random model twice: one to keep whole, one to split."""
    config = tiny_config(**{**VARIANTS[variant], "n_layers": 3, **overrides})
    return config, random_decoder(config), random_decoder(config)


def cpu_disk_map(config) -> dict[str, str]:
    """Layer 0 runs on the CPU; the rest is on disk, but for a tied embedding (the head reuses it)."""
    device_map = {"embed": "cpu" if config.tie_embeddings else "disk", "layers.0": "cpu", "layers.1": "disk",
                  "layers.2": "disk", "final_norm": "disk"}
    if config.positions == "learned":
        device_map["positions"] = "disk"
    if not config.tie_embeddings:
        device_map["lm_head"] = "disk"
    return device_map


@pytest.mark.parametrize("variant", SPLIT_VARIANTS)
def test_offloaded_split_gives_the_same_logits_and_captures(variant, tmp_path):
    config, whole, split = pair(variant)
    dispatch(split, cpu_disk_map(config), offload_dir=tmp_path)
    assert split.layers[1].attn.q_proj.weight.device == META  # really offloaded, not a copy on the CPU
    assert split.lm_head is None or split.lm_head.weight.device == META
    ids = random_ids(config, 12, batch=2)
    with torch.inference_mode():
        torch.testing.assert_close(split(ids), whole(ids), rtol=0, atol=0)
    expected, got = trace(whole, ids[:1], CAPTURES), trace(split, ids[:1], CAPTURES)
    assert sorted(got.data) == sorted(expected.data)
    for name in expected.data:
        assert got[name].device == CPU, name
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=0, equal_nan=True, msg=name)
    torch.testing.assert_close(got.attn(layer=2, head=1), expected.attn(layer=2, head=1), rtol=0, atol=0)


def test_captures_reach_the_cpu_as_each_layer_offers_them(tmp_path):
    """When layer 2 starts, layers 0 and 1 have already left their captures on the CPU: nothing waits
    on the device that ran them until the end of the pass."""
    config, _, split = pair("gqa")
    dispatch(split, cpu_disk_map(config), offload_dir=tmp_path)
    seen = []

    def before_layer_2(module, args):
        stacks = args[3]._stacks  # the LayerRecorder handed to the block (white box: the recorder's storage)
        seen.extend((name, list(stack.filled), stack.tensor.device) for name, stack in sorted(stacks.items()))

    handle = split.layers[2].register_forward_pre_hook(before_layer_2)
    try:
        trace(split, random_ids(config, 8), ("q_rot", "attn_probs"))
    finally:
        handle.remove()
    assert seen == [(name, [True, True, False], CPU) for name in ("attn_probs", "q_rot")]


@pytest.mark.parametrize("variant", ["mha", "sliding_window", "learned"])
def test_offloaded_split_generates_the_same_tokens(variant, tmp_path):
    config, whole, split = pair(variant, max_seq_len=32)  # the window (5) is passed: the ring buffer wraps
    dispatch(split, cpu_disk_map(config), offload_dir=tmp_path)
    prompt = random_ids(config, 6, seed=1)[0]
    for sampling in (Sampling(), Sampling(temperature=1.0, top_k=20, seed=3)):
        expected = generate(whole, prompt, 12, sampling=sampling)
        got = generate(split, prompt, 12, sampling=sampling)
        assert got.new_ids == expected.new_ids
        assert got.cache_capacity_bytes == expected.cache_capacity_bytes


@pytest.mark.parametrize("first_on_meta", [0, 1])
@pytest.mark.parametrize("variant", ["mha", "sliding_window", "alibi", "yarn"])
def test_layers_on_another_device_get_their_tables_mask_and_cache_there(variant, first_on_meta):
    """The embedding runs on the CPU, layers from ``first_on_meta`` on and the head on the meta device:
    any position table, mask or cache slice a meta layer got from the CPU would raise (meta and CPU
    tensors do not mix)."""
    config, whole, split = pair(variant, n_layers=2, tie_embeddings=False)
    devices = [CPU if i < first_on_meta else META for i in range(config.n_layers)]
    device_map = {"embed": "cpu", **{f"layers.{i}": d.type for i, d in enumerate(devices)},
                  "final_norm": "meta", "lm_head": "meta"}
    accelerate.dispatch_model(split, device_map, main_device="cpu")
    accelerate.hooks.remove_hook_from_module(split)  # the logits stay on meta: there is nothing to copy back
    assert layer_devices(split) == devices
    ids = random_ids(config, 10)
    with torch.inference_mode():
        logits = split(ids)
    assert logits.device == META and logits.shape == (1, 10, config.vocab_size)

    on_cpu = list(range(first_on_meta))  # meta tensors hold no data to capture
    if on_cpu:
        capture = ("q_rot", "k_rot", "attn_probs", "attn_out")
        expected, got = trace(whole, ids, capture, layers=on_cpu), trace(split, ids, capture, layers=on_cpu)
        for name in capture:
            assert got[name].device == CPU
            torch.testing.assert_close(got[name], expected[name], rtol=0, atol=0, msg=name)

    if first_on_meta == 0 or config.sliding_window is not None:
        return  # meta tensors have no values: key positions read from layer 0's cache, or the ring
        # buffer's filled slots, cannot be known (the two-GPU test covers those)
    cache, reference = KVCache(config, 16, device=layer_devices(split)), KVCache(config, 16)
    with torch.inference_mode():
        for chunk in (ids[:, :8], ids[:, 8:9], ids[:, 9:10]):  # prefill, then decode steps after the cache
            assert split(chunk, cache=cache).device == META
            whole(chunk, cache=reference)
    assert [layer.k.device for layer in cache.layers] == devices
    for i in on_cpu:
        torch.testing.assert_close(cache.layers[i].k, reference.layers[i].k, rtol=0, atol=0)
    assert cache.seq_len == reference.seq_len == 10


def test_a_strategy_with_a_memory_budget_offloads_what_does_not_fit(tmp_path):
    config, whole, split = pair("mha", n_layers=4)
    block_bytes = sum(p.numel() * p.element_size() for p in whole.layers[0].parameters())
    embed_bytes = whole.embed.weight.numel() * 4
    dispatch(split, "sequential", max_memory={"cpu": embed_bytes + 2 * block_bytes}, offload_dir=tmp_path)
    on_disk = offloaded(split.hf_device_map)
    assert on_disk and "embed" not in on_disk  # some parts went to disk, the first ones stayed
    ids = random_ids(config, 9)
    with torch.inference_mode():
        torch.testing.assert_close(split(ids), whole(ids), rtol=0, atol=0)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
@pytest.mark.parametrize("variant", ["gqa", "sliding_window", "alibi", "learned"])
def test_split_over_two_gpus(variant):
    config, whole, split = pair(variant, n_layers=4)
    whole = whole.to("cuda:0")
    # the hidden states go 0 → 1 → 0 → 1; an untied head stays in CPU RAM and runs on GPU 0
    device_map = {"embed": 0, "positions": 1, "layers.0": 1, "layers.1": 1, "layers.2": 0, "layers.3": 0,
                  "final_norm": 1, "lm_head": "cpu"}
    if config.positions != "learned":
        del device_map["positions"]
    if config.tie_embeddings:
        del device_map["lm_head"]
    dispatch(split, device_map)
    assert layer_devices(split) == [torch.device("cuda", i) for i in (1, 1, 0, 0)]
    assert split.layers[0].attn.q_proj.weight.device == torch.device("cuda", 1)
    assert split.lm_head is None or split.lm_head.weight.device == META
    ids = random_ids(config, 12)
    with torch.inference_mode():
        logits = split(ids)
        assert logits.device == CPU  # back where the ids came from
        torch.testing.assert_close(logits, whole(ids).cpu())
    expected, got = trace(whole, ids, CAPTURES), trace(split, ids, CAPTURES)
    for name in expected.data:
        assert got[name].device == CPU, name
        torch.testing.assert_close(got[name], expected[name], equal_nan=True, msg=name)
    prompt = random_ids(config, 5, seed=1)[0]
    assert generate(split, prompt, 10).new_ids == generate(whole, prompt, 10).new_ids


def test_device_maps_that_cannot_work_are_refused(tmp_path):
    config, _, model = pair("mha")
    with pytest.raises(PlacementError, match="blocks.0.*not modules.*embed, .*final_norm, lm_head, layers.0"):
        dispatch(model, {**cpu_disk_map(config), "blocks.0": "cpu"}, offload_dir=tmp_path)
    with pytest.raises(PlacementError, match="offload_dir"):
        dispatch(model, cpu_disk_map(config))
    with pytest.raises(PlacementError, match="unknown device map strategy"):
        dispatch(model, "everywhere")
    tied_config, _, tied = pair("learned")
    with pytest.raises(PlacementError, match="ties its embedding"):
        dispatch(tied, {**cpu_disk_map(tied_config), "embed": "disk"}, offload_dir=tmp_path)


def test_without_accelerate_the_error_says_what_to_install(monkeypatch):
    config, _, model = pair("mha")
    monkeypatch.setitem(sys.modules, "accelerate", None)  # makes `import accelerate` raise ImportError
    with pytest.raises(PlacementError, match="pip install accelerate"):
        dispatch(model, cpu_disk_map(config))


def test_the_command_line_traces_a_model_spread_to_disk_as_it_traces_it_whole(tmp_path, capsys):
    from txviz.cli import main
    from txviz.loading.zoo import SHIPPED_ZOO

    model = ["--model", str(SHIPPED_ZOO / "base"), "--json"]
    spread = ["--device-map", "sequential", "--max-memory", "cpu=300KB", "--offload-dir", str(tmp_path)]
    assert main(["info", *model, *spread]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["device"] == "cpu" and "disk" in info["device_map"].values() and "cpu" in info["device_map"].values()
    prompt = ["--prompt", "Once upon a time there was a little dog."]
    assert main(["trace", *prompt, *model, "--device", "cpu"]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert main(["trace", *prompt, *model, *spread]) == 0
    split = json.loads(capsys.readouterr().out)
    assert split["heads"] == whole["heads"] and split["tokens"] == whole["tokens"]
    assert main(["trace", *prompt, *model, "--device-map", "auto", "--max-memory", "cpu"]) == 2
    assert "DEVICE=SIZE" in capsys.readouterr().out
