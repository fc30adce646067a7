"""The GGUF wing: llama.cpp's one-file format read with a bounded reader (``reader``), its fields checked
(``fields``), the Gemma family's own fields and names (``gemma``), the loader that turns a header and its
dequantized tensors into a LoadedModel (``loader``), and the float32 copy that makes later loads fast
(``float32_copy``). Nothing is named here: import the module that holds what you need."""
