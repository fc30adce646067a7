"""A cost function's name says which one it is: the calculator's (a MemoryModel or config and a dtype's
name) and the model's (a ModelConfig and bytes per element) never share a name, so an import of the
wrong one cannot silently give another number."""

from __future__ import annotations

import inspect

from txviz.analysis.kv import fit, memory, memory_model
from txviz.model import counts, kv_cache


def public_functions(module) -> set[str]:
    return {name for name, value in vars(module).items()
            if inspect.isfunction(value) and value.__module__ == module.__name__ and not name.startswith("_")}


def test_the_calculators_functions_and_the_models_have_different_names():
    calculator = set().union(*(public_functions(m) for m in (memory, memory_model, fit)))
    model = public_functions(counts) | public_functions(kv_cache)
    assert {"token_kv_bytes", "kv_cache_bytes_at", "token_flops"} <= calculator
    assert {"kv_bytes_per_token", "kv_cache_bytes", "flops_per_token", "count_params"} <= model
    assert calculator & model == set()
