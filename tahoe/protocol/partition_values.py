"""Partition values (spec "Partition Value Serialization") and Hive-style directories: parsing
(`parse_partition_value`, `partition_column_to_arrow`), serializing (`serialize_partition_value`), and
`col=value/...` names with Hive's escaping (`escape_path_name`, `partition_path`).

  1. A JSON null and the empty string both mean null, for every type.
  2. Timestamps are written as delta-spark >= 3.3 does (`write.utcTimestampPartitionValues`): UTC with
     microseconds and a `Z`, `2021-09-08T11:11:11.000000Z`.
  3. Both forms are read: a zoned value is that instant; a zone-less one is wall-clock time in `time_zone`
     (`tahoe.protocol.timestamps`)."""

from __future__ import annotations

import math
import re
from datetime import date, datetime, timedelta, timezone
from decimal import Context, Decimal, InvalidOperation
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptLogError, SchemaError
from .schema import DataType, DecimalType, PrimitiveType, to_arrow_type
from .timestamps import localize, zone as tz_of
from . import column_mapping

__all__ = [
    "HIVE_DEFAULT_PARTITION", "parse_partition_value", "partition_column_to_arrow",
    "serialize_partition_value", "escape_path_name", "unescape_path_name", "partition_path",
    "parse_partition_path",
]

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

_INT_RANGES = {
    "byte": (-(1 << 7), (1 << 7) - 1), "short": (-(1 << 15), (1 << 15) - 1),
    "integer": (-(1 << 31), (1 << 31) - 1), "long": (-(1 << 63), (1 << 63) - 1),
}

_DATE_RE = re.compile(r"^\s*([+-]?\d{4,})-(\d{1,2})-(\d{1,2})\s*$")
# date, then optional time with optional fraction (up to 9 digits), then optional zone
_TS_RE = re.compile(
    r"^\s*([+-]?\d{4,})-(\d{1,2})-(\d{1,2})"
    r"(?:[T ](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{0,9}))?)?)?"
    r"\s*(Z|UTC|GMT|[+-]\d{2}(?::?\d{2}(?::?\d{2})?)?)?\s*$",
    re.IGNORECASE,
)
_DEC_CTX = Context(prec=100)  # room for 38 digits; the default context (28) would reject them


_ZONE_SUFFIX = r"(Z|UTC|GMT|[+-]\d{2}(:?\d{2}(:?\d{2})?)?)\s*$"


def _bad(text: str, dt: DataType, why: str = "") -> CorruptLogError:
    return CorruptLogError(f"invalid partition value {text!r} for type {dt.simple_string()}"
                           + (f": {why}" if why else ""))


def _parse_offset(z: str) -> timedelta:
    z = z.upper()
    if z in ("Z", "UTC", "GMT"):
        return timedelta(0)
    sign = -1 if z[0] == "-" else 1
    digits = z[1:].replace(":", "")
    h = int(digits[0:2])
    m = int(digits[2:4]) if len(digits) >= 4 else 0
    s = int(digits[4:6]) if len(digits) >= 6 else 0
    return sign * timedelta(hours=h, minutes=m, seconds=s)


def _parse_timestamp(text: str, dt: DataType, ntz: bool, time_zone: str | None = None) -> datetime:
    m = _TS_RE.match(text)
    if not m:
        raise _bad(text, dt)
    year, month, day, hh, mi, ss, frac, zone = m.groups()
    micros = int((frac or "").ljust(6, "0")[:6]) if frac else 0
    try:
        naive = datetime(int(year), int(month), int(day), int(hh or 0), int(mi or 0), int(ss or 0), micros)
    except ValueError as e:
        raise _bad(text, dt, str(e)) from None
    if ntz:
        if zone:
            raise _bad(text, dt, "timestamp_ntz values carry no time zone")
        return naive
    try:
        if zone:
            return (naive - _parse_offset(zone)).replace(tzinfo=timezone.utc)
        return localize(naive, time_zone)   # zone-less: wall-clock time in the reader's zone
    except OverflowError:
        raise _bad(text, dt, "out of range") from None


