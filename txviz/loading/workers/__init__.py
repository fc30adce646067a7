"""Worker scripts for txviz.loading.isolated: each runs alone in a child interpreter (``python -I``),
imports nothing from txviz, caps its own memory and CPU time, and answers one JSON request."""
