"""Helpers shared by test files (never imported from another test file)."""
