"""What each attention head does on a prompt: per-head summaries of the attention
pattern, pattern detectors, one head step by step, and a trace written out for download."""
