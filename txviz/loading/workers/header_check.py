"""Read model files' headers in a capped child process and describe them in plain JSON.

A GGUF file is parsed with txviz's bounded reader (``txviz/loading/gguf/reader.py``: numpy and the gguf
package only, loaded here by its path so that neither txviz nor torch is imported): every count bounded
by the bytes left, tensor data aligned, inside the file and apart. Its metadata comes back with arrays
elided to their length and first items; its tensor table as (name, GGUF dims, type, elements).

A checkpoint directory (config.json + safetensors) comes back as its config.json and the tensor table
of each weight file's header (the 8-byte length, then JSON), checked the way the safetensors format
defines it: known dtypes, whole shapes, data offsets inside the file, matching the shape, not overlapping.
No tensor data is read. The parent (txviz.loading.preflight) judges the description.

Request: {"paths", "reader", "max_config_bytes"}; reply: {"results": [{"path", "gguf" | "dir" | "error"}]}.
"""

from __future__ import annotations

import importlib.util
import json
import math
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _serve import serve  # noqa: E402

ARRAY_HEAD = 64  # items kept of each metadata array: enough to type-check it (one element type per array)
MAX_STRING = 4096  # characters kept of a metadata string (chat templates are informative only here)
MAX_SAFETENSORS_HEADER = 100 << 20  # the safetensors library's own limit
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
               "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
INDEX_FILE, SINGLE_FILE = "model.safetensors.index.json", "model.safetensors"


class BadFile(Exception):
    """The file is not what it claims; the message says why."""


def _reader_class(reader_path: str):
    spec = importlib.util.spec_from_file_location("txviz_gguf_reader", reader_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FastGGUFReader


def _metadata_value(field):
    from gguf import GGUFValueType

    if field.types and field.types[0] == GGUFValueType.ARRAY:
        count = len(field.data)
        return {"count": count, "head": field.contents(slice(0, min(count, ARRAY_HEAD))) if count else []}
    value = field.contents()
    return value[:MAX_STRING] if isinstance(value, str) else value


def describe_gguf(path: Path, reader_path: str) -> dict:
    try:
        reader = _reader_class(reader_path)(path)
    except (ValueError, KeyError, IndexError, TypeError, OverflowError, UnicodeDecodeError) as error:
        raise BadFile(f"not a readable GGUF file (truncated or corrupt?): {type(error).__name__}: {error}") from None
    tensors = []
    for tensor in reader.tensors:
        if tensor.data.nbytes != tensor.n_bytes:
            raise BadFile(f"tensor {tensor.name} is cut short: the file is truncated")
        tensors.append([tensor.name, [int(n) for n in tensor.shape.tolist()], tensor.tensor_type.name,
                        int(tensor.n_elements)])
    metadata = {key: _metadata_value(field) for key, field in reader.fields.items() if not key.startswith("GGUF.")}
    return {"metadata": metadata, "tensors": tensors}


def _read_json(path: Path, max_bytes: int) -> dict:
    # txviz.loading.json_files.read_json_object's rule, restated: this child imports neither txviz nor torch
    if path.stat().st_size > max_bytes:
        raise BadFile(f"{path.name} is {path.stat().st_size:,} bytes: too large (limit {max_bytes:,})")
    try:
        data = json.loads(path.read_bytes())
    except (ValueError, RecursionError) as error:
        raise BadFile(f"{path.name} is not valid JSON: {str(error)[:200]}") from None
    if not isinstance(data, dict):
        raise BadFile(f"{path.name} must hold a JSON object, got {type(data).__name__}")
    return data


def _weight_files(directory: Path, max_bytes: int) -> list[Path]:
    if (directory / INDEX_FILE).is_file():
        weight_map = _read_json(directory / INDEX_FILE, max_bytes).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise BadFile(f"{INDEX_FILE} has no weight_map")
        names = sorted({str(name) for name in weight_map.values()})
        if any(Path(name).name != name or not name.endswith(".safetensors") for name in names):
            raise BadFile(f"{INDEX_FILE} names files that are not .safetensors files beside it")
        return [directory / name for name in names]
    if (directory / SINGLE_FILE).is_file():
        return [directory / SINGLE_FILE]
    raise BadFile(f"no weights: expected {SINGLE_FILE} or {INDEX_FILE}")


def _tensor_entry(name: str, entry, data_bytes: int) -> tuple[int, int, list]:
    """(start, end, [name, dtype, shape]) of one safetensors header entry, or BadFile."""
    if not isinstance(entry, dict) or entry.get("dtype") not in DTYPE_BYTES:
        raise BadFile(f"tensor {name[:80]} has no known dtype")
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise BadFile(f"tensor {name[:80]} has an invalid shape {str(shape)[:60]}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(n, int) for n in offsets)):
        raise BadFile(f"tensor {name[:80]} has invalid data offsets")
    start, end = offsets
    if not 0 <= start <= end <= data_bytes:
        raise BadFile(f"tensor {name[:80]}'s data ({start:,}–{end:,}) lies outside the file's {data_bytes:,} data bytes")
    if end - start != math.prod(shape) * DTYPE_BYTES[entry["dtype"]]:
        raise BadFile(f"tensor {name[:80]}'s data is {end - start:,} bytes, its shape {shape} needs "
                      f"{math.prod(shape) * DTYPE_BYTES[entry['dtype']]:,}")
    return start, end, [name, entry["dtype"], shape]


def safetensors_table(path: Path) -> list[list]:
    """[name, dtype, shape] of every tensor in a safetensors file, from its header alone."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise BadFile(f"{path.name} is too short for a safetensors file")
        (length,) = struct.unpack("<Q", prefix)
        if length > min(MAX_SAFETENSORS_HEADER, size - 8):
            raise BadFile(f"{path.name}'s header claims {length:,} bytes (the file has {size:,})")
        try:
            header = json.loads(handle.read(length))
        except (ValueError, RecursionError):
            raise BadFile(f"{path.name}'s header is not valid JSON") from None
    if not isinstance(header, dict):
        raise BadFile(f"{path.name}'s header is not a JSON object")
    spans = sorted(_tensor_entry(str(name), entry, size - 8 - length)
                   for name, entry in header.items() if name != "__metadata__")
    for (_, end, first), (start, _, second) in zip(spans, spans[1:]):
        if start < end:
            raise BadFile(f"{path.name}: tensors {first[0][:60]} and {second[0][:60]} overlap")
    return [table for _, _, table in spans]


def describe_dir(directory: Path, max_config_bytes: int) -> dict:
    config = _read_json(directory / "config.json", max_config_bytes)
    tables = {}
    for path in _weight_files(directory, max_config_bytes):
        if not path.is_file():
            raise BadFile(f"{path.name} is missing")
        tables[path.name] = safetensors_table(path)
    return {"config": config, "tensors": [row for rows in tables.values() for row in rows]}


def describe(path: str, request: dict) -> dict:
    target = Path(path)
    try:
        if target.is_dir():
            return {"path": path, "dir": describe_dir(target, int(request["max_config_bytes"]))}
        return {"path": path, "gguf": describe_gguf(target, request["reader"])}
    except BadFile as error:
        return {"path": path, "error": str(error)}
    except OSError as error:
        return {"path": path, "error": f"cannot read it: {error.strerror or error}"}


def handle(request: dict) -> dict:
    return {"results": [describe(path, request) for path in request["paths"]]}


if __name__ == "__main__":
    serve(handle)
