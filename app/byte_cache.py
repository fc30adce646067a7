"""Transitional: the byte-bounded cache moved to app/services/byte_cache.py (pure, no Streamlit)."""

from app.services.byte_cache import ByteBudgetCache  # noqa: F401
