"""The lab (txviz.lab): story corpus, tokenizer, load-balancing loss, the gradient-keeping recorder,
seeded training, the saved run format, and the shipped zoo loaded through ``txviz.loading.load``."""

from __future__ import annotations

import json
import re

import pytest
import torch
from torch.testing import assert_close

from tests.helpers import zoo_losses
from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz import cli, trace
from txviz.lab import zoo
from txviz.lab.balancing import effective_experts, expert_load, load_balancing_loss
from txviz.lab.corpus import DOCUMENT_SEPARATOR, CorpusSettings, stories, story
from txviz.lab.data import prepare_data
from txviz.lab.recorder import LiveRecorder
from txviz.lab.train import TrainSettings, lr_at, train
from txviz.loading import load
from txviz.loading.sources import discover
from txviz.loading.zoo import SHIPPED_ZOO, is_txviz_dir
from txviz.model.kv_cache import KVCache
from txviz.capture.trace import CaptureError

SMALL_CORPUS = CorpusSettings(seed=0, n_train=200, n_val=12)
SMALL_MODEL = dict(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=48, max_seq_len=32,
                   tie_embeddings=True)
SHORT_RUN = TrainSettings(steps=30, batch_size=8, context=32, lr=1e-2, log_every=10)


@pytest.fixture(scope="module")
def data():
    return prepare_data(SMALL_CORPUS)


def small_config(data, **changes):
    return tiny_config(vocab_size=data.vocab_size, **{**SMALL_MODEL, **changes})


# ---- corpus and tokenizer -----------------------------------------------------------------------
def test_the_corpus_is_a_function_of_its_seed():
    assert stories("train", SMALL_CORPUS) == stories("train", SMALL_CORPUS)
    assert story(0, "train", 3) != story(1, "train", 3)
    assert not set(stories("val", SMALL_CORPUS)) & set(stories("train", SMALL_CORPUS))


def test_stories_refer_back_with_pronouns_and_repeat_names():
    text = story(0, "train", 0)
    words = text.replace(".", " ").replace(",", " ").split()
    assert {"he", "she", "He", "She"} & set(words) and ("it" in words or "They" in words)
    first_name = words[0]
    assert words.count(first_name) >= 2  # names recur: material for induction heads


def test_the_tokenizer_is_word_level_with_the_separator_first(data):
    tokenizer = data.tokenizer
    assert 100 <= data.vocab_size <= 500
    assert tokenizer.token_to_id(DOCUMENT_SEPARATOR) == 0
    text = story(0, "val", 1)
    encoding = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(encoding.ids) == text
    assert len(encoding.ids) == len(re.findall(r"\w+|[^\w\s]", text))  # a token per word or mark
    assert prepare_data(SMALL_CORPUS).tokenizer.to_str() == tokenizer.to_str()


def test_every_story_starts_with_the_separator(data):
    separators = (data.train == 0).nonzero().flatten()
    assert len(separators) == SMALL_CORPUS.n_train and separators[0] == 0


# ---- load balancing -----------------------------------------------------------------------------
def test_uniform_routing_costs_one():
    logits = torch.zeros(8, 4)  # P_e = 1/4
    chosen = torch.arange(8)[:, None] % 4  # f_e = 1/4
    assert_close(load_balancing_loss(logits, chosen), torch.tensor(1.0))


def test_all_tokens_on_one_expert_cost_n_experts_times_its_probability():
    logits = torch.tensor([[2.0, 0.0, 0.0, 0.0], [1.0, 0.5, 0.0, -1.0], [3.0, 1.0, 1.0, 1.0]])
    chosen = torch.zeros(3, 1, dtype=torch.long)  # every token to expert 0: f = (1, 0, 0, 0)
    p0 = torch.softmax(logits, dim=-1)[:, 0].mean()
    assert_close(load_balancing_loss(logits, chosen), 4 * p0)


def test_top_k_assignments_are_counted_and_normalized():
    chosen = torch.tensor([[0, 1], [0, 2], [0, 1]])  # 6 assignments: expert 0 three, 1 two, 2 one
    assert_close(expert_load(chosen, 4), torch.tensor([3, 2, 1, 0]) / 6)
    logits = torch.log(torch.tensor([[0.4, 0.3, 0.2, 0.1]])).expand(3, 4)
    expected = 4 * (0.5 * 0.4 + (2 / 6) * 0.3 + (1 / 6) * 0.2)
    assert_close(load_balancing_loss(logits, chosen), torch.tensor(expected))


