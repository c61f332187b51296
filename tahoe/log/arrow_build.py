"""Arrow arrays from Python values without pyarrow's Python converter, which imports pandas: the log core
builds its few arrays here, from buffers, so listing a table's files never imports pandas.

  1. `column`, `table_from_rows`, `scalar`, `bool_numpy`, `numpy_array`: like `pa.array`,
     `Table.from_pylist`, `pa.scalar`, `to_numpy`, `pa.array(ndarray)`.
  2. Types: string, large_string, binary, int8-64, bool, map<string, string>, list and struct of these.
  3. Values of the wrong Python type raise pyarrow's own errors, as `pa.array` would."""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pyarrow as pa

__all__ = ["column", "table_from_rows", "scalar", "bool_numpy", "int_numpy", "numpy_array", "empty",
           "all_distinct", "string_digests", "null_array", "lean", "memory_pool"]

_INT_DTYPES = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64}


def _validity(values: list) -> tuple[pa.Buffer | None, int]:
    valid = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    nulls = len(values) - int(valid.sum())
    if nulls == 0:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls


def _strings(values: list, t: pa.DataType) -> pa.Array:
    binary = pa.types.is_binary(t) or pa.types.is_large_binary(t)
    encoded = []
    for v in values:
        if v is None:
            encoded.append(b"")
        elif isinstance(v, str) and not binary:
            encoded.append(v.encode())
        elif isinstance(v, (bytes, bytearray)):
            encoded.append(bytes(v))
        else:
            raise pa.ArrowTypeError(f"Expected bytes, got a '{type(v).__name__}' object")
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
    if not large and offsets[-1] >= 2 ** 31:
        raise pa.ArrowCapacityError(f"{t} column of {offsets[-1]} bytes is too large")
    validity, nulls = _validity(values)
    arr = pa.Array.from_buffers(t, len(values), [validity, pa.py_buffer(offsets if large else offsets.astype(np.int32)),
                                                 pa.py_buffer(b"".join(encoded))], null_count=nulls)
    if not binary:
        arr.validate(full=True)   # UTF-8, as pa.array checks
    return arr


def _ints(values: list, t: pa.DataType) -> pa.Array:
    dtype = _INT_DTYPES[t]
    info = np.iinfo(dtype)
    out = np.zeros(len(values), dtype=dtype)
    for i, v in enumerate(values):
        if v is None:
            continue
        if not isinstance(v, int):
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            else:
                raise pa.ArrowInvalid(f"Could not convert {v!r} with type {type(v).__name__}: tried to convert to {t}")
        if not info.min <= v <= info.max:
            raise pa.ArrowInvalid(f"Value {v} too large to fit in {t}")
        out[i] = v
    validity, nulls = _validity(values)
    return pa.Array.from_buffers(t, len(values), [validity, pa.py_buffer(out)], null_count=nulls)


def _bools(values: list) -> pa.Array:
    bits = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values):
        if v is None:
            continue
        if not isinstance(v, (bool, np.bool_)):
            raise pa.ArrowInvalid(f"Could not convert {v!r} with type {type(v).__name__}: tried to convert to boolean")
        bits[i] = v
    validity, nulls = _validity(values)
    return pa.Array.from_buffers(pa.bool_(), len(values), [validity, pa.py_buffer(np.packbits(bits, bitorder="little"))],
                                 null_count=nulls)


def _offsets(counts: Iterable[int], n: int) -> np.ndarray:
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.fromiter(counts, dtype=np.int64, count=n), out=offsets[1:], dtype=np.int32)
    return offsets


def _map(values: list, t: pa.MapType) -> pa.Array:
    items = []
    counts = []
    for v in values:
        if v is None:
            counts.append(0)
            continue
        entries = list(v.items()) if isinstance(v, dict) else list(v)
        items.extend(entries)
        counts.append(len(entries))
    keys = column([k for k, _ in items], t.key_type)
    if keys.null_count:
        raise pa.ArrowInvalid("Invalid Map: key field cannot contain null values")
    vals = column([x for _, x in items], t.item_type)
    offsets = pa.Array.from_buffers(pa.int32(), len(values) + 1, [None, pa.py_buffer(_offsets(counts, len(values)))])
    validity, nulls = _validity(values)
    entries = pa.StructArray.from_arrays([keys, vals], fields=[t.key_field, t.item_field])
    return pa.Array.from_buffers(t, len(values), [validity, offsets.buffers()[1]], null_count=nulls,
                                 children=[entries])


