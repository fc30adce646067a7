"""Decoding, step by step: page.py lays out the page; one module per section."""
