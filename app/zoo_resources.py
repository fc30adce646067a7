"""Transitional: moved to app/cache.py (over app/services); kept until no page imports this module."""

from app.cache import *  # noqa: F401,F403
