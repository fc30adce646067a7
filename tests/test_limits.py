"""Limits in one place (txviz.limits): read from TXVIZ_* settings, checked before work, refused with
the estimate and the setting to change; the byte-bounded trace cache the app shares."""

from __future__ import annotations

import threading
import time

import pytest

from app.services.byte_cache import ByteBudgetCache
from tests.helpers.tiny import VARIANTS, tiny_config
from txviz.capture.cost import capture_cost
from txviz.limits import (GIB, MIB, LimitError, LimitExceeded, Limits, check_budget, check_prompt_chars,
                          check_prompt_tokens, generation_estimate, parse_size, trace_estimate)
from txviz.model.kv_cache import kv_cache_bytes


def test_defaults_and_environment():
    assert Limits.from_env({}) == Limits()
    limits = Limits.from_env({"TXVIZ_MAX_TOKENS": "64", "TXVIZ_MAX_NEW_TOKENS": "8", "TXVIZ_MEMORY_BUDGET": "512MiB",
                              "TXVIZ_MAX_CONFIG_BYTES": "4kib", "TXVIZ_MAX_PROMPT_CHARS": "300",
                              "TXVIZ_TRACE_CACHE_BYTES": "1GB", "TXVIZ_GFLOPS": "2.5", "OTHER": "x",
                              "TXVIZ_MAX_LONG_TOKENS": "512"})
    assert limits == Limits(max_prompt_tokens=64, max_long_tokens=512, max_new_tokens=8, memory_budget_bytes=512 * MIB,
                            max_config_bytes=4096, max_prompt_chars=300, trace_cache_bytes=10**9, gflops=2.5)


def test_overrides_win_and_blank_values_are_ignored():
    env = Limits.from_env({"TXVIZ_MAX_TOKENS": "64", "TXVIZ_MEMORY_BUDGET": ""})
    secrets = {"TXVIZ_MAX_TOKENS": 16, "TXVIZ_MEMORY_BUDGET": "1GiB"}  # TOML gives ints or strings
    assert env.with_overrides(secrets) == Limits(max_prompt_tokens=16, memory_budget_bytes=GIB)


@pytest.mark.parametrize("text,size", [("2147483648", 2 * GIB), ("512MiB", 512 * MIB), ("4 GB", 4 * 10**9),
                                       ("1.5GiB", int(1.5 * GIB)), (1000, 1000), ("1e3", 1000)])
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("name,value", [("TXVIZ_MAX_TOKENS", "abc"), ("TXVIZ_MAX_TOKENS", "0"),
                                        ("TXVIZ_MAX_TOKENS", 1.5), ("TXVIZ_MAX_NEW_TOKENS", "-3"),
                                        ("TXVIZ_MEMORY_BUDGET", "lots"), ("TXVIZ_MEMORY_BUDGET", "-1"),
                                        ("TXVIZ_MEMORY_BUDGET", "2 parsecs"), ("TXVIZ_GFLOPS", "nan"),
                                        ("TXVIZ_MAX_CONFIG_BYTES", True)])
def test_malformed_settings_name_the_variable(name, value):
    with pytest.raises(LimitError, match=name):
        Limits.from_env({name: value})


def test_prompt_checks_say_the_count_the_limit_and_the_knob():
    config = tiny_config()  # context 64
    limits = Limits(max_prompt_tokens=32, max_new_tokens=8, max_prompt_chars=100)
    check_prompt_tokens(32, config, limits)
    with pytest.raises(LimitExceeded, match=r"33 tokens; this server runs at most 32 \(TXVIZ_MAX_TOKENS\)"):
        check_prompt_tokens(33, config, limits)
    long = Limits(max_prompt_tokens=32, max_long_tokens=48)  # a summaries view reads further, and says so
    with pytest.raises(LimitExceeded, match=r"at most 32 \(TXVIZ_MAX_TOKENS\).*reads up to 48 \(TXVIZ_MAX_LONG_TOKENS\)"):
        check_prompt_tokens(33, config, long)
    check_prompt_tokens(48, config, long, long=True)
    with pytest.raises(LimitExceeded, match=r"49 tokens; this server runs at most 48 \(TXVIZ_MAX_LONG_TOKENS\)"):
        check_prompt_tokens(49, config, long, long=True)
    with pytest.raises(LimitExceeded, match=r"65 tokens; the model's context is 64"):
        check_prompt_tokens(65, config, Limits())
    with pytest.raises(LimitExceeded, match=r"30 tokens \+ 40 new = 70; the model's context is 64 tokens\. "
                                            r"Ask for at most 34 new tokens, or shorten the prompt\.$"):
        check_prompt_tokens(30, config, Limits(), n_new=40)  # the prompt fits: the new tokens are the knob
    with pytest.raises(LimitExceeded, match=r"64 tokens \+ 1 new = 65; the model's context is 64 tokens\. Shorten it\.$"):
        check_prompt_tokens(64, config, Limits(), n_new=1)
    with pytest.raises(LimitExceeded, match=r"at most 8 \(TXVIZ_MAX_NEW_TOKENS\)"):
        check_prompt_tokens(4, config, limits, n_new=9)
    with pytest.raises(LimitExceeded, match=r"101 characters.*TXVIZ_MAX_PROMPT_CHARS"):
        check_prompt_chars(101, limits)


