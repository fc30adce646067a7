"""The Hugging Face wing: a checkpoint directory's config.json read into a ModelConfig (``config``), its
tensor names mapped onto txviz's (``names``), and the loader of config.json + safetensors (+ tokenizer.json)
into a LoadedModel (``loader``). Nothing is named here: import the module that holds what you need."""
