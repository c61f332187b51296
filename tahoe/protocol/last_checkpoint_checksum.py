"""The `_last_checkpoint` JSON checksum (spec "JSON checksum", "How to URL encode keys and string
values"): canonicalization of a JSON object to `path=value` pairs and the MD5 over it.

Owns: parsing the JSON text so numbers keep their literal text and duplicate keys are rejected
(`CorruptLogError`), canonicalizing, checking a file's `checksum` field, and adding one for writers.
Empty objects and arrays have no leaf values and so contribute nothing (this is what delta-spark
does: every `"metadata":{}` in a golden table's checkpointSchema is skipped and the checksums match).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any
from urllib.parse import quote

from ..errors import CorruptLogError

__all__ = ["canonicalize", "canonicalize_text", "checksum_of", "verify", "with_checksum",
           "parse_preserving_numbers", "CHECKSUM_KEY"]

CHECKSUM_KEY = "checksum"


class _NumberText(str):
    """A JSON number kept as the exact text it had in the document."""


def _reject_constant(name: str) -> Any:
    raise CorruptLogError(f"invalid JSON number {name!r} in _last_checkpoint")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    d: dict = {}
    for k, v in pairs:
        if k in d:
            raise CorruptLogError(f"duplicate key {k!r} in _last_checkpoint JSON")
        d[k] = v
    return d


def parse_preserving_numbers(json_text: str) -> Any:
    """Parse JSON keeping numeric literals as their text; duplicate keys or bad JSON ->
    CorruptLogError."""
    try:
        return json.loads(json_text, parse_int=_NumberText, parse_float=_NumberText,
                          parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        raise CorruptLogError(f"_last_checkpoint is not valid JSON: {e}") from e


def _encode(s: str) -> str:
    # quote() leaves exactly A-Za-z0-9 and "-._~" unescaped and writes uppercase hex, over UTF-8.
    return '"' + quote(s, safe="") + '"'


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, _NumberText):
        return str(v)
    if isinstance(v, str):
        return _encode(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"non-finite number {v!r} cannot appear in JSON")
        return json.dumps(v)   # the same text json.dumps will write into the file
    raise TypeError(f"value of type {type(v).__name__} is not JSON: {v!r}")


def _leaves(v: Any, path: str, out: list[tuple[bytes, str]]) -> None:
    if isinstance(v, dict):
        for k, x in v.items():
            if not isinstance(k, str):
                raise TypeError(f"JSON object key must be a string, got {k!r}")
            _leaves(x, f"{path}+{_encode(k)}", out)
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            _leaves(x, f"{path}+{i}", out)
    else:
        out.append((path.encode("utf-8"), f"{path}={_scalar(v)}"))


def canonicalize(obj: dict) -> str:
    """Canonical form of a JSON object (top-level "checksum" ignored). Numbers parsed by
    `parse_preserving_numbers` keep their text; Python ints/floats are written as json.dumps does."""
    if not isinstance(obj, dict):
        raise TypeError(f"the checksum is defined for a JSON object, got {type(obj).__name__}")
    out: list[tuple[bytes, str]] = []
    for k, v in obj.items():
        if k == CHECKSUM_KEY:
            continue
        _leaves(v, _encode(k), out)
    out.sort(key=lambda pair: pair[0])   # byte-order sort on the UTF-8 paths
    return ",".join(pair for _, pair in out)


def _parse_object(json_text: str) -> dict:
    obj = parse_preserving_numbers(json_text)
    if not isinstance(obj, dict):
        raise CorruptLogError(f"_last_checkpoint is not a JSON object: {json_text[:100]!r}")
    return obj


def canonicalize_text(json_text: str) -> str:
    """Canonical form of JSON text (numbers as written; duplicate keys -> CorruptLogError)."""
    return canonicalize(_parse_object(json_text))


def checksum_of(obj_or_text: dict | str) -> str:
    """MD5 hex digest of the canonical form of a JSON object or JSON text."""
    canon = canonicalize_text(obj_or_text) if isinstance(obj_or_text, str) else canonicalize(obj_or_text)
    return hashlib.md5(canon.encode("utf-8")).hexdigest()


def verify(json_text: str) -> bool:
    """True if the JSON has no top-level checksum or it matches; invalid JSON -> CorruptLogError."""
    obj = _parse_object(json_text)
    stored = obj.get(CHECKSUM_KEY)
    if stored is None:
        return True
    if not isinstance(stored, str) or isinstance(stored, _NumberText):
        return False
    return stored.lower() == checksum_of(obj)


def with_checksum(obj: dict) -> dict:
    """A copy of `obj` with its "checksum" field set (replacing any existing one), for writers
    that serialize the result with json.dumps."""
    body = {k: v for k, v in obj.items() if k != CHECKSUM_KEY}
    return {**body, CHECKSUM_KEY: checksum_of(body)}
