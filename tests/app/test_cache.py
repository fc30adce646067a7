"""app/cache.py, outside a running app (Streamlit's caches work bare): each wrapper resolves the model
once and hands it to a service; results kept for every session are shared, and keyed by the limits
where the limits decide them."""

import re

import pytest
import streamlit as st

from app import cache
from app.services.prompts import PromptError
from app.services.texts import shipped_text_ids, shipped_texts
from app.services.zoo import first_story, zoo_path

SOURCE = zoo_path("base_long")  # inside the shipped zoo: an allowed model directory


@pytest.fixture(autouse=True)
def fresh_caches():
    st.cache_resource.clear()
    st.cache_data.clear()
    yield
    st.cache_resource.clear()
    st.cache_data.clear()


@pytest.fixture
def model_lookups(monkeypatch):
    """How many times the wrappers enter get_model."""
    calls = []
    real = cache.get_model

    def counting(source):
        calls.append(source)
        return real(source)

    monkeypatch.setattr(cache, "get_model", counting)
    return calls


@pytest.fixture(scope="module")
def story():
    return " ".join(first_story().split()[:24])


def test_each_view_of_a_trace_resolves_the_model_once(model_lookups, story):
    cache.get_head_table(SOURCE, story, "sink")
    assert model_lookups == [SOURCE]
    cache.get_map_overview(SOURCE, story, "sink", 1, 2, False)
    cache.get_attention_trace(SOURCE, story, "sink")
    cache.score_scaling(SOURCE, next(iter(shipped_texts())), 2.0, 32, "linear")
    assert model_lookups == [SOURCE] * 4


def test_a_trace_is_shared_and_not_served_under_tighter_limits(monkeypatch, story):
    first = cache.get_trace(SOURCE, story, "sink")
    assert cache.get_trace(SOURCE, story, "sink") is first
    assert cache.get_attention_trace(SOURCE, story, "sink") == (first, None)
    monkeypatch.setenv("TXVIZ_MEMORY_BUDGET", "1000")
    with pytest.raises(PromptError, match="TXVIZ_MEMORY_BUDGET"):
        cache.get_trace(SOURCE, story, "sink")


def test_a_scored_scaling_is_kept_and_its_time_sets_the_estimate(story):
    text = next(iter(shipped_texts()))
    n = len(shipped_text_ids(cache.get_model(SOURCE), text, 32))
    assert cache.scaling_losses_kept(SOURCE, text, 2.0, 32) == {}
    _, how = cache.scaling_step_seconds(SOURCE, n)
    assert "a short forward of this model ran at" in how
    losses = cache.score_scaling(SOURCE, text, 2.0, 32, "linear")
    assert list(cache.scaling_losses_kept(SOURCE, text, 2.0, 32)) == ["linear"]
    assert cache.score_scaling(SOURCE, text, 2.0, 32, "linear") is losses  # kept, not scored again
    seconds, how = cache.scaling_step_seconds(SOURCE, n)
    assert re.fullmatch(rf"one scaling of {n} tokens took \d+\.\d s here", how) and seconds > 0


def test_a_measurement_runs_once_with_a_progress_callback_and_is_kept():
    key = ("test", 1)
    assert cache.measured(key) is None
    runs = []

    def run(progress):
        progress(0.5, "half way")
        runs.append(1)
        return {"value": 42}

    assert cache.measure(key, run, "Measuring…") == {"value": 42}
    assert cache.measure(key, run, "Measuring…") == {"value": 42} and runs == [1]
    assert cache.measured(key) == {"value": 42}


def test_a_sweep_is_kept_for_every_session():
    text = next(iter(shipped_texts()))
    assert cache.layer_sharing_result(SOURCE, 1, text, 24) is None
    told = []
    sweep = cache.get_layer_sharing(SOURCE, 1, text, 24, progress=lambda done, total: told.append(done))
    assert told and cache.layer_sharing_result(SOURCE, 1, text, 24) is sweep
    assert cache.get_layer_sharing(SOURCE, 1, text, 24) is sweep


def test_a_shared_generation_is_computed_once(story):
    steps = []
    result = cache.get_generation(SOURCE, story, "sink", 4, True, False, on_step=steps.append, shared=True)
    again = cache.get_generation(SOURCE, story, "sink", 4, True, False, on_step=steps.append, shared=True)
    assert again is result and len(steps) == len(result.steps)


def test_every_name_the_app_calls_on_cache_is_exported():
    from pathlib import Path

    app_dir = Path(cache.__file__).parent
    called = set()
    for path in app_dir.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if re.search(r"^from app import (.*, )?cache\b", text, flags=re.M):
            called |= {name for name in re.findall(r"\bcache\.([A-Za-z]\w*)", text) if name != "py"}
    assert {"get_model", "get_trace", "limits"} <= called  # the sidebar's calls are found
    assert called <= set(cache.__all__), called - set(cache.__all__)
    assert all(hasattr(cache, name) for name in cache.__all__)


def test_app_cache_exports_only_what_it_defines():
    """What the pages call on cache is kept there (a cache, a store, a wrapper over them, their budgets);
    a service's types, errors and plain helpers are imported from the service, not passed through."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(cache.__file__).read_text(encoding="utf-8"))
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    defined |= {target.id for node in tree.body if isinstance(node, ast.Assign) for target in node.targets
                if isinstance(target, ast.Name)}
    assert set(cache.__all__) - defined == set()


def test_every_streamlit_cache_lives_in_app_cache():
    """One module holds every st.cache_*, so what is kept and for how long is seen in one place: pages and
    services call it, never decorate."""
    import re
    from pathlib import Path

    app = Path(__file__).resolve().parents[2] / "app"
    decorated = [f"{path.relative_to(app)}:{n}" for path in sorted(app.rglob("*.py")) if path.name != "cache.py"
                 for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
                 if re.match(r"\s*@st\.cache_(data|resource)\b", line)]
    assert not decorated, decorated


def test_the_long_link_store_is_bounded_in_bytes_of_memory():
    """Texts too long for a link are kept by id (app/ui/state.py) within cache.LONG_TEXT_BYTES of memory: a
    text of emoji takes four bytes a character, so counting characters kept four times the budget."""
    import sys

    from app.services.byte_cache import ByteBudgetCache

    budget, size_of = cache.SHARED_STORES["long_texts"]
    store = ByteBudgetCache(budget(), size_of=size_of)
    chars = cache.LONG_TEXT_BYTES // 8  # each text: 1/8 of the budget in characters, 1/2 of it in memory
    for i in range(6):
        store.get(f"id{i}", lambda i=i: chr(0x1F600 + i) * chars)
    kept = [value for value, _ in store._values.values()]
    assert kept[-1][0] == chr(0x1F600 + 5)  # the newest stays
    assert sum(sys.getsizeof(text) for text in kept) <= cache.LONG_TEXT_BYTES
    assert store.get("short", lambda: "ascii" * 10) == "ascii" * 10  # and a short one still fits beside
