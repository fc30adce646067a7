"""gpt-oss checkpoints with MXFP4 experts, as OpenAI publishes them: tensors quantized here (per 32-value block a
power-of-two scale and 4-bit E2M1 values, packed two a byte), dequantized exactly by txviz and as transformers'
own integrations/mxfp4.py does, and a tiny MXFP4 checkpoint whose logits equal transformers' model holding the
same (dequantized) weights. Then the published configs: gpt-oss-120b's parameter count."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch.testing import assert_close

from tests.helpers import tiny_gpt_oss
from tests.helpers.hf_reference import NEEDS_TRANSFORMERS
from tests.helpers.published_geometry_configs import GPT_OSS_120B
from tests.helpers.tiny_hf import edit_config, random_ids, save
from txviz.loading.errors import ModelLoadError
from txviz.loading.hf.families.mxfp4 import FP4_VALUES, dequantize
from txviz.loading.hf.loader import load_hf_dir, read_hf_config
from txviz.model.counts import count_params

pytestmark = NEEDS_TRANSFORMERS

TABLE = torch.tensor(FP4_VALUES)


def quantize(weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(…, R, C) → blocks (…, R, C/32, 16) uint8 and scales (…, R, C/32) uint8: each block's scale the power
    of two that brings its largest value within ±6, each value the nearest E2M1 number, low nibble first."""
    grouped = weights.reshape(*weights.shape[:-1], -1, 32)  # (…, R, G, 32)
    largest = grouped.abs().amax(-1).clamp_min(2.0 ** -100)
    exponent = torch.ceil(torch.log2(largest / 6.0)).to(torch.int32)  # (…, R, G)
    scaled = grouped / torch.exp2(exponent.float())[..., None]
    index = (scaled[..., None] - TABLE).abs().argmin(-1).to(torch.uint8)  # (…, R, G, 32)
    blocks = index[..., 0::2] | (index[..., 1::2] << 4)
    return blocks, (exponent + 127).to(torch.uint8)


def test_a_quantized_tensor_dequantizes_exactly_and_as_transformers_does():
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    generator = torch.Generator().manual_seed(0)
    values = TABLE[torch.randint(0, 16, (2, 3, 64), generator=generator)]  # (E, R, C) representable exactly
    scales = torch.randint(-6, 4, (2, 3, 2), generator=generator)  # a power of two per 32-value block
    weights = values * torch.exp2(scales.float()).repeat_interleave(32, dim=-1)
    blocks, stored_scales = quantize(weights)
    assert blocks.shape == (2, 3, 2, 16) and stored_scales.shape == (2, 3, 2)
    assert torch.equal(dequantize(blocks, stored_scales), weights)
    reference = convert_moe_packed_tensors(blocks, stored_scales, dtype=torch.float32)  # (E, C, R)
    assert torch.equal(dequantize(blocks, stored_scales).transpose(-1, -2), reference)


def test_mismatched_blocks_and_scales_are_refused():
    blocks = torch.zeros(2, 3, 2, 16, dtype=torch.uint8)
    with pytest.raises(ModelLoadError, match="do not match scales"):
        dequantize(blocks, torch.zeros(2, 3, 1, dtype=torch.uint8))
    with pytest.raises(ModelLoadError, match="must be uint8"):
        dequantize(blocks.float(), torch.zeros(2, 3, 2, dtype=torch.uint8))


def save_mxfp4(hf_model, directory):
    """The model's experts snapped to MXFP4 (in the model too, dequantized by transformers) and saved as OpenAI's checkpoints store them:
    ``_blocks``/``_scales`` of each matrix with rows = output features, and quantization_config mxfp4."""
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    save(hf_model, directory)
    tensors = load_file(directory / "model.safetensors")
    for name in [n for n in tensors if n.endswith(("experts.gate_up_proj", "experts.down_proj"))]:
        blocks, scales = quantize(tensors.pop(name).transpose(-1, -2).contiguous())  # (E, out, in)
        tensors[f"{name}_blocks"], tensors[f"{name}_scales"] = blocks, scales
        with torch.no_grad():
            hf_model.get_parameter(name).copy_(convert_moe_packed_tensors(blocks, scales, dtype=torch.float32))
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    edit_config(directory, lambda c: {**c, "quantization_config": {
        "quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                            "model.embed_tokens", "lm_head"]}})
    return directory


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    hf_model = tiny_gpt_oss.build()
    directory = save_mxfp4(hf_model, tmp_path_factory.mktemp("mxfp4"))
    return hf_model, directory


def test_an_mxfp4_checkpoint_runs_as_transformers_model_with_those_weights(quantized):
    hf_model, directory = quantized
    assert "experts.gate_up_proj_blocks" in " ".join(load_file(directory / "model.safetensors"))
    loaded = load_hf_dir(directory, device="cpu")
    ids = random_ids(hf_model.config.vocab_size)
    with torch.no_grad():
        assert_close(loaded.model(ids), hf_model(ids).logits, atol=1e-4, rtol=1e-4)
    assert loaded.n_params == hf_model.num_parameters()
    assert "stored in MXFP4" in loaded.metadata["weights_note"]  # the sidebar says so


def test_a_half_pair_and_other_quantizations_are_refused(quantized, tmp_path):
    _, directory = quantized
    tensors = load_file(directory / "model.safetensors")
    del tensors["model.layers.0.mlp.experts.down_proj_scales"]
    broken = tmp_path / "broken"
    broken.mkdir()
    save_file(tensors, str(broken / "model.safetensors"))
    (broken / "config.json").write_text((directory / "config.json").read_text())
    with pytest.raises(ModelLoadError, match="down_proj_blocks has no .*down_proj_scales"):
        load_hf_dir(broken, device="cpu")
    edit_config(broken, lambda c: {**c, "quantization_config": {"quant_method": "gptq"}})
    with pytest.raises(ModelLoadError, match=r"quantized checkpoint \(gptq\)"):
        load_hf_dir(broken, device="cpu")


def test_the_preflight_passes_an_mxfp4_gpt_oss_and_refuses_mxfp4_elsewhere(quantized, tmp_path):
    """The app offers a folder only after the isolated header check: it must judge as the loader does."""
    from tests.helpers.tiny_hf import build
    from txviz.loading import preflight

    _, directory = quantized
    llama = save(build("llama_gqa"), tmp_path / "llama")
    edit_config(llama, lambda c: {**c, "quantization_config": {"quant_method": "mxfp4"}})
    preflight.forget()
    try:
        verdicts = preflight.problems([directory, llama])
    finally:
        preflight.forget()
    assert verdicts[str(directory)] is None
    assert "quantized checkpoint (mxfp4)" in verdicts[str(llama)]


def test_mxfp4_is_read_only_for_gpt_oss(tmp_path):
    from tests.helpers.tiny_hf import build

    directory = save(build("llama_gqa"), tmp_path)
    edit_config(directory, lambda c: {**c, "quantization_config": {"quant_method": "mxfp4"}})
    with pytest.raises(ModelLoadError, match=r"quantized checkpoint \(mxfp4\)"):
        load_hf_dir(directory, device="cpu")


def test_the_published_120b_config_counts_what_transformers_builds():
    import transformers

    fields = {k: v for k, v in GPT_OSS_120B.items() if k not in ("architectures", "quantization_config")}
    with torch.device("meta"):
        reference = transformers.GptOssForCausalLM(transformers.AutoConfig.for_model(**fields))
    config = read_hf_config(json.loads(json.dumps(GPT_OSS_120B)))
    assert count_params(config) == reference.num_parameters() == 116_829_156_672
    assert config.layer_windows[:2] == (128, None) and config.attn_sinks