def _parse_date(text: str, dt: DataType) -> date:
    m = _DATE_RE.match(text)
    if not m:
        # Spark accepts a timestamp string for a date column as well; take its date part.
        ts = _TS_RE.match(text)
        if not ts:
            raise _bad(text, dt)
        m = ts
    try:
        return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError as e:
        raise _bad(text, dt, str(e)) from None


def _parse_decimal(text: str, dt: DecimalType) -> Decimal:
    try:
        d = Decimal(text.strip())
    except InvalidOperation:
        raise _bad(text, dt) from None
    if not d.is_finite():
        raise _bad(text, dt)
    q = d.quantize(Decimal(1).scaleb(-dt.scale), context=_DEC_CTX) if d.as_tuple().exponent != -dt.scale else d
    if q != d:
        raise _bad(text, dt, f"more than {dt.scale} decimal places")
    if len(q.as_tuple().digits) > dt.precision and q != 0:
        raise _bad(text, dt, f"does not fit in precision {dt.precision}")
    return q


def parse_partition_value(text: str | None, dt: DataType, *, time_zone: str | None = None) -> Any:
    """The typed Python value of one partition value string (None for null / empty string).

    string → str; byte/short/integer/long → int; float/double → float (NaN/Infinity/-Infinity
    accepted); boolean → bool; decimal → Decimal at the column's scale; date → date;
    timestamp → timezone-aware datetime in UTC (a zone-less value read in `time_zone`, see the
    module docstring); timestamp_ntz → naive datetime; binary → the string's UTF-8 bytes. A
    string that does not parse raises CorruptLogError."""
    if text is None or text == "":
        return None
    if not isinstance(text, str):
        raise _bad(repr(text), dt, "partition values must be strings")
    if isinstance(dt, DecimalType):
        return _parse_decimal(text, dt)
    if not isinstance(dt, PrimitiveType):
        raise SchemaError(f"type {dt.simple_string()} cannot be a partition column type")
    name = dt.name
    if name == "string":
        return text
    if name in _INT_RANGES:
        try:
            v = int(text.strip())
        except ValueError:
            raise _bad(text, dt) from None
        lo, hi = _INT_RANGES[name]
        if not lo <= v <= hi:
            raise _bad(text, dt, "out of range")
        return v
    if name in ("float", "double"):
        try:
            return float(text.strip())
        except ValueError:
            raise _bad(text, dt) from None
    if name == "boolean":
        low = text.strip().lower()
        if low == "true":
            return True
        if low == "false":
            return False
        raise _bad(text, dt)
    if name == "date":
        return _parse_date(text, dt)
    if name == "timestamp":
        return _parse_timestamp(text, dt, ntz=False, time_zone=time_zone)
    if name == "timestamp_ntz":
        return _parse_timestamp(text, dt, ntz=True)
    if name == "binary":
        return text.encode("utf-8")
    if name == "void":
        return None
    raise SchemaError(f"type {name} cannot be a partition column type")


# --- vectorised --------------------------------------------------------------------------------

