"""The lab: tiny decoders trained on the CPU in minutes, one architectural choice apart.

    corpus.py     seeded, generated English stories (he/she/it/they, recurring names and phrases)
    tokenizer.py  the word-level tokenizer built on them (``<|endoftext|>`` opens every story)
    data.py       stories → token tensors, seeded training batches, validation windows
    recorder.py   a recorder that keeps captures with gradients (router logits for the aux loss)
    balancing.py  the Switch/GShard load-balancing loss and expert load
    train.py      AdamW + warmup/cosine training loop, seeded, with a progress callback
    evaluate.py   validation loss at 1×/2×/4× the training context, expert load; probes.py
    artifacts.py  the files a run writes (safetensors, config.json, tokenizer.json, curves, eval)
    zoo.py        the variant table and ``train_zoo``; ``txviz lab`` (cli.py) drives it

The trained zoo ships in ``assets/zoo/<variant>/`` and loads with ``txviz.loading.load``.
"""