def _struct(values: list, t: pa.StructType) -> pa.Array:
    children = []
    for i in range(t.num_fields):
        f = t.field(i)
        children.append(column([None if v is None else v.get(f.name) for v in values], f.type))
    validity, nulls = _validity(values)
    for v in values:
        if v is not None and not isinstance(v, dict):
            raise pa.ArrowTypeError(f"Expected dict or None for {t}, got {type(v).__name__}")
    return pa.Array.from_buffers(t, len(values), [validity], null_count=nulls, children=children)


def _list(values: list, t: pa.ListType) -> pa.Array:
    items: list = []
    counts = []
    for v in values:
        if v is None:
            counts.append(0)
            continue
        if isinstance(v, (str, bytes, dict)):
            raise pa.ArrowTypeError(f"Expected a list for {t}, got a '{type(v).__name__}' object")
        entries = list(v)
        items.extend(entries)
        counts.append(len(entries))
    child = column(items, t.value_type)
    validity, nulls = _validity(values)
    return pa.Array.from_buffers(t, len(values), [validity, pa.py_buffer(_offsets(counts, len(values)))],
                                 null_count=nulls, children=[child])


def column(values: list, t: pa.DataType) -> pa.Array:
    """`pa.array(values, t)` for the types listed in the module docstring."""
    values = values if isinstance(values, list) else list(values)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return _strings(values, t)
    if t in _INT_DTYPES:
        return _ints(values, t)
    if pa.types.is_boolean(t):
        return _bools(values)
    if pa.types.is_map(t):
        return _map(values, t)
    if pa.types.is_list(t):
        return _list(values, t)
    if pa.types.is_struct(t):
        return _struct(values, t)
    if pa.types.is_null(t):
        return pa.nulls(len(values))
    raise TypeError(f"tahoe.log.arrow_build does not build {t} columns")


def table_from_rows(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """`pa.Table.from_pylist(rows, schema=schema)` (missing keys are nulls, extra keys ignored)."""
    return pa.Table.from_arrays([column([r.get(f.name) for r in rows], f.type) for f in schema], schema=schema)


def scalar(value: Any, t: pa.DataType | None = None) -> pa.Scalar:
    """`pa.scalar(value, t)`; without `t`: str → string, bool → bool, int → int64."""
    if t is None:
        if isinstance(value, str):
            t = pa.string()
        elif isinstance(value, bool):
            t = pa.bool_()
        elif isinstance(value, int):
            t = pa.int64()
        else:
            raise TypeError(f"give the type of {value!r}")
    return column([value], t)[0]


def empty(t: pa.DataType) -> pa.Array:
    """`pa.array([], t)`."""
    return pa.nulls(0, t)


def bool_numpy(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean array as numpy bools (nulls as False)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=bool)
    bufs = arr.buffers()
    bits = np.unpackbits(np.frombuffer(bufs[1], dtype=np.uint8), bitorder="little", count=arr.offset + n)[arr.offset:]
    out = bits.astype(bool)
    if arr.null_count:
        valid = np.unpackbits(np.frombuffer(bufs[0], dtype=np.uint8), bitorder="little", count=arr.offset + n)[arr.offset:]
        out &= valid.astype(bool)
    return out


def int_numpy(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An integer array without nulls as a numpy array (zero-copy when it is one chunk)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if arr.null_count:
        raise ValueError("int_numpy: the array has nulls")
    dtype = _INT_DTYPES.get(arr.type) or {pa.uint64(): np.uint64, pa.uint32(): np.uint32}[arr.type]
    if len(arr) == 0:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=arr.offset + len(arr))[arr.offset:]


def numpy_array(values: np.ndarray) -> pa.Array:
    """`pa.array(values)` for a 1-d numpy array of integers or bools (no nulls)."""
    values = np.ascontiguousarray(values)
    if values.dtype == bool:
        return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(np.packbits(values, bitorder="little"))])
    t = {np.dtype(np.int8): pa.int8(), np.dtype(np.int16): pa.int16(), np.dtype(np.int32): pa.int32(),
         np.dtype(np.int64): pa.int64(), np.dtype(np.uint32): pa.uint32(), np.dtype(np.uint64): pa.uint64()}[values.dtype]
    return pa.Array.from_buffers(t, len(values), [None, pa.py_buffer(values)])