def _to_string_array(values: list[str | None] | pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if not isinstance(values, pa.Array):
        values = pa.array(values, type=pa.string())
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        values = values.cast(pa.string())
    if values.null_count < len(values):
        # empty string means null for every type (no Python literal here: converting one makes
        # pyarrow import pandas)
        empty = pc.invert(pc.cast(pc.utf8_length(values), pa.bool_()))
        values = pc.if_else(empty, pa.nulls(len(values), values.type), values)
    return values


def _per_unique(arr: pa.Array, target: pa.DataType, parse: Callable[[str], Any]) -> pa.Array:
    """Parse each distinct string once and spread the results back (partition columns repeat
    a handful of values many times)."""
    enc = pc.dictionary_encode(arr)
    uniques = enc.dictionary.to_pylist()
    parsed = pa.array([parse(u) for u in uniques], type=target)
    return pc.take(parsed, enc.indices)


def partition_column_to_arrow(values: list[str | None] | pa.Array | pa.ChunkedArray, dt: DataType, *,
                              time_zone: str | None = None) -> pa.Array:
    """A whole partition column at once: the serialized strings (list or Arrow string array) →
    an Arrow array of `to_arrow_type(dt)`. Simple types go through Arrow casts; timestamps that
    need it and decimals parse each distinct value once. Zone-less timestamps are wall-clock
    time in `time_zone` (default UTC; see the module docstring)."""
    arr = _to_string_array(values)
    target = to_arrow_type(dt)
    if arr.null_count == len(arr):
        return pa.nulls(len(arr), target)
    if isinstance(dt, DecimalType):
        return _per_unique(arr, target, lambda s: _parse_decimal(s, dt))
    if not isinstance(dt, PrimitiveType):
        raise SchemaError(f"type {dt.simple_string()} cannot be a partition column type")
    name = dt.name
    if name == "string":
        return arr.cast(target)
    if name == "binary":
        return arr.cast(pa.binary())
    if name == "void":
        return pa.nulls(len(arr), target)
    if name == "boolean":
        low = pc.utf8_lower(pc.utf8_trim_whitespace(arr))
        ok = pc.or_kleene(pc.equal(low, "true"), pc.equal(low, "false"))
        if not pc.all(pc.fill_null(ok, True)).as_py():
            return _per_unique(arr, target, lambda s: parse_partition_value(s, dt))  # raises
        return pc.equal(low, "true")
    if name in _INT_RANGES or name in ("float", "double", "date"):
        try:
            return pc.cast(pc.utf8_trim_whitespace(arr), target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            # spellings Arrow's parser rejects but the spec's readers accept (e.g. "+3"), or a
            # malformed value: parse each distinct value, which names the bad one
            return _per_unique(arr, target, lambda s: parse_partition_value(s, dt))
    if name == "timestamp":
        zoned = pc.match_substring_regex(arr, _ZONE_SUFFIX, ignore_case=True)
        n_zoned = pc.sum(zoned).as_py() or 0
        n_valid = len(arr) - arr.null_count
        utc = tz_of(time_zone) is timezone.utc
        try:
            if n_zoned == 0 and utc:  # the spec's zone-less form, read in UTC
                return pc.cast(arr, pa.timestamp("us")).cast(target)
            if n_zoned == n_valid:  # ISO-8601 with a zone on every value
                return pc.cast(arr, target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        return _per_unique(arr, target, lambda s: _parse_timestamp(s, dt, ntz=False, time_zone=time_zone))
    if name == "timestamp_ntz":
        try:
            return pc.cast(arr, target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return _per_unique(arr, target, lambda s: _parse_timestamp(s, dt, ntz=True))
    raise SchemaError(f"type {name} cannot be a partition column type")


# --- writers -----------------------------------------------------------------------------------

def _fmt_time(d: datetime) -> str:
    s = f"{d.year:04d}-{d.month:02d}-{d.day:02d} {d.hour:02d}:{d.minute:02d}:{d.second:02d}"
    if d.microsecond:
        s += "." + f"{d.microsecond:06d}".rstrip("0")
    return s


def _to_datetime(value: Any, dt: DataType, time_zone: str | None = None) -> datetime:
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    if isinstance(value, str):
        return _parse_timestamp(value, dt, ntz=(dt.simple_string() == "timestamp_ntz"), time_zone=time_zone)
    if isinstance(value, np.datetime64):
        return value.astype("datetime64[us]").astype(datetime)
    if hasattr(value, "to_pydatetime"):  # pandas scalars
        return value.to_pydatetime()
    raise SchemaError(f"cannot use {value!r} as a {dt.simple_string()} partition value")


def serialize_partition_value(value: Any, dt: DataType, *, iso_timestamps: bool = True,
                              time_zone: str | None = None, wall_clock_zone: str | None = None) -> str | None:
    """The partitionValues string for a typed value (None for null; an empty string is null too).

    Forms follow delta-spark: booleans `true`/`false`; integers and decimals as plain digits
    (decimals at the column's scale, never in exponent notation); floats as the shortest
    round-tripping repr with Java's `NaN`/`Infinity`/`-Infinity`; dates `YYYY-MM-DD`;
    timestamps in UTC as `YYYY-MM-DD HH:MM:SS[.ffffff]` with trailing zeros of the fraction
    dropped (the spec's form, readable by every reader); `iso_timestamps=True` writes
    `YYYY-MM-DDTHH:MM:SS.ffffffZ` instead, like delta-spark >= 3.3 (older readers cannot parse
    it); with `wall_clock_zone` (and `iso_timestamps=False`) a timestamp is written as the
    zone-less wall-clock time there — what delta-spark < 3.3 wrote, and delta-spark writes with
    `spark.databricks.delta.write.utcTimestampPartitionValues=false`: the session zone's `CAST(ts
    AS STRING)`. timestamp_ntz values are written as they are (naive). Binary values must be UTF-8."""
    if value is None:
        return None
    if isinstance(dt, DecimalType):
        try:
            d = value if isinstance(value, Decimal) else Decimal(str(value))
            q = d.quantize(Decimal(1).scaleb(-dt.scale), context=_DEC_CTX)
        except (InvalidOperation, ValueError):
            raise SchemaError(f"cannot use {value!r} as a {dt.simple_string()} partition value") from None
        if q != d:
            raise SchemaError(f"partition value {value!r} has more than {dt.scale} decimal places "
                              f"({dt.simple_string()})")
        if len(q.as_tuple().digits) > dt.precision and q != 0:
            raise SchemaError(f"partition value {value!r} does not fit {dt.simple_string()}")
        return format(q, "f")
    if not isinstance(dt, PrimitiveType):
        raise SchemaError(f"type {dt.simple_string()} cannot be a partition column type")
    name = dt.name
    if name == "string":
        s = str(value)
        return s if s != "" else None
    if name == "boolean":
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower()
        return "true" if bool(value) else "false"
    if name in _INT_RANGES:
        if isinstance(value, float) and not value.is_integer():
            raise SchemaError(f"partition value {value!r} is not an integer ({name})")
        v = int(value)
        lo, hi = _INT_RANGES[name]
        if not lo <= v <= hi:
            raise SchemaError(f"partition value {v} is out of range for {name}")
        return str(v)
    if name in ("float", "double"):
        f = float(value)
        if math.isnan(f):
            return "NaN"
        if math.isinf(f):
            return "Infinity" if f > 0 else "-Infinity"
        if name == "float":
            return repr(float(str(np.float32(f))))
        return repr(f)
    if name == "date":
        if isinstance(value, datetime):
            value = value.date()
        elif isinstance(value, str):
            value = _parse_date(value, dt)
        elif not isinstance(value, date) and hasattr(value, "to_pydatetime"):
            value = value.to_pydatetime().date()
        if not isinstance(value, date):
            raise SchemaError(f"cannot use {value!r} as a date partition value")
        return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
    if name == "timestamp":
        d = _to_datetime(value, dt, time_zone)
        d = (d if d.tzinfo is not None else localize(d, time_zone)).astimezone(timezone.utc).replace(tzinfo=None)
        if wall_clock_zone is not None and not iso_timestamps:
            return _fmt_time(d.replace(tzinfo=timezone.utc).astimezone(tz_of(wall_clock_zone)).replace(tzinfo=None))
        if iso_timestamps:
            return (f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:"
                    f"{d.second:02d}.{d.microsecond:06d}Z")
        return _fmt_time(d)
    if name == "timestamp_ntz":
        d = _to_datetime(value, dt)
        if d.tzinfo is not None:
            raise SchemaError(f"timestamp_ntz partition value {value!r} must not carry a time zone")
        return _fmt_time(d)
    if name == "binary":
        b = bytes(value)
        try:
            s = b.decode("utf-8")
        except UnicodeDecodeError:
            raise SchemaError(f"binary partition value {b!r} is not valid UTF-8 and cannot be "
                              f"stored as a partition value") from None
        return s if s != "" else None
    if name == "void":
        return None
    raise SchemaError(f"type {name} cannot be a partition column type")


# --- Hive-style directories --------------------------------------------------------------------

# Hive's FileUtils.escapePathName set (as in Spark's ExternalCatalogUtils): control characters
# 0x01-0x1F, DEL, and  " # % ' * / : = ? \ { [ ] ^
_ESCAPE = frozenset([chr(c) for c in range(0x01, 0x20)] + ['"', "#", "%", "'", "*", "/", ":", "=",
                                                             "?", "\\", "\x7f", "{", "[", "]", "^"])


def escape_path_name(s: str) -> str:
    """Escape a partition column name or value for a directory name: each character of Hive's
    set becomes `%XX` (uppercase hex); everything else, non-ASCII included, is kept."""
    if not any(c in _ESCAPE for c in s):
        return s
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in s)


_HEX = frozenset("0123456789abcdefABCDEF")


def unescape_path_name(s: str) -> str:
    """Inverse of `escape_path_name`: `%XX` (two hex digits) becomes the character; any other `%`
    is kept as is."""
    if "%" not in s:
        return s
    out = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "%" and i + 2 < n and s[i + 1] in _HEX and s[i + 2] in _HEX:
            out.append(chr(int(s[i + 1:i + 3], 16)))
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)


def partition_path(partition_columns: list[str], values: dict[str, str | None]) -> str:
    """The relative directory for a partition, e.g. `a=1/b=__HIVE_DEFAULT_PARTITION__`, from the
    serialized partition values (null or empty → `__HIVE_DEFAULT_PARTITION__`). Names and values
    are escaped with `escape_path_name`. Values are looked up by exact name, then
    case-insensitively."""
    parts = []
    lower = {k.lower(): v for k, v in values.items()}
    for col in partition_columns:
        if col in values:
            v = values[col]
        elif col.lower() in lower:
            v = lower[col.lower()]
        else:
            raise SchemaError(f"no value for partition column '{col}'; got {sorted(values)}")
        parts.append(f"{escape_path_name(col)}="
                     f"{HIVE_DEFAULT_PARTITION if v is None or v == '' else escape_path_name(v)}")
    return "/".join(parts)


def parse_partition_path(path: str) -> dict[str, str | None]:
    """The `col=value` segments of a relative path (file name ignored), unescaped, with
    `__HIVE_DEFAULT_PARTITION__` read as None."""
    out: dict[str, str | None] = {}
    for seg in path.split("/"):
        if "=" not in seg:
            continue
        k, _, v = seg.partition("=")
        v = unescape_path_name(v)
        out[unescape_path_name(k)] = None if v == HIVE_DEFAULT_PARTITION else v
    return out


def partition_values_to_arrow(partition_values: pa.Array | pa.ChunkedArray | list, fields: list, mode: str = "none",
                              *, time_zone: str | None = None) -> dict[str, pa.Array]:
    """Typed partition columns (logical name → Arrow array) from `add.partitionValues` of many
    files (an Arrow map array, or a list of dicts / key-value lists / None); zone-less timestamps
    read in `time_zone` (default UTC, see the module docstring).

    The value of a column is found under its physical name (column mapping name/id mode), else its
    logical name, else a key equal to it ignoring case (old writers); absent → null."""
    if not isinstance(partition_values, (pa.Array, pa.ChunkedArray)):
        partition_values = pa.array([dict(x) if x else {} for x in partition_values], pa.map_(pa.string(), pa.string()))
    pv = partition_values.combine_chunks() if isinstance(partition_values, pa.ChunkedArray) else partition_values
    out: dict[str, pa.Array] = {}
    as_dicts = None
    for f in fields:
        keys = [column_mapping.physical_name(f)] if mode in ("name", "id") else []
        keys = list(dict.fromkeys(keys + [f.name]))
        raw = pc.map_lookup(pv, pa.scalar(keys[0]), "first")
        for k in keys[1:]:
            raw = pc.coalesce(raw, pc.map_lookup(pv, pa.scalar(k), "first"))
        if raw.null_count and len(pv):
            if as_dicts is None:
                as_dicts = [dict(x) if x else {} for x in pv.to_pylist()]
            low = {k.lower() for k in keys}
            vals = raw.to_pylist()
            for i, v in enumerate(vals):
                if v is None:
                    vals[i] = next((x for k, x in as_dicts[i].items() if k.lower() in low), None)
            raw = pa.array(vals, pa.string())
        out[f.name] = partition_column_to_arrow(raw, f.type, time_zone=time_zone)
    return out
