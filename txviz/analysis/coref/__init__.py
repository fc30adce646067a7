"""Coreference heads: which heads look from a pronoun back to the noun it stands
for, on the reader's own sentences and on a built-in set, and the model's own answer."""