_MIX = np.uint64(0x9E3779B97F4A7C15)


def _digests(arr: pa.Array) -> np.ndarray | None:
    """A 64-bit digest of each string of `arr` (a function of its bytes alone: its length and
    every 8-byte word of it, read in place), or None when a value is shorter than 8 bytes."""
    n = len(arr)
    _, off_buf, data_buf = arr.buffers()
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    offsets = np.frombuffer(off_buf, dtype=np.int64 if large else np.int32, count=arr.offset + n + 1)[arr.offset:]
    starts, ends = offsets[:-1].astype(np.int64), offsets[1:].astype(np.int64)
    lengths = ends - starts
    if int(lengths.min()) < 8:
        return None
    h = lengths.astype(np.uint64) * _MIX
    shift = np.uint64(29)
    whole = int(lengths.min()) // 8            # words every value has whole
    size = int(lengths[0])
    if int(lengths.min()) == size == int(lengths.max()):
        # values of one length (paths of one writer, usually) lie at a fixed stride: the same
        # words read as strided views of the buffer, no offsets computed nor gathered
        def at(k: int) -> np.ndarray:
            return np.ndarray(shape=(n,), dtype="<u8", buffer=data_buf, offset=int(starts[0]) + k, strides=(size,))

        for j in range(whole):
            h ^= at(8 * j)
            h *= _MIX
            h ^= h >> shift
        if size % 8:    # the last 8 bytes
            h ^= at(size - 8)
            h *= _MIX
            h ^= h >> shift
        return h
    # every 8 bytes of the buffer as a (possibly unaligned) little-endian word: a view, no copy
    words = np.ndarray(shape=(data_buf.size - 7,), dtype="<u8", buffer=data_buf, strides=(1,))
    for j in range(whole):
        h ^= words[starts + 8 * j]
        h *= _MIX
        h ^= h >> shift
    for j in range(whole, int((int(lengths.max()) + 7) // 8)):
        # the j-th word of each value that has one (its last word: its last 8 bytes)
        mixed = (h ^ words[np.minimum(starts + 8 * j, ends - 8)]) * _MIX
        mixed ^= mixed >> shift
        h = np.where(starts + 8 * j < ends, mixed, h)
    return h


def string_digests(values: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """A 64-bit digest of every value of a string column (see `_digests`), or None when one is
    null or shorter than 8 bytes."""
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    out = []
    for c in chunks:
        if not len(c):
            continue
        if c.null_count or not (pa.types.is_string(c.type) or pa.types.is_large_string(c.type)
                                or pa.types.is_binary(c.type) or pa.types.is_large_binary(c.type)):
            return None
        d = _digests(c)
        if d is None:
            return None
        out.append(d)
    if not out:
        return np.zeros(0, np.uint64)
    return out[0] if len(out) == 1 else np.concatenate(out)


def all_distinct(values: pa.Array | pa.ChunkedArray, digests: list[np.ndarray | None] | None = None) -> bool:
    """True when no two values of a string column are equal (nulls count as values). Exact:
    distinct digests of every value's bytes prove it without the copy a hash table of the
    strings makes; when two digests are equal (equal strings, or rarely a collision) the
    strings themselves are compared. `digests`: the `string_digests` of the column's chunks,
    where already made (None for a chunk: made here)."""
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    if digests is None:
        digests = [None] * len(chunks)
    parts = []
    for c, d in zip(chunks, digests):
        if d is None and len(c):
            d = string_digests(c)
            if d is None:
                parts = None
                break
        if d is not None and len(d):
            parts.append(d)
    if parts is not None:
        if not parts:
            return True
        d = np.concatenate(parts) if len(parts) > 1 else parts[0].copy()
        d.sort()
        if not (d[1:] == d[:-1]).any():
            return True
    from . import compute as pc

    chunks = [c for c in chunks if len(c)]
    n = sum(len(c) for c in chunks)
    return len(pc.unique(pa.chunked_array(chunks, chunks[0].type) if len({c.type for c in chunks}) == 1
                         else pa.chunked_array([pc.cast(c, pa.large_string()) for c in chunks]))) == n


_ZEROS: list[pa.Buffer] = []


def _zeros(nbytes: int) -> pa.Buffer:
    """`nbytes` zero bytes, a slice of one shared buffer: an anonymous mapping, whose pages the
    OS provides zeroed only when touched — and nothing writes an Arrow buffer, so they cost no
    memory however long the columns that use them."""
    import mmap

    buf = _ZEROS[0] if _ZEROS else None
    if buf is None or buf.size < nbytes:
        size = max(nbytes, 1 << 20, 2 * buf.size if buf is not None else 0)
        # read-only: the buffer is immutable to Arrow and to anything that views it (numpy)
        buf = pa.py_buffer(mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=mmap.PROT_READ))
        _ZEROS[:] = [buf]
    return buf.slice(0, nbytes)


def null_array(t: pa.DataType, n: int) -> pa.Array:
    """`pa.nulls(n, t)` for the types of the log's actions, its buffers all slices of one shared
    zero buffer: the all-null columns of a file listing (deletion vectors, row ids, tags, ... on
    most tables) cost next to no memory, however many files."""
    bitmap = _zeros((n + 7) // 8)
    if pa.types.is_struct(t):
        return pa.Array.from_buffers(t, n, [bitmap], null_count=n,
                                     children=[null_array(t.field(i).type, n) for i in range(t.num_fields)])
    if pa.types.is_map(t) or pa.types.is_list(t):
        entries = pa.nulls(0, pa.struct([t.key_field, t.item_field])) if pa.types.is_map(t) else pa.nulls(0, t.value_type)
        return pa.Array.from_buffers(t, n, [bitmap, _zeros(4 * (n + 1))], null_count=n, children=[entries])
    if pa.types.is_string(t) or pa.types.is_binary(t):
        return pa.Array.from_buffers(t, n, [bitmap, _zeros(4 * (n + 1)), _zeros(0)], null_count=n)
    if pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        return pa.Array.from_buffers(t, n, [bitmap, _zeros(8 * (n + 1)), _zeros(0)], null_count=n)
    if pa.types.is_boolean(t):
        return pa.Array.from_buffers(t, n, [bitmap, _zeros((n + 7) // 8)], null_count=n)
    if pa.types.is_null(t):
        return pa.nulls(n)
    return pa.Array.from_buffers(t, n, [bitmap, _zeros(t.bit_width // 8 * n)], null_count=n)


def lean(arr: pa.Array | pa.ChunkedArray):
    """`arr`, or when every value is null, the same column as a `null_array` (its own buffers,
    a decoded reader's zeros, freed)."""
    n = len(arr)
    if n < 4096 or arr.null_count != n:
        return arr
    out = null_array(arr.type, n)
    return pa.chunked_array([out], arr.type) if isinstance(arr, pa.ChunkedArray) else out


_POOL: list[pa.MemoryPool] = []


def memory_pool() -> pa.MemoryPool:
    """The memory pool the log's big reads (checkpoints, large JSON commits) allocate from:
    jemalloc where pyarrow has it, unless ARROW_DEFAULT_MEMORY_POOL names a pool (the user's own
    choice is kept). pyarrow's default, mimalloc, hands the pages of freed buffers back to the OS
    and faults fresh ones in on the next allocation: reading a 1M-file checkpoint took 0.7-1.0 s
    of system time with it (1.1-1.4 s in all) against 0.2 s with jemalloc (0.6 s in all), and
    peaked 60-90 MB higher."""
    if not _POOL:
        import os

        pool = pa.default_memory_pool()
        if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
            try:
                pool = pa.jemalloc_memory_pool()
            except (NotImplementedError, pa.ArrowException):   # a pyarrow built without jemalloc
                pass
        _POOL.append(pool)
    return _POOL[0]
