"""Attention page: every head of the loaded model on your prompt (page.py lays it out)."""
