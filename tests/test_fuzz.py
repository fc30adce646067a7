"""Property tests (hypothesis, derandomized so CI runs are repeatable): the tokenizer wrapper, the
trace API, the CLI's argument handling, and loaders fed corrupted files or configs. Each says what
must hold for any input: either a result that keeps its invariants or the library's own error with a
message, never another exception."""

from __future__ import annotations

import contextlib
import io
import json
import random
import traceback
from functools import lru_cache

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.helpers.expected import expected_shapes
from tests.helpers.tiny import VARIANTS, random_decoder, tiny_config
from txviz import InputError
from txviz.capture.trace import CAPTURES, trace

def fuzz(max_examples: int = 100) -> settings:
    return settings(max_examples=max_examples, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


# ---- the tokenizer wrapper (the default model's byte-level BPE) ----------------------------------------
@pytest.fixture(scope="module")
def tok(default_model):
    return default_model.tokenizer


TEXT = st.text(st.characters(codec="utf-8"), max_size=80) | st.sampled_from(
    ["", " ", "\x00", "\r\n\t", "a  5", "x\u0301", "👍🏽", "漢字", "שלום", "<|im_start|>user\nhi<|im_end|>", "  \n\n  "])


@pytest.mark.default_model
@fuzz()
@given(text=TEXT)
def test_offsets_lie_in_the_text_cover_it_and_come_in_order(tok, text):
    encoding = tok.encode(text)
    covered = set()
    previous_start = 0
    for start, end in encoding.offsets:
        assert 0 <= start <= end <= len(text)
        assert start >= previous_start  # tokens never go back in the text
        previous_start = start
        covered.update(range(start, end))
    if not encoding.dropped:  # every character belongs to some token
        assert covered == set(range(len(text)))
    # else a byte the vocabulary lacks was skipped, and the Rust tokenizer's offsets for the rest of that
    # pre-token word may be off by the skipped character (seen with U+40000–U+BFFFF, unassigned planes);
    # the app says which characters were dropped.
    assert len(encoding.ids) == len(encoding.tokens) == len(encoding.offsets) == len(encoding.special)


@pytest.mark.default_model
@fuzz()
@given(text=TEXT)
def test_decode_inverts_encode_for_any_text(tok, text):
    encoding = tok.encode(text)
    if not encoding.dropped:
        assert tok.decode(encoding.ids) == text
    else:  # every byte the vocabulary can say comes back
        kept = bytes(b for b in text.encode("utf-8") if b not in tok.missing_bytes)
        assert tok.decode(encoding.ids) == kept.decode("utf-8", errors="replace")


@pytest.mark.default_model
def test_characters_without_a_token_are_reported_not_silently_lost(tok):
    for text, dropped in [("a\x1db", (1,)), ("\x04\x06", (0, 1)), (chr(0x40000) + "x", (0,)), ("plain é 漢", ())]:
        assert tok.encode(text).dropped == dropped
    assert tok.decode(tok.encode("a\x1db").ids) == "ab"


@pytest.mark.default_model
@fuzz()
@given(text=TEXT, policy=st.sampled_from(["none", "bos", "sink"]))
def test_bos_policies_prepend_exactly_one_visible_token(tok, text, policy):
    plain, encoding = tok.encode(text), tok.encode(text, bos=policy)
    if policy == "none":
        assert encoding == plain
        return
    assert encoding.ids[0] == (tok.bos_id if policy == "bos" else tok.sink_id)
    assert encoding.offsets[0] == (0, 0) and encoding.special[0]
    assert encoding.ids[1:] == plain.ids and encoding.offsets[1:] == plain.offsets


@pytest.mark.default_model
@fuzz()
@given(text=st.text(max_size=5), surrogate=st.integers(0xD800, 0xDFFF))
def test_text_that_is_not_unicode_is_a_tokenizer_error(tok, text, surrogate):
    from txviz.loading.errors import TokenizerError

    with pytest.raises(TokenizerError, match="not valid Unicode"):
        tok.encode(text + chr(surrogate))


# ---- the trace API -----------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def tiny_model(variant: str):
    return random_decoder(tiny_config(**VARIANTS[variant]))


@st.composite
def trace_requests(draw):
    variant = draw(st.sampled_from(sorted(VARIANTS)))
    config = tiny_model(variant).config
    t = draw(st.integers(1, config.max_seq_len))
    batch = draw(st.integers(1, 2))
    ids = torch.tensor(draw(st.lists(st.lists(st.integers(0, config.vocab_size - 1), min_size=t, max_size=t),
                                     min_size=batch, max_size=batch)))
    layers = draw(st.none() | st.lists(st.integers(0, config.n_layers - 1), min_size=1, unique=True))
    capture = draw(st.lists(st.sampled_from(sorted(set(CAPTURES) - {"head_summaries"})), min_size=1, max_size=4,
                            unique=True))
    return variant, ids, layers, tuple(capture)


@fuzz(40)
@given(request=trace_requests())
def test_random_valid_traces_keep_their_shapes_and_invariants(request):
    variant, ids, layers, capture = request
    model = tiny_model(variant)
    config = model.config
    tr = trace(model, ids, capture=capture + ("attn_probs",), layers=layers)
    chosen = tuple(range(config.n_layers)) if layers is None else tuple(sorted(layers))
    assert tr.layers == chosen
    expected = expected_shapes(config, len(chosen), ids.shape[1])
    batch = ids.shape[0]
    for name in capture:
        if name in tr:
            shape = expected[name]
            if name in ("attn_probs", "attn_scores", "attn_logits", "q", "k", "v", "q_rot", "k_rot", "attn_out",
                        "ffn_out", "router_logits", "router_probs", "expert_ids", "expert_gates", "resid",
                        "resid_norm", "logits"):
                shape = _with_batch(name, shape, batch)
            assert tuple(tr[name].shape) == shape, name
    probs = tr["attn_probs"]
    torch.testing.assert_close(probs.sum(-1), torch.ones(probs.shape[:-1]), atol=1e-5, rtol=0)
    assert (probs.triu(1) == 0).all()  # causal: nothing from the future
    with torch.inference_mode():
        assert torch.equal(tr.ids, ids)
        plain = model(ids)
    if "logits" in tr:
        torch.testing.assert_close(tr["logits"], plain, atol=1e-5, rtol=1e-5)


def _with_batch(name: str, shape: tuple, batch: int) -> tuple:
    """tests.capture.test_trace.expected_shapes is for batch 1; put the batch where each capture keeps it."""
    shape = list(shape)
    index = {"logits": 0}.get(name, 1)
    if shape[index] == 1:
        shape[index] = batch
    return tuple(shape)


BAD_IDS = st.one_of(
    st.lists(st.integers(-(2**70), -1), min_size=1, max_size=4),  # negative (and beyond int64)
    st.lists(st.integers(97, 2**62), min_size=1, max_size=4),  # past the vocabulary (97)
    st.lists(st.floats(allow_nan=True), min_size=1, max_size=4),
    st.lists(st.booleans(), min_size=1, max_size=4),
    st.lists(st.lists(st.integers(0, 96), max_size=3), min_size=2, max_size=3).filter(
        lambda rows: len({len(r) for r in rows}) > 1 or not rows[0]),  # ragged or empty rows
    st.lists(st.text(max_size=3), min_size=1, max_size=3),
    st.just([]), st.none(), st.just(list(range(65))),  # over the context of 64
    st.integers(0, 3).map(lambda d: torch.zeros((1,) * (d + 3), dtype=torch.long)),  # too many dims
)


@fuzz(60)
@given(ids=BAD_IDS, variant=st.sampled_from(sorted(VARIANTS)))
def test_random_invalid_ids_raise_input_error_and_nothing_else(ids, variant):
    model = tiny_model(variant)
    with pytest.raises(InputError):
        trace(model, ids)
    with pytest.raises(InputError):
        model(ids)


# ---- the command line ------------------------------------------------------------------------------------
VALUES = ["", "x", "-1", "0", "1", "nan", "inf", "1e400", "99999999999999999999", "1.5", "\x00", "é", "--json",
          "/nonexistent", "/dev/null", "/", "llama-3-8b", "gpt-2", "fp8", "cuda", "cuda:9", "meta", "mps", "sink"]
FLAGS = ["--json", "--model", "--device", "--dtype", "--prompt", "--max-new-tokens", "--chat", "--bos",
         "--temperature", "--top-k", "--top-p", "--seed", "--data", "--top", "--preset", "--config", "--list",
         "--seq", "--batch", "--kv-dtype", "--weight-dtype", "--gpu-gib", "--help", "-h",
         "--tokens", "--repeats", "--decode-tokens", "--threads", "--quick", "--no-hf", "--candidates", "--lens",
         "--attention-layers"]
COMMANDS = ["info", "trace", "generate", "coref", "memory", "fetch", "lab", "bench", "nope", ""]


@pytest.fixture(scope="module")
def junk(tmp_path_factory):
    folder = tmp_path_factory.mktemp("junk")
    (folder / "bad.gguf").write_bytes(b"GGUF" + bytes(200))
    (folder / "binary.jsonl").write_bytes(bytes(range(256)))
    (folder / "config.json").write_text('{"model_type": "llama", "hidden_size": 8}')
    (folder / "cases.jsonl").write_text('{"text": "Mary met John and she smiled.", "pronoun": "she"}\n')
    (folder / "empty").mkdir()
    return [str(folder / n) for n in ("bad.gguf", "binary.jsonl", "config.json", "cases.jsonl", "empty")]


@st.composite
def argvs(draw, junk):
    command = draw(st.sampled_from(COMMANDS))
    argv = [command] if command else []
    if command == "lab":
        argv.append(draw(st.sampled_from(["list", "nope"])))
    for _ in range(draw(st.integers(0, 6))):
        argv.append(draw(st.sampled_from(FLAGS)))
        if draw(st.booleans()):
            argv.append(draw(st.sampled_from(VALUES + junk)))
    if command in ("info", "trace", "generate", "coref", "bench"):  # never load (or fetch) the real model here
        argv += ["--model", draw(st.sampled_from(["/nonexistent.gguf", junk[0], junk[4], "/dev/null"]))]
    if command == "fetch":
        argv.append("--help")  # fetching would download; its parsing is what is under test
    return argv


def _bench_parsed_only(tokens, *, repeats, decode_tokens, threads, **_) -> dict:
    """Stands in for ``txviz.bench.runner.run``: what the parser let through must be counts of at least 1."""
    counts = [*tokens, repeats, decode_tokens] + ([] if threads is None else [threads])
    if not all(isinstance(n, int) and n >= 1 for n in counts):
        raise AssertionError(f"bench was handed {tokens}, {repeats}, {decode_tokens}, {threads}")
    raise ValueError("parsed; the benchmark itself is not run here")


@fuzz(150)
@given(data=st.data())
def test_any_argv_exits_0_or_2_with_a_message_never_a_traceback(junk, data, monkeypatch, tmp_path):
    from txviz.cli import main

    monkeypatch.setenv("TXVIZ_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("txviz.bench.runner.run", _bench_parsed_only)  # bench's parsing is under test, not its timing
    argv = data.draw(argvs(junk))
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exit_:  # argparse: usage errors exit 2, --help exits 0
        code = exit_.code
    except BaseException:
        pytest.fail(f"txviz {argv!r} raised:\n{traceback.format_exc()}")
    assert code in (0, 2), (argv, code)
    if code == 2:
        said = err.getvalue() + out.getvalue()
        assert "error" in said and "Traceback" not in said, (argv, said)



@fuzz(100)
@given(flags=st.lists(st.tuples(st.sampled_from(["--tokens", "--repeats", "--decode-tokens", "--threads"]),
                                st.integers(-3, 3).map(str) | st.sampled_from(VALUES)), max_size=4),
       quick=st.booleans())
def test_bench_counts_below_1_never_reach_the_benchmark(flags, quick, monkeypatch):
    """``--tokens -5`` once crashed in a worker, ``--tokens 0`` failed after the workers started."""
    from txviz.cli import main

    monkeypatch.setattr("txviz.bench.runner.run", _bench_parsed_only)
    argv = ["bench", *(["--quick"] if quick else []), *[item for pair in flags for item in pair]]
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2 and "error" in err.getvalue(), (argv, err.getvalue())

# ---- loaders fed corrupted files ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def good_gguf(tmp_path_factory):
    from gguf import GGMLQuantizationType as Q

    from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf

    config = tiny()
    return write_gguf(tmp_path_factory.mktemp("gguf") / "m.gguf", config, weights_of(config), qtype=Q.Q8_0).read_bytes()


@fuzz(80)
@given(seed=st.integers(0, 2**32 - 1), n_flips=st.integers(1, 6), cut=st.none() | st.floats(0.0, 1.0),
       header_only=st.booleans())
def test_corrupted_gguf_files_load_or_raise_model_load_error(good_gguf, tmp_path_factory, seed, n_flips, cut,
                                                            header_only):
    from txviz.loading import load
    from txviz.loading.errors import ModelLoadError

    rng = random.Random(seed)
    data = bytearray(good_gguf)
    region = 4096 if header_only else len(data)  # the header and key/values, or anywhere
    for _ in range(n_flips):
        data[rng.randrange(region)] = rng.randrange(256)
    if cut is not None:
        data = data[: int(len(data) * cut)]
    path = tmp_path_factory.mktemp("fuzz") / "m.gguf"
    path.write_bytes(bytes(data))
    try:
        loaded = load(path, device="cpu")
    except ModelLoadError:
        return
    with torch.inference_mode():  # whatever loaded must run
        loaded.model(torch.zeros(1, 3, dtype=torch.long))


@fuzz(40)
@given(seed=st.integers(0, 2**32 - 1), n_flips=st.integers(1, 4), cut=st.none() | st.integers(0, 400))
def test_corrupted_safetensors_headers_raise_model_load_error(tmp_path_factory, seed, n_flips, cut):
    from safetensors.torch import save_file

    from txviz.loading.errors import ModelLoadError
    from txviz.loading.hf.loader import read_tensors

    path = tmp_path_factory.mktemp("st") / "model.safetensors"
    save_file({"a": torch.randn(4, 8), "b": torch.arange(6, dtype=torch.int64)}, str(path))
    data = bytearray(path.read_bytes())
    rng = random.Random(seed)
    header = 8 + int.from_bytes(data[:8], "little")
    for _ in range(n_flips):
        data[rng.randrange(header)] = rng.randrange(256)
    path.write_bytes(bytes(data[:cut] if cut is not None else data))
    try:
        tensors = read_tensors([path], torch.device("cpu"), torch.float32)
    except ModelLoadError:
        return
    assert all(isinstance(t, torch.Tensor) for t in tensors.values())


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10, 2**40) | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                        max_size=3), max_leaves=6)


