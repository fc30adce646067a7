"""The Design tradeoffs page: ``page.py`` lays out the tabs; each group of tabs is one module here
(capacity, attention_kinds, context, measured), with the zoo's shared tables in ``zoo_findings``."""
