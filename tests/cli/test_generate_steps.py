"""``txviz generate --candidates N [--lens] [--attention-layers …]``: the steps it adds hold what each
step chose between (checked against a run that recomputes the whole sequence), the record leaves the
generated tokens as they were, the output without it is the plain generation's, byte for byte, and the
options the model cannot satisfy are refused before anything runs."""

from __future__ import annotations

import json

import pytest
import torch

from tests.helpers.decoding_reference import recomputed_run
from txviz.cli import main
from txviz.generate import Sampling, generate
from txviz.loading import load
from txviz.loading.zoo import SHIPPED_ZOO

MODEL = str(SHIPPED_ZOO / "base")
PROMPT = "Once upon a time"
N_NEW = 6
BASE = ["generate", "--model", MODEL, "--device", "cpu", "--bos", "none", "--prompt", PROMPT,
        "--max-new-tokens", str(N_NEW)]
SAMPLERS = {"greedy": [], "sampled": ["--temperature", "1.3", "--top-k", "12", "--top-p", "0.9", "--seed", "5"]}


@pytest.fixture(scope="module")
def loaded():
    return load(MODEL, device="cpu")


def run_cli(capsys, *argv: str) -> str:
    assert main([*BASE, *argv]) == 0
    return capsys.readouterr().out


def test_without_candidates_the_output_is_the_plain_generation_byte_for_byte(capsys, loaded):
    sampler = SAMPLERS["sampled"]
    prompt_ids = list(loaded.tokenizer.encode(PROMPT, bos="none").ids)
    result = generate(loaded.model, torch.tensor(prompt_ids), N_NEW,
                      sampling=Sampling(temperature=1.3, top_k=12, top_p=0.9, seed=5),
                      stop_ids=(loaded.tokenizer.eos_id,))
    text = loaded.tokenizer.decode(list(result.new_ids), skip_special=True)
    expected = {"prompt": PROMPT, "prompt_ids": prompt_ids, "text": text, "new_ids": list(result.new_ids),
                "kv_cache_bytes": [step.cache_bytes for step in result.steps]}
    assert run_cli(capsys, "--json", *sampler) == json.dumps(expected) + "\n"
    assert run_cli(capsys, *sampler) == text + "\n"


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_the_record_leaves_the_tokens_as_generated_without_it(capsys, sampler):
    plain = json.loads(run_cli(capsys, "--json", *SAMPLERS[sampler]))
    recorded = json.loads(run_cli(capsys, "--json", "--candidates", "4", "--lens", "--attention-layers", "0,2",
                                  *SAMPLERS[sampler]))
    steps = recorded.pop("steps")
    assert recorded == plain
    assert [step["id"] for step in steps] == plain["new_ids"]
    assert [step["kv_bytes"] for step in steps] == plain["kv_cache_bytes"]


def test_steps_hold_the_candidates_lens_and_attention_of_each_step(capsys, loaded):
    tokenizer, config = loaded.tokenizer, loaded.config
    out = json.loads(run_cli(capsys, "--json", "--candidates", "5", "--lens", "--attention-layers", "2,0",
                             *SAMPLERS["sampled"]))
    prompt = tokenizer.encode(PROMPT, bos="none").ids
    tokens, logits, sampled = recomputed_run(loaded.model, prompt, N_NEW, temperature=1.3, top_k=12, top_p=0.9, seed=5)
    steps = out["steps"]
    assert [step["id"] for step in steps] == tokens[:len(steps)]
    for step, step_logits, step_sampled in zip(steps, logits, sampled):
        probs = torch.softmax(step_logits.float(), dim=-1)
        top = torch.topk(probs, 5)
        assert [c["id"] for c in step["candidates"]] == top.indices.tolist()
        assert [c["text"] for c in step["candidates"]] == [tokenizer.display(i) for i in top.indices.tolist()]
        torch.testing.assert_close(torch.tensor([c["prob"] for c in step["candidates"]]), top.values)
        torch.testing.assert_close(torch.tensor([c["prob_sampled"] for c in step["candidates"]]),
                                   step_sampled[top.indices].float())
        ranks = step["lens_ranks"]
        assert len(ranks) == config.n_layers + 1 and ranks[-1] == step["rank"]
        assert step["first_top1_layer"] == next((i for i, rank in enumerate(ranks) if rank == 1), None)
        assert [row["layer"] for row in step["attention"]] == [0, 2]
        for row in step["attention"]:
            weights = torch.tensor(row["weights"])
            assert row["heads"] == list(range(config.n_heads)) and weights.shape == (config.n_heads, step["position"])
            torch.testing.assert_close(weights.sum(-1), torch.ones(config.n_heads))


def test_candidates_without_lens_or_attention_carry_neither(capsys):
    (step, *_) = json.loads(run_cli(capsys, "--json", "--candidates", "1"))["steps"]
    assert len(step["candidates"]) == 1 and "lens_ranks" not in step and "attention" not in step


@pytest.mark.parametrize("argv, message", [
    (["--candidates", "0"], "--candidates: must be at least 1"),
    (["--candidates", "1001"], "--candidates: must be at most 1,000"),
    (["--candidates", "3", "--attention-layers", "-1"], "--attention-layers: layers are counted from 0"),
    (["--candidates", "3", "--attention-layers", "0,x"], "--attention-layers: expected layer numbers"),
])
def test_step_options_are_refused_at_parse_time(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        main([*BASE, *argv])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_step_options_the_model_cannot_satisfy_are_refused_before_it_runs(capsys, loaded, monkeypatch):
    import txviz.decoding
    monkeypatch.setattr(txviz.decoding, "decode", lambda *a, **k: pytest.fail("ran despite a refused option"))
    config = loaded.config
    cases = {("--candidates", str(config.vocab_size + 1)): f"vocabulary of {config.vocab_size:,} tokens",
             ("--candidates", "2", "--attention-layers", f"0,{config.n_layers}"):
                 f"--attention-layers {config.n_layers}: the model has {config.n_layers} layers",
             ("--lens",): "give --candidates N too",
             ("--attention-layers", "0"): "give --candidates N too"}
    for argv, message in cases.items():
        assert main([*BASE, "--json", *argv]) == 2
        assert message in json.loads(capsys.readouterr().out)["error"]
    monkeypatch.undo()
    assert json.loads(run_cli(capsys, "--json", "--candidates", str(config.vocab_size)))["steps"]


def test_without_json_the_steps_follow_the_text_one_line_each(capsys):
    recorded = json.loads(run_cli(capsys, "--json", "--candidates", "2", "--lens"))
    lines = run_cli(capsys, "--candidates", "2", "--lens").splitlines()
    steps = recorded["steps"]
    assert "\n".join(lines[:-2 * len(steps)]) == recorded["text"]
    for step, line in zip(steps, lines[-2 * len(steps)::2]):
        assert line.startswith(f"{step['index']:4d}  {step['text']!r}  rank {step['rank']}  p {step['prob']:.3f}")