def test_effective_experts():
    assert effective_experts(torch.full((4,), 0.25)) == pytest.approx(4.0)
    assert effective_experts(torch.tensor([1.0, 0.0, 0.0, 0.0])) == pytest.approx(1.0)


def test_the_balancing_gradient_moves_probability_off_the_busy_expert():
    logits = torch.tensor([[1.0, 0.0, 0.0, 0.0]] * 4, requires_grad=True)
    load_balancing_loss(logits, torch.zeros(4, 1, dtype=torch.long)).backward()
    assert (logits.grad[:, 0] > 0).all() and (logits.grad[:, 1:] < 0).all()


# ---- the recorder that keeps gradients ----------------------------------------------------------
def test_live_recorder_leaves_logits_identical_and_keeps_the_graph():
    config = tiny_config(n_kv_heads=2, n_experts=4, top_k=2)
    model, ids = random_decoder(config), random_ids(config, 9, batch=2)
    plain = model(ids)
    recorder = LiveRecorder(("router_logits", "expert_ids"), config.n_layers)
    recorded = model(ids, record=recorder)
    assert torch.equal(recorded, plain)
    router_logits = recorder["router_logits"]
    assert len(router_logits) == config.n_layers and router_logits[0].shape == (2, 9, 4)
    assert all(t.requires_grad for t in router_logits)
    traced = trace(model, ids, capture=("router_logits",))["router_logits"]
    assert torch.equal(torch.stack([t.detach() for t in router_logits]), traced)


def test_live_recorder_refuses_unknown_or_unasked_names():
    with pytest.raises(CaptureError, match="per-layer captures only"):
        LiveRecorder(("resid",), 2)
    with pytest.raises(CaptureError, match="not asked for"):
        LiveRecorder(("router_logits",), 2)["expert_ids"]


# ---- training -----------------------------------------------------------------------------------
def test_the_schedule_warms_up_then_decays_to_its_floor():
    s = TrainSettings(steps=100, lr=1e-3, warmup_fraction=0.1, min_lr_ratio=0.1)
    rates = [lr_at(step, s) for step in range(100)]
    assert rates[0] == pytest.approx(1e-4) and max(rates) == pytest.approx(1e-3)
    assert rates[-1] == pytest.approx(1e-4) and rates[10:] == sorted(rates[10:], reverse=True)


def test_a_few_steps_lower_the_loss(data):
    curve = train(small_config(data), data, SHORT_RUN).curves["loss"]
    assert sum(curve[-5:]) / 5 < 0.7 * sum(curve[:5]) / 5


def test_the_same_seed_reproduces_the_same_losses(data):
    config = small_config(data, n_experts=4, top_k=2)
    settings = TrainSettings(steps=6, batch_size=4, context=32, aux_weight=0.01)
    first, second = train(config, data, settings), train(config, data, settings)
    assert first.curves["loss"] == second.curves["loss"]
    assert first.curves["aux_loss"] == second.curves["aux_loss"]
    other = train(config, data, TrainSettings(steps=6, batch_size=4, context=32, aux_weight=0.01, seed=1))
    assert other.curves["loss"] != first.curves["loss"]


def test_progress_reports_steps_loss_and_speed(data):
    reports = []
    train(small_config(data), data, TrainSettings(steps=4, batch_size=2, context=16, log_every=2), reports.append)
    assert [r.step for r in reports] == [2, 4] and all(r.tokens_per_second > 0 for r in reports)
    assert reports[0].aux_loss is None


