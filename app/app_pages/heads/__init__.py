"""Heads page: detectors for known head types, and the heads that resolve pronouns (page.py lays it out)."""
