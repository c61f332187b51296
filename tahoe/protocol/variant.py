"""The `variant` data type (spec "Variant Data Type", "Variant Shredding"): its Arrow form, its binary encoding,
and the reassembly of shredded files. Pure.

  1. Arrow form `ARROW_TYPE`: `struct<metadata: binary, value: binary>` with field metadata
     `{"variant": "true"}` (PySpark's marker), as delta-rs reads and writes it; `is_variant_type`,
     `is_variant_storage`.
  2. `from_parquet(arr)`: any variant column read from a file → the Arrow form, shredded values reassembled.
  3. `to_python` / `to_json` decode one value; `encode_json` is Spark's `parse_json` encoding."""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import json
import math
import struct
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptLogError, SchemaError

__all__ = ["ARROW_TYPE", "VARIANT_TAG", "is_variant_type", "is_variant_storage", "from_parquet",
           "to_python", "to_json", "encode_json", "arrow_array", "NULL_VALUE", "EMPTY_METADATA"]

VARIANT_TAG = {b"variant": b"true"}
ARROW_TYPE = pa.struct([pa.field("metadata", pa.binary(), nullable=False, metadata=VARIANT_TAG),
                        pa.field("value", pa.binary(), nullable=False)])
NULL_VALUE = b"\x00"            # the variant null
EMPTY_METADATA = b"\x01\x00\x00"  # version 1, no keys

# basic types
_PRIMITIVE, _SHORT_STR, _OBJECT, _ARRAY = 0, 1, 2, 3
# primitive type ids
_NULL, _TRUE, _FALSE, _INT8, _INT16, _INT32, _INT64, _DOUBLE, _DEC4, _DEC8, _DEC16, _DATE, _TS, \
    _TS_NTZ, _FLOAT, _BINARY, _STRING, _TIME, _TS_NANOS, _TS_NTZ_NANOS, _UUID = range(21)


def is_variant_type(t: pa.DataType) -> bool:
    """Whether an Arrow type is tahoe's/PySpark's tagged variant form (any child order)."""
    if not pa.types.is_struct(t) or t.num_fields != 2:
        return False
    names = {t.field(i).name for i in range(2)}
    if names != {"metadata", "value"}:
        return False
    md = t.field("metadata").metadata or {}
    return md.get(b"variant") == b"true" and all(
        pa.types.is_binary(t.field(i).type) or pa.types.is_large_binary(t.field(i).type) for i in range(2))


def is_variant_storage(t: pa.DataType) -> bool:
    """Whether an Arrow type can hold variants: a struct of exactly `metadata` and `value`
    binaries (tagged or not)."""
    if not pa.types.is_struct(t) or t.num_fields != 2:
        return False
    if {t.field(i).name for i in range(2)} != {"metadata", "value"}:
        return False
    return all(pa.types.is_binary(t.field(i).type) or pa.types.is_large_binary(t.field(i).type)
               for i in range(2))


def arrow_array(metadata: list[bytes | None], values: list[bytes | None]) -> pa.StructArray:
    """The Arrow form of variants given as (metadata, value) pairs; a pair with value None is a
    null variant."""
    mask = pa.array([v is None for v in values], pa.bool_())
    m = pa.array([b"" if v is None else (md or EMPTY_METADATA) for md, v in zip(metadata, values)], pa.binary())
    v = pa.array([b"" if x is None else x for x in values], pa.binary())
    return pa.StructArray.from_arrays([m, v], fields=list(ARROW_TYPE), mask=mask)


# --- reading files ---------------------------------------------------------------------------

def _as_binary(a: pa.Array) -> pa.Array:
    return a.cast(pa.binary()) if pa.types.is_large_binary(a.type) else a


