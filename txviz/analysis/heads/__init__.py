"""What each attention head does on a prompt (seed §1.4): per-head summaries of the attention
pattern, pattern detectors, one head step by step, and a trace written out for download."""
