"""What the Decoding page's sections read: the loaded model, the inputs, the run of those inputs, and
every token of it as text (the prompt's and the generated ones), read once per run."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DecodingView:
    loaded: object  # LoadedModel
    inputs: object  # app.services.decoding.DecodingInputs
    run: object  # txviz.decoding.Decoding
    texts: list[str] = field(default_factory=list)  # every token of run.ids, readable
    special: list[bool] = field(default_factory=list)

    @classmethod
    def of(cls, loaded, inputs, run) -> "DecodingView":
        tokenizer = loaded.tokenizer
        texts = [tokenizer.display(i) if i < tokenizer.vocab_size else f"#{i}" for i in run.ids]
        special = [i in tokenizer.special_ids for i in run.ids]
        return cls(loaded, inputs, run, texts, special)

    @property
    def config(self):
        return self.loaded.config

    @property
    def n_prompt(self) -> int:
        return len(self.run.prompt_ids)

    def generated(self) -> list[str]:
        return self.texts[self.n_prompt:]
