"""Reading the small JSON side files of a checkpoint (config.json, tokenizer_config.json, …) safely:
bounded size, valid JSON, an object at the top — or a ModelLoadError that says which file and why."""

from __future__ import annotations

import json
from pathlib import Path

from txviz.loading.errors import ModelLoadError


def read_json_object(path: Path, max_bytes: int) -> dict:
    if path.stat().st_size > max_bytes:
        raise ModelLoadError(f"{path} is too large ({path.stat().st_size} bytes)")
    try:
        data = json.loads(path.read_bytes())
    except (ValueError, RecursionError) as exc:
        raise ModelLoadError(f"{path} is not valid JSON: {str(exc)[:200]}") from exc
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path} must hold a JSON object, got {type(data).__name__}")
    return data
