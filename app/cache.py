"""Transitional facade (this session's restructure): every cached computation the pages use, by the
names they had in app/resources.py, app/kv_resources.py and app/zoo_resources.py. Being replaced by the
one module that holds every st.cache_* over app/services/."""

from app.resources import *  # noqa: F401,F403
from app.resources import _scaling_step_times, _scaling_store, _trace_cache  # noqa: F401
from app.kv_resources import *  # noqa: F401,F403
from app.zoo_resources import *  # noqa: F401,F403
