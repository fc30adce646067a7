"""KV cache & memory page: page.py lays out the tabs; one module per tab."""