def from_parquet(arr: pa.Array) -> pa.StructArray:
    """A variant column as pyarrow read it from a data file → the Arrow form (`ARROW_TYPE`).
    Raises CorruptLogError when the group is not a variant layout."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    t = arr.type
    if not pa.types.is_struct(t):
        raise CorruptLogError(f"expected a variant group (metadata, value), the file has {t}")
    names = [t.field(i).name for i in range(t.num_fields)]
    if "metadata" not in names:
        raise CorruptLogError(f"variant group without a 'metadata' field: {t}")
    if arr.offset:
        kids = dict(zip(names, arr.flatten()))
    else:
        kids = {n: arr.field(i) for i, n in enumerate(names)}
    valid = arr.is_valid()
    meta = _as_binary(kids["metadata"])
    value = _as_binary(kids["value"]) if "value" in kids else pa.nulls(len(arr), pa.binary())
    if "typed_value" not in kids:
        if value.null_count or meta.null_count:
            # a non-null variant whose value is null (written as optional): the variant null
            value = pc.if_else(pc.is_null(value), pa.scalar(NULL_VALUE, pa.binary()), value)
            meta = pc.if_else(pc.is_null(meta), pa.scalar(EMPTY_METADATA, pa.binary()), meta)
        out_values = value
    else:
        typed = kids["typed_value"]
        metas = meta.to_pylist()
        vals = value.to_pylist()
        typed_rows = typed.to_pylist()
        tv_type = typed.type
        valid_l = valid.to_pylist()
        out = []
        for i in range(len(arr)):
            if not valid_l[i]:
                out.append(b"")
                continue
            md = metas[i] or EMPTY_METADATA
            dic = _Dictionary(md)
            v = _reassemble(vals[i], typed_rows[i], tv_type, dic)
            if dic.added:
                metas[i] = dic.encode()
            out.append(NULL_VALUE if v is None else v)
        out_values = pa.array(out, pa.binary())
        meta = pa.array([m or b"" for m in metas], pa.binary())
    # empty bytes in the null slots: the children are non-null
    if arr.null_count:
        empty = pa.scalar(b"", pa.binary())
        meta = pc.if_else(valid, meta, empty)
        out_values = pc.if_else(valid, out_values, empty)
    meta = pc.fill_null(meta, b"")
    out_values = pc.fill_null(out_values, b"")
    mask = pc.invert(valid) if arr.null_count else None
    return pa.StructArray.from_arrays([meta, out_values], fields=list(ARROW_TYPE), mask=mask)


class _Dictionary:
    """A metadata dictionary being read (key ↔ id), growable for keys a shredded object names
    but the dictionary lacks."""

    def __init__(self, md: bytes):
        self.raw = md
        self.keys = _metadata_keys(md)
        self.ids = {}
        for i, k in enumerate(self.keys):
            self.ids.setdefault(k, i)
        self.added = False

    def id_of(self, key: str) -> int:
        i = self.ids.get(key)
        if i is None:
            i = len(self.keys)
            self.keys.append(key)
            self.ids[key] = i
            self.added = True
        return i

    def encode(self) -> bytes:
        return _encode_metadata(self.keys, sorted_strings=False)


def _reassemble(value: bytes | None, typed: Any, tv_type: pa.DataType, dic: _Dictionary) -> bytes | None:
    """One (value, typed_value) pair → the variant value bytes; None when missing."""
    if typed is None:
        return value
    if pa.types.is_struct(tv_type):
        # a shredded object; `value` (if any) holds the object's other fields
        fields: dict[str, bytes] = {}
        if value is not None:
            basic = value[0] & 0x3
            if basic != _OBJECT:
                raise CorruptLogError("a shredded variant object has a residual value that is not an object")
            for k, v in _object_fields(value, dic.keys):
                fields[k] = v
        for j in range(tv_type.num_fields):
            f = tv_type.field(j)
            sub = typed.get(f.name)
            if sub is None:
                continue
            st = f.type
            names = {st.field(x).name for x in range(st.num_fields)} if pa.types.is_struct(st) else set()
            sv = sub.get("value") if "value" in names else None
            stv = sub.get("typed_value") if "typed_value" in names else None
            enc = _reassemble(sv, stv, st.field("typed_value").type if "typed_value" in names else pa.null(), dic)
            if enc is not None:
                fields[f.name] = enc
        return _encode_object([(dic.id_of(k), k, v) for k, v in fields.items()])
    if pa.types.is_list(tv_type) or pa.types.is_large_list(tv_type):
        et = tv_type.value_type
        names = {et.field(x).name for x in range(et.num_fields)}
        elems = []
        for e in typed:
            sv = e.get("value") if "value" in names else None
            stv = e.get("typed_value") if "typed_value" in names else None
            enc = _reassemble(sv, stv, et.field("typed_value").type if "typed_value" in names else pa.null(), dic)
            elems.append(NULL_VALUE if enc is None else enc)
        return _encode_array(elems)
    return _encode_primitive(typed, tv_type)


# --- encoding ---------------------------------------------------------------------------------

def _size_for(n: int) -> int:
    return 1 if n < 0x100 else 2 if n < 0x10000 else 3 if n < 0x1000000 else 4


def _le(n: int, size: int) -> bytes:
    return n.to_bytes(size, "little")


def _encode_metadata(keys: list[str], sorted_strings: bool) -> bytes:
    bs = [k.encode("utf-8") for k in keys]
    total = sum(len(b) for b in bs)
    size = _size_for(max(total, len(keys)))
    header = 1 | (0x10 if sorted_strings else 0) | ((size - 1) << 6)
    out = bytearray([header])
    out += _le(len(keys), size)
    off = 0
    out += _le(0, size)
    for b in bs:
        off += len(b)
        out += _le(off, size)
    for b in bs:
        out += b
    return bytes(out)


def _encode_object(fields: list[tuple[int, str, bytes]]) -> bytes:
    fields = sorted(fields, key=lambda f: f[1].encode("utf-8"))
    n = len(fields)
    data = b"".join(f[2] for f in fields)
    id_size = _size_for(max((f[0] for f in fields), default=0))
    off_size = _size_for(len(data))
    large = n > 0xFF
    header = (_OBJECT | (((off_size - 1) | ((id_size - 1) << 2) | ((1 << 4) if large else 0)) << 2))
    out = bytearray([header])
    out += _le(n, 4 if large else 1)
    for fid, _k, _v in fields:
        out += _le(fid, id_size)
    off = 0
    for _fid, _k, v in fields:
        out += _le(off, off_size)
        off += len(v)
    out += _le(off, off_size)
    out += data
    return bytes(out)


def _encode_array(elems: list[bytes]) -> bytes:
    n = len(elems)
    data = b"".join(elems)
    off_size = _size_for(len(data))
    large = n > 0xFF
    header = _ARRAY | (((off_size - 1) | ((1 << 2) if large else 0)) << 2)
    out = bytearray([header])
    out += _le(n, 4 if large else 1)
    off = 0
    for e in elems:
        out += _le(off, off_size)
        off += len(e)
    out += _le(off, off_size)
    out += data
    return bytes(out)


def _prim(type_id: int, payload: bytes = b"") -> bytes:
    return bytes([(type_id << 2) | _PRIMITIVE]) + payload


def _encode_string(s: str) -> bytes:
    b = s.encode("utf-8")
    if len(b) < 64:
        return bytes([(len(b) << 2) | _SHORT_STR]) + b
    return _prim(_STRING, _le(len(b), 4) + b)


def _encode_int(n: int) -> bytes:
    if -(1 << 7) <= n < (1 << 7):
        return _prim(_INT8, n.to_bytes(1, "little", signed=True))
    if -(1 << 15) <= n < (1 << 15):
        return _prim(_INT16, n.to_bytes(2, "little", signed=True))
    if -(1 << 31) <= n < (1 << 31):
        return _prim(_INT32, n.to_bytes(4, "little", signed=True))
    if -(1 << 63) <= n < (1 << 63):
        return _prim(_INT64, n.to_bytes(8, "little", signed=True))
    raise SchemaError(f"integer {n} does not fit a variant int64")


def _encode_decimal(d: decimal.Decimal, width: int | None = None) -> bytes:
    sign, digits, exp = d.as_tuple()
    scale = max(0, -int(exp))
    unscaled = int(d.scaleb(scale))
    if width is None:
        width = 4 if abs(unscaled) < 10 ** 9 else 8 if abs(unscaled) < 10 ** 18 else 16
    tid = {4: _DEC4, 8: _DEC8, 16: _DEC16}[width]
    return _prim(tid, bytes([scale]) + unscaled.to_bytes(width, "little", signed=True))


def _encode_primitive(v: Any, t: pa.DataType) -> bytes:
    """A shredded typed_value leaf (as pyarrow's to_pylist gives it) → variant bytes, its variant
    type chosen by the parquet/Arrow type (VariantShredding.md "Shredded Value Types"); integers
    and decimals in their smallest width, as Spark's reader rebuilds them."""
    T = pa.types
    if T.is_boolean(t):
        return _prim(_TRUE if v else _FALSE)
    if T.is_integer(t):
        # integers in the smallest integer type that holds them, as Spark's reader rebuilds them
        # (the variant integer types are one class; a writer shreds int8 values into INT32)
        return _encode_int(int(v))
    if T.is_float32(t):
        return _prim(_FLOAT, struct.pack("<f", v))
    if T.is_float64(t):
        return _prim(_DOUBLE, struct.pack("<d", v))
    if T.is_decimal(t):
        # the value's scale is the column's; its width the smallest that holds the digits (Spark)
        return _encode_decimal(decimal.Decimal(v).quantize(decimal.Decimal(1).scaleb(-t.scale)))
    if T.is_date32(t):
        return _prim(_DATE, (v - _dt.date(1970, 1, 1)).days.to_bytes(4, "little", signed=True))
    if T.is_time64(t):
        micros = ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
        return _prim(_TIME, micros.to_bytes(8, "little", signed=True))
    if T.is_timestamp(t):
        raw = pa.scalar(v, t).cast(pa.int64()).as_py() if not isinstance(v, int) else v
        nanos = t.unit == "ns"
        if t.tz is not None:
            tid = _TS_NANOS if nanos else _TS
        else:
            tid = _TS_NTZ_NANOS if nanos else _TS_NTZ
        if t.unit in ("s", "ms"):
            raw = raw * (1_000_000 if t.unit == "s" else 1000)
        return _prim(tid, int(raw).to_bytes(8, "little", signed=True))
    if T.is_string(t) or T.is_large_string(t):
        return _encode_string(v)
    if T.is_fixed_size_binary(t) and t.byte_width == 16:
        return _prim(_UUID, bytes(v))
    if T.is_binary(t) or T.is_large_binary(t) or T.is_fixed_size_binary(t):
        b = bytes(v)
        return _prim(_BINARY, _le(len(b), 4) + b)
    if isinstance(t, pa.BaseExtensionType):
        return _encode_primitive(v, t.storage_type)
    raise CorruptLogError(f"a shredded variant typed_value of type {t} has no variant encoding")


def encode_json(text: str | None) -> tuple[bytes, bytes] | None:
    """One JSON document → (metadata, value), byte for byte as Spark's `parse_json` encodes it:
    keys sorted in the dictionary (the sorted flag left unset, as Spark does), integers in the smallest integer type, other numbers as decimals when exact in
    38 digits, else doubles. None for None."""
    if text is None:
        return None
    try:
        obj = json.loads(text, parse_float=decimal.Decimal, parse_int=int)
    except ValueError as e:
        raise SchemaError(f"not valid JSON for a variant: {e}") from None
    keys: set[str] = set()

    def collect(o: Any) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                keys.add(k)
                collect(v)
        elif isinstance(o, list):
            for v in o:
                collect(v)

    collect(obj)
    ordered = sorted(keys, key=lambda k: k.encode("utf-8"))
    ids = {k: i for i, k in enumerate(ordered)}

    def enc(o: Any) -> bytes:
        if o is None:
            return _prim(_NULL)
        if o is True:
            return _prim(_TRUE)
        if o is False:
            return _prim(_FALSE)
        if isinstance(o, int):
            if -(1 << 63) <= o < (1 << 63):
                return _encode_int(o)
            return enc(decimal.Decimal(o))
        if isinstance(o, decimal.Decimal):
            if o.is_finite() and len(o.as_tuple().digits) <= 38 and -38 <= o.as_tuple().exponent <= 0:
                return _encode_decimal(o)
            return _prim(_DOUBLE, struct.pack("<d", float(o)))
        if isinstance(o, str):
            return _encode_string(o)
        if isinstance(o, list):
            return _encode_array([enc(v) for v in o])
        if isinstance(o, dict):
            return _encode_object([(ids[k], k, enc(v)) for k, v in o.items()])
        raise SchemaError(f"cannot encode {type(o).__name__} as a variant")

    return _encode_metadata(ordered, sorted_strings=False), enc(obj)


# --- decoding ---------------------------------------------------------------------------------

def _metadata_keys(md: bytes) -> list[str]:
    if not md:
        raise CorruptLogError("empty variant metadata")
    header = md[0]
    if header & 0x0F != 1:
        raise CorruptLogError(f"unsupported variant metadata version {header & 0x0F}")
    size = ((header >> 6) & 0x3) + 1
    n = int.from_bytes(md[1:1 + size], "little")
    offs_at = 1 + size
    offs = [int.from_bytes(md[offs_at + i * size:offs_at + (i + 1) * size], "little") for i in range(n + 1)]
    base = offs_at + (n + 1) * size
    return [md[base + offs[i]:base + offs[i + 1]].decode("utf-8") for i in range(n)]


def _object_fields(value: bytes, keys: list[str], pos: int = 0) -> list[tuple[str, bytes]]:
    header = value[pos] >> 2
    off_size = (header & 0x3) + 1
    id_size = ((header >> 2) & 0x3) + 1
    large = (header >> 4) & 0x1
    p = pos + 1
    n_size = 4 if large else 1
    n = int.from_bytes(value[p:p + n_size], "little")
    p += n_size
    ids = [int.from_bytes(value[p + i * id_size:p + (i + 1) * id_size], "little") for i in range(n)]
    p += n * id_size
    offs = [int.from_bytes(value[p + i * off_size:p + (i + 1) * off_size], "little") for i in range(n + 1)]
    base = p + (n + 1) * off_size
    out = []
    for i in range(n):
        start = base + offs[i]
        out.append((keys[ids[i]], value[start:start + _value_size(value, start)]))
    return out


def _array_elems(value: bytes, pos: int = 0) -> list[bytes]:
    header = value[pos] >> 2
    off_size = (header & 0x3) + 1
    large = (header >> 2) & 0x1
    p = pos + 1
    n_size = 4 if large else 1
    n = int.from_bytes(value[p:p + n_size], "little")
    p += n_size
    offs = [int.from_bytes(value[p + i * off_size:p + (i + 1) * off_size], "little") for i in range(n + 1)]
    base = p + (n + 1) * off_size
    return [value[base + offs[i]:base + offs[i + 1]] for i in range(n)]


_FIXED = {_NULL: 0, _TRUE: 0, _FALSE: 0, _INT8: 1, _INT16: 2, _INT32: 4, _INT64: 8, _DOUBLE: 8,
          _DEC4: 5, _DEC8: 9, _DEC16: 17, _DATE: 4, _TS: 8, _TS_NTZ: 8, _FLOAT: 4, _TIME: 8,
          _TS_NANOS: 8, _TS_NTZ_NANOS: 8, _UUID: 16}


def _value_size(value: bytes, pos: int) -> int:
    """The encoded size of the value starting at `pos`."""
    b = value[pos]
    basic, header = b & 0x3, b >> 2
    if basic == _SHORT_STR:
        return 1 + header
    if basic == _PRIMITIVE:
        if header in (_BINARY, _STRING):
            return 5 + int.from_bytes(value[pos + 1:pos + 5], "little")
        if header not in _FIXED:
            raise CorruptLogError(f"unknown variant primitive type {header}")
        return 1 + _FIXED[header]
    if basic == _OBJECT:
        off_size = (header & 0x3) + 1
        id_size = ((header >> 2) & 0x3) + 1
        n_size = 4 if (header >> 4) & 1 else 1
        n = int.from_bytes(value[pos + 1:pos + 1 + n_size], "little")
        offs_at = pos + 1 + n_size + n * id_size
        offs = [int.from_bytes(value[offs_at + i * off_size:offs_at + (i + 1) * off_size], "little")
                for i in range(n + 1)]
        base = offs_at + (n + 1) * off_size
        end = max((base + offs[i] + _value_size(value, base + offs[i]) for i in range(n)), default=base)
        return end - pos
    n_size = 4 if (header >> 2) & 1 else 1
    off_size = (header & 0x3) + 1
    n = int.from_bytes(value[pos + 1:pos + 1 + n_size], "little")
    offs_at = pos + 1 + n_size
    last = int.from_bytes(value[offs_at + n * off_size:offs_at + (n + 1) * off_size], "little")
    return 1 + n_size + (n + 1) * off_size + last


def _decode(value: bytes, keys: list[str], pos: int = 0) -> Any:
    b = value[pos]
    basic, header = b & 0x3, b >> 2
    if basic == _SHORT_STR:
        return value[pos + 1:pos + 1 + header].decode("utf-8")
    if basic == _OBJECT:
        return {k: _decode(v, keys) for k, v in _object_fields(value, keys, pos)}
    if basic == _ARRAY:
        return [_decode(e, keys) for e in _array_elems(value, pos)]
    p = pos + 1
    if header == _NULL:
        return None
    if header == _TRUE:
        return True
    if header == _FALSE:
        return False
    if header in (_INT8, _INT16, _INT32, _INT64):
        size = _FIXED[header]
        return int.from_bytes(value[p:p + size], "little", signed=True)
    if header == _DOUBLE:
        return struct.unpack("<d", value[p:p + 8])[0]
    if header == _FLOAT:
        return struct.unpack("<f", value[p:p + 4])[0]
    if header in (_DEC4, _DEC8, _DEC16):
        width = _FIXED[header] - 1
        scale = value[p]
        unscaled = int.from_bytes(value[p + 1:p + 1 + width], "little", signed=True)
        return decimal.Decimal(unscaled).scaleb(-scale)
    if header == _DATE:
        return _dt.date(1970, 1, 1) + _dt.timedelta(days=int.from_bytes(value[p:p + 4], "little", signed=True))
    if header in (_TS, _TS_NTZ):
        us = int.from_bytes(value[p:p + 8], "little", signed=True)
        ts = _dt.datetime(1970, 1, 1) + _dt.timedelta(microseconds=us)
        return ts.replace(tzinfo=_dt.timezone.utc) if header == _TS else ts
    if header in (_TS_NANOS, _TS_NTZ_NANOS):
        ns = int.from_bytes(value[p:p + 8], "little", signed=True)
        ts = _dt.datetime(1970, 1, 1) + _dt.timedelta(microseconds=ns // 1000)
        return ts.replace(tzinfo=_dt.timezone.utc) if header == _TS_NANOS else ts
    if header == _TIME:
        us = int.from_bytes(value[p:p + 8], "little", signed=True)
        return (_dt.datetime(1970, 1, 1) + _dt.timedelta(microseconds=us)).time()
    if header == _BINARY:
        n = int.from_bytes(value[p:p + 4], "little")
        return bytes(value[p + 4:p + 4 + n])
    if header == _STRING:
        n = int.from_bytes(value[p:p + 4], "little")
        return value[p + 4:p + 4 + n].decode("utf-8")
    if header == _UUID:
        return uuid.UUID(bytes=bytes(value[p:p + 16]))
    raise CorruptLogError(f"unknown variant primitive type {header}")


def to_python(metadata: bytes, value: bytes) -> Any:
    """One variant as Python values (dict, list, str, int, Decimal, float, bool, None, date,
    datetime, time, bytes, UUID)."""
    return _decode(value, _metadata_keys(metadata))


def _json(o: Any) -> str:
    if o is None:
        return "null"
    if o is True:
        return "true"
    if o is False:
        return "false"
    if isinstance(o, int):
        return str(o)
    if isinstance(o, decimal.Decimal):
        return format(o, "f")
    if isinstance(o, float):
        if math.isnan(o) or math.isinf(o):
            return json.dumps(str(o))
        return repr(o)
    if isinstance(o, str):
        return json.dumps(o, ensure_ascii=False)
    if isinstance(o, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _json(v) for k, v in o.items()) + "}"
    if isinstance(o, list):
        return "[" + ",".join(_json(v) for v in o) + "]"
    if isinstance(o, _dt.datetime):
        return json.dumps(o.isoformat(sep=" "))
    if isinstance(o, (_dt.date, _dt.time, uuid.UUID)):
        return json.dumps(str(o))
    if isinstance(o, bytes):
        return json.dumps(base64.b64encode(o).decode("ascii"))
    raise CorruptLogError(f"cannot render {type(o).__name__} as JSON")


def to_json(metadata: bytes, value: bytes) -> str:
    """One variant as compact JSON (decimals as plain numbers, dates and timestamps as strings,
    binaries base64)."""
    return _json(to_python(metadata, value))