@fuzz(150)
@given(base=st.sampled_from(["LLAMA_3_1_8B", "MIXTRAL_8X7B", "QWEN2_5_7B_YARN", "GPT2_SMALL", "MISTRAL_7B_V01"]),
       changes=st.dictionaries(st.sampled_from(["hidden_size", "num_attention_heads", "num_key_value_heads",
                                                "num_hidden_layers", "intermediate_size", "vocab_size",
                                                "max_position_embeddings", "rope_scaling", "rope_theta", "head_dim",
                                                "sliding_window", "n_embd", "n_head", "n_layer", "n_positions",
                                                "num_local_experts", "num_experts_per_tok", "model_type",
                                                "architectures", "tie_word_embeddings", "rms_norm_eps"]),
                               JSON_VALUES, max_size=3),
       as_bytes=st.booleans())
def test_any_uploaded_config_is_read_or_refused_and_the_calculator_runs(base, changes, as_bytes):
    """What the KV page does with an uploaded config.json, on published configs with random edits."""
    import tests.helpers.published_hf_configs as published
    from txviz.analysis.kv import memory, memory_model
    from txviz.analysis.kv.fit import max_context
    from txviz.loading.errors import ModelLoadError
    from txviz.loading.hf.config import read_hf_config

    raw = getattr(published, base, None)
    assume(raw is not None)
    edited = {**raw, **changes}
    try:
        source = json.dumps(edited, allow_nan=True).encode() if as_bytes else edited
    except (TypeError, ValueError):
        return
    try:
        config = read_hf_config(source)
    except ModelLoadError:
        return
    spec = memory_model.as_memory_model(memory_model.MemoryModel.from_config(config))
    lengths = memory.context_lengths(int(spec.max_context or 131072))
    try:
        variants = memory_model.kind_variants(spec)
    except ValueError:
        variants = {spec.kind: spec}
    memory.kv_vs_context(variants, lengths, batch=4, kv_dtype="fp8")
    for selected in variants.values():
        memory.token_kv_bytes(selected, "bf16")
        max_context(selected, 80.0, batch=2, kv_dtype="bf16")
        memory.weight_bytes(selected, "int4")
        memory.kv_vs_batch(selected, [1, 64], tokens=min(8192, lengths[-1]), kv_dtype="bf16")