@pytest.mark.parametrize("variant", ["mha", "gqa", "sliding_window", "moe"])
def test_trace_estimate_is_capture_cost_without_the_weights(variant):
    config = tiny_config(**VARIANTS[variant])
    capture = ("attn_probs", "resid")
    cost = capture_cost(config, 40, capture, layers=[1], element_bytes=4)
    estimate = trace_estimate(config, 40, capture, layers=[1], gflops=10.0)
    assert estimate.bytes == cost.stored_bytes + cost.transient_bytes
    assert estimate.seconds == pytest.approx(cost.flops / 10e9)


def test_trace_estimate_grows_with_t_squared_and_is_refused_above_the_budget():
    config = tiny_config(n_layers=30, n_heads=9, n_kv_heads=3, d_model=576, max_seq_len=8192)  # SmolLM2's shape
    maps_1k = trace_estimate(config, 1024).bytes
    assert maps_1k > 30 * 9 * 1024**2 * 4  # every map, fp32, plus one layer's temporaries
    assert trace_estimate(config, 2048).bytes > 3.9 * maps_1k
    with pytest.raises(LimitExceeded, match=r"tracing 4,096 tokens: about .* GiB and .* s, above this server's "
                                            r"budget of 2.0 GiB per request \(TXVIZ_MEMORY_BUDGET\)"):
        check_budget(trace_estimate(config, 4096), Limits())
    assert check_budget(trace_estimate(config, 256), Limits()).bytes < 2 * GIB


def test_generation_estimate_holds_the_kv_cache_and_the_uncached_run_is_slower():
    config = tiny_config(**VARIANTS["gqa"])
    cached = generation_estimate(config, 10, 20)
    assert cached.bytes >= kv_cache_bytes(config, 30, 1, 4)
    uncached = generation_estimate(config, 10, 20, use_cache=False)
    assert uncached.seconds > cached.seconds
    with pytest.raises(LimitExceeded, match="generating 20 tokens after 10"):
        check_budget(cached, Limits(memory_budget_bytes=1000))


# ---- the app's trace cache: bounded by bytes, one computation per key -------------------------------
def test_cache_drops_the_least_recently_used_beyond_its_budget():
    cache = ByteBudgetCache(100, size_of=len)
    cache.get("a", lambda: "x" * 40)
    cache.get("b", lambda: "x" * 40)
    cache.get("a", lambda: pytest.fail("cached"))  # a is now the most recent
    cache.get("c", lambda: "x" * 40)  # 120 > 100: b goes
    assert len(cache) == 2 and cache.nbytes == 80
    assert cache.get("a", lambda: "recomputed") == "x" * 40
    assert cache.get("b", lambda: "recomputed") == "recomputed"
    assert cache.get("huge", lambda: "x" * 500) == "x" * 500 and len(cache) == 1  # the newest always stays


def test_peek_reads_without_computing():
    cache = ByteBudgetCache(100, size_of=len)
    assert cache.peek("a") == (False, None) and len(cache) == 0
    cache.get("a", lambda: "x" * 40)
    cache.get("b", lambda: "x" * 40)
    assert cache.peek("a") == (True, "x" * 40)  # and a is now the most recent
    cache.get("c", lambda: "x" * 40)  # 120 > 100: b goes, not a
    assert cache.peek("b") == (False, None) and cache.peek("a")[0]


def test_cache_computes_each_key_once_for_concurrent_askers_and_never_caches_failures():
    cache = ByteBudgetCache(10**6, size_of=lambda v: 8)
    calls: list[str] = []

    def slow(key):
        def compute():
            calls.append(key)
            time.sleep(0.05)
            return key.upper()
        return compute

    results = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, cache.get(f"k{i % 3}", slow(f"k{i % 3}"))))
               for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(calls) == ["k0", "k1", "k2"]
    assert all(results[i] == f"K{i % 3}" for i in range(12))

    def failing():
        raise ValueError("no")
    with pytest.raises(ValueError):
        cache.get("bad", failing)
    assert cache.get("bad", lambda: "fine") == "fine"


def test_the_cli_refuses_work_over_the_budget_with_the_estimate(monkeypatch, capsys):
    from txviz.cli import main
    from txviz.loading.zoo import SHIPPED_ZOO

    monkeypatch.setenv("TXVIZ_MEMORY_BUDGET", "1KiB")
    for argv in (["trace", "--prompt", "Mary met John."], ["generate", "--prompt", "Mary met John.", "--json"]):
        assert main([*argv, "--model", str(SHIPPED_ZOO / "base"), "--device", "cpu"]) == 2
        said = capsys.readouterr()
        assert "above this server's budget of 1.0 KiB per request (TXVIZ_MEMORY_BUDGET)" in said.err + said.out
    monkeypatch.setenv("TXVIZ_MEMORY_BUDGET", "a lot")
    assert main(["trace", "--prompt", "x", "--model", str(SHIPPED_ZOO / "base")]) == 2
    assert "TXVIZ_MEMORY_BUDGET='a lot' is not valid" in capsys.readouterr().err