# ---- a trained run on disk, through the loader --------------------------------------------------
@pytest.fixture(scope="module")
def learned_run(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("zoo")
    zoo.train_variant("learned", out, data, steps=3)
    return out / "learned"


def test_a_run_writes_safetensors_config_tokenizer_curves_and_eval(learned_run):
    assert sorted(p.name for p in learned_run.iterdir()) == [
        "config.json", "curves.json", "eval.json", "model.safetensors", "tokenizer.json"]
    curves = json.loads((learned_run / "curves.json").read_text())
    assert len(curves["loss"]) == 3 and curves["seed"] == 0 and curves["corpus"]["n_train"] == 200
    evaluation = json.loads((learned_run / "eval.json").read_text())
    assert evaluation["val_loss"] > 0 and evaluation["val_loss_2x"] is None and evaluation["val_loss_4x"] is None
    table = json.loads((learned_run / "config.json").read_text())["max_seq_len"]
    assert f"table has {table} rows" in evaluation["extrapolation"]["why_null"]
    windows = evaluation["val_window_losses"]  # the evaluation noise: one loss per validation window
    assert len(windows) > 1 and abs(sum(windows) / len(windows) - evaluation["val_loss"]) < 1e-4


def test_a_run_loads_through_load_with_the_sink_token(learned_run):
    loaded = load(learned_run, device="cpu")
    assert loaded.format == "txviz" and loaded.config.positions == "learned"
    assert loaded.tokenizer.sink_token == DOCUMENT_SEPARATOR == loaded.tokenizer.bos_token
    assert loaded.metadata["eval"]["val_loss"] > 0 and loaded.metadata["training"]["train_settings"]["steps"] == 3
    ids = loaded.tokenizer.encode("Mary had a red kite.", bos="sink").ids
    assert ids[0] == 0 and loaded.model(torch.tensor(ids)).shape == (1, len(ids), loaded.config.vocab_size)


def test_a_runs_eval_is_what_its_saved_weights_score(learned_run, data):
    """eval.json describes the weights on disk: reloaded, they score the window losses it stores, whose
    mean is its val_loss."""
    from txviz.lab.evaluate import window_losses

    loaded = load(learned_run, device="cpu")
    stored = zoo.stored_window_losses(learned_run)
    rescored = window_losses(loaded.model, data.val_windows(loaded.config.max_seq_len)).double()
    assert_close(rescored, stored, rtol=0, atol=1e-4)
    evaluation = json.loads((learned_run / "eval.json").read_text())
    assert evaluation["val_loss"] == pytest.approx(float(rescored.mean()), abs=1e-4)
    assert evaluation["val_tokens"] == len(data.val)


def test_hugging_face_directories_are_not_taken_for_lab_ones(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert not is_txviz_dir(tmp_path)


def test_cli_lab_train_and_list(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(zoo, "CORPUS", SMALL_CORPUS)
    assert cli.main(["lab", "train", "--variant", "mqa", "--steps", "2", "--out", str(tmp_path), "--json"]) == 0
    trained = json.loads(capsys.readouterr().out)["variants"]
    assert [row["variant"] for row in trained] == ["mqa"] and trained[0]["steps"] == 2
    assert cli.main(["lab", "list", "--out", str(tmp_path), "--json"]) == 0
    rows = {row["variant"]: row for row in json.loads(capsys.readouterr().out)["variants"]}
    assert set(rows) == set(zoo.VARIANTS) and rows["mqa"]["trained"] and not rows["mha"]["trained"]
    cache = KVCache(load(tmp_path / "mqa", device="cpu").config, max_tokens=10, dtype=torch.float32)
    assert rows["mqa"]["kv_bytes_per_token_fp32"] == cache.nbytes / 10  # what a real fp32 cache holds


# ---- the shipped zoo ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(zoo.VARIANTS))
def test_every_shipped_variant_loads_and_its_config_matches_its_name(name):
    loaded = load(SHIPPED_ZOO / name, device="cpu")
    config = loaded.config
    assert loaded.format == "txviz" and config.name == name
    expected = {**zoo.BASE, **zoo.VARIANTS[name].changes}
    assert {key: getattr(config, key) for key in expected} == expected
    curves = json.loads((SHIPPED_ZOO / name / "curves.json").read_text())
    assert curves["train_settings"]["aux_weight"] == zoo.VARIANTS[name].aux_weight
    assert len(curves["loss"]) == zoo.DEFAULT_STEPS * zoo.VARIANTS[name].steps_factor
    assert curves["seed"] == zoo.CORPUS.seed and curves["corpus"] == zoo.CORPUS.to_dict()


def test_shipped_names_say_what_they_are():
    config = {name: load(SHIPPED_ZOO / name, device="cpu").config for name in
              ("base", "mha", "mqa", "alibi", "learned", "no_positions", "moe_top2_balanced", "moe_top1")}
    assert (config["base"].n_kv_heads, config["mha"].n_kv_heads, config["mqa"].n_kv_heads) == (2, 4, 1)
    assert [config[n].positions for n in ("base", "alibi", "learned", "no_positions")] == \
        ["rope", "alibi", "learned", "none"]
    assert (config["moe_top2_balanced"].n_experts, config["moe_top2_balanced"].top_k) == (4, 2)
    assert (config["moe_top1"].n_experts, config["moe_top1"].top_k, config["base"].n_experts) == (4, 1, 0)


def held_out(name: str, n_tokens: int):
    """A shipped variant and the first ``n_tokens`` + 1 tokens of its held-out stream (a few of the
    windows its eval.json scored), as LabData for the evaluation functions."""
    from txviz.lab.data import LabData

    loaded = load(SHIPPED_ZOO / name, device="cpu")
    backend = loaded.tokenizer.backend
    val = zoo_losses.val_stream(backend)[:n_tokens + 1]  # the whole held-out stream, encoded once per process
    return loaded, LabData(zoo.CORPUS, backend, torch.empty(0, dtype=torch.long), val)


def shipped_eval(name: str) -> dict:
    return json.loads((SHIPPED_ZOO / name / "eval.json").read_text())


def test_alibi_extrapolates_where_rope_degrades_and_learned_cannot():
    """Re-scored on 8 held-out windows of 4× the training context: ALiBi's loss past the context stays
    below RoPE's on the same text, each near what its eval.json says, and learned positions cannot run."""
    from txviz.lab.evaluate import token_losses, with_context

    beyond = {}
    for name in ("alibi", "base"):
        loaded, data = held_out(name, 8 * 4 * 128)
        context = loaded.config.max_seq_len
        losses = token_losses(with_context(loaded.model, 4 * context), data.val_windows(4 * context))  # (8, 4C)
        beyond[name] = float(losses[:, context:].mean())
        stored = shipped_eval(name)["extrapolation"]["loss_beyond_context_at"][str(4 * context)]
        assert beyond[name] == pytest.approx(stored, abs=0.15), name  # 8 of ~138 windows: sampling noise
    assert beyond["alibi"] < beyond["base"] - 0.05
    learned = load(SHIPPED_ZOO / "learned", device="cpu").model
    assert with_context(learned, 2 * learned.config.max_seq_len) is None
    assert shipped_eval("learned")["val_loss_2x"] is None


def test_top1_routing_collapses_without_the_balancing_loss():
    """The routing load recomputed on 16 held-out windows: the unbalanced top-1 model sends most tokens
    to fewer experts than the balanced one, in its busiest layer, as its eval.json records."""
    from txviz.lab.evaluate import routing_load

    fewest = {}
    for name in ("moe_top1", "moe_top1_balanced"):
        loaded, data = held_out(name, 16 * 128)
        computed = routing_load(loaded.model, data, loaded.config.max_seq_len)["effective_experts_per_layer"]
        stored = shipped_eval(name)["expert_load"]["effective_experts_per_layer"]
        assert computed == pytest.approx(stored, abs=0.15), name
        fewest[name] = min(computed)
    assert fewest["moe_top1"] < fewest["moe_top1_balanced"] - 0.5
    assert fewest["moe_top1_balanced"] <= loaded.config.n_experts


def test_induction_completes_surnames_only_after_the_long_run():
    """The name → surname probe recomputed on 24 held-out windows: the long run completes a surname seen
    before far more often than the base run, each near what its eval.json records."""
    from txviz.lab.probes import probes

    accuracy = {}
    for name in ("base", "base_long"):
        loaded, data = held_out(name, 24 * 128)
        probe = probes(loaded.model, data, loaded.config.max_seq_len)["name_surname"]
        assert probe["n"] > 50
        accuracy[name] = probe["accuracy"]
        assert accuracy[name] == pytest.approx(shipped_eval(name)["probes"]["name_surname"]["accuracy"], abs=0.15)
    assert accuracy["base_long"] > accuracy["base"] + 0.3


@pytest.mark.parametrize("name", [n for n, v in zoo.VARIANTS.items() if "n_experts" in v.changes])
def test_shipped_moe_gates_are_normalized_as_configured(name):
    loaded = load(SHIPPED_ZOO / name, device="cpu")
    ids = torch.tensor(loaded.tokenizer.encode(story(0, "val", 0), bos="sink").ids[:loaded.config.max_seq_len])
    tr = trace(loaded.model, ids, capture=("router_probs", "expert_ids", "expert_gates"))
    gates = tr["expert_gates"]  # (L, B, T, K)
    if loaded.config.router_norm == "topk":
        assert_close(gates.sum(-1), torch.ones(gates.shape[:-1]))
    else:
        assert_close(gates, tr["router_probs"].gather(-1, tr["expert_ids"]))


def test_the_shipped_zoo_is_discovered_for_the_model_picker():
    paths = {source.path for source in discover()}
    assert {str(SHIPPED_ZOO / name) for name in zoo.VARIANTS} <= paths


# ---- what the app reads from the zoo: held-out windows, known sentences, picker lines ---------------
@pytest.mark.xdist_group(zoo_losses.GROUP)  # the README's figures read the same scoring (tests/helpers)
@pytest.mark.parametrize("name", ["mha", "base", "mqa"])
def test_window_losses_rebuild_the_shipped_val_loss(name):
    loaded, windows = zoo_losses.held_out(name)
    evaluation = json.loads((SHIPPED_ZOO / name / "eval.json").read_text())
    assert windows.shape[1] == loaded.config.max_seq_len + 1
    losses = zoo_losses.window_losses(name)
    assert len(losses) == (evaluation["val_tokens"] - 1) // loaded.config.max_seq_len
    assert round(float(losses.mean()), 4) == evaluation["val_loss"]
    assert_close(zoo.stored_window_losses(SHIPPED_ZOO / name), losses.double(), rtol=0, atol=1e-5)  # what eval.json keeps


@pytest.mark.parametrize("name", sorted(zoo.VARIANTS))
def test_every_shipped_eval_keeps_the_window_losses_of_its_weights(name):
    """The first 6 windows re-scored with the shipped weights give the losses eval.json keeps (the rest
    are checked in full for three variants above); their mean over all windows is its val_loss."""
    from txviz.lab.evaluate import window_losses

    loaded, data = held_out(name, 6 * 128)
    stored = zoo.stored_window_losses(SHIPPED_ZOO / name)
    assert_close(window_losses(loaded.model, data.val_windows(loaded.config.max_seq_len)).double(), stored[:6],
                 rtol=0, atol=1e-4)
    assert round(float(stored.mean()), 4) == shipped_eval(name)["val_loss"]


def test_sample_sentences_are_in_the_zoo_vocabulary_and_other_words_are_named():
    from txviz.lab.corpus import sample_text
    from txviz.lab.tokenizer import unknown_words
    from txviz.loading import load

    backend = load(SHIPPED_ZOO / "alibi", device="cpu").tokenizer.backend
    for index in range(20):
        text = sample_text(index)
        assert text.count(".") == 3 and not unknown_words(backend, text)
    words = [w.strip() for w in unknown_words(backend, "The trophy didn't fit in the suitcase because it was too big.")]
    assert words == ["The", "trophy", "didn", "'", "t", "fit", "suitcase", "because", "too", "big"]


def test_a_byte_level_tokenizer_has_no_unknown_words():
    import tokenizers

    from txviz.lab.tokenizer import unknown_words

    backend = tokenizers.Tokenizer(tokenizers.models.BPE())
    assert unknown_words(backend, "anything at all ☃") == []


def test_picker_lines_say_the_variants_choice_and_size():
    from txviz.lab.zoo import describe

    line = describe(SHIPPED_ZOO / "alibi")
    assert line.startswith("alibi — positions: ALiBi") and "4 layers × d 64" in line and "k params" in line
    assert "experts" in describe(SHIPPED_ZOO / "moe_top2") and "\n" not in line
