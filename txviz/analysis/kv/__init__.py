"""The KV cache and serving memory: the real cache while generating, counterfactual
KV sharing (MHA / GQA / MQA) on a loaded model, cached vs uncached decoding, and the memory bill
(weights + KV cache + activations) of published models."""
