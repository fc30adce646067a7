"""The benchmarks behind ``txviz bench``: is tracing interactive at full context, and how does it compare
with a plain forward and with transformers?

runner (plan the runs, spawn a fresh worker process per job, assemble the result), worker (one job in
its process), rounds (how many rounds a timing takes, and the clock), report (the Markdown tables),
targets (met or missed), attention (one attention layer timed by part, for a miss), models (several
models in one run), decoding (``--decoding``: plain generation against the per-step record a Decoding
page keeps, and a branch) with decoding_report. The benchmarks of one feature stay beside it: txviz.causal.bench, txviz.circuit.bench.
"""
