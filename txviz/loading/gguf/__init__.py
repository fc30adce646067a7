"""The GGUF wing: llama.cpp's one-file format read with a bounded reader (``reader``), its fields checked
(``fields``), the loader that turns a header and its dequantized tensors into a LoadedModel (``loader``),
the tensor names every architecture shares (``names``), what each architecture adds (``family``; one
module each: ``llama``, ``qwen``, ``qwen2moe``, ``phi3``, ``gemma``, ``olmoe``, registered in ``families``),
and the float32 copy that makes later loads fast (``float32_copy``). Nothing is named here: import the
module that holds what you need."""
