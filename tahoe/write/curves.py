"""Space-filling curves: the keys OPTIMIZE sorts rows by so that each file holds a small box of the clustering
columns' values (delta-spark's `MultiDimClustering`). Pure computation on numpy/Arrow arrays.

  1. Range ids (`range_bounds`, `range_ids`): a column cut into ranges of about equal row counts, as Spark's
     RangePartitioner; nulls get id 0.
  2. Z-order keys (`zorder_keys`): the ids' bits interleaved, as delta-spark's `interleave_bits`.
  3. Hilbert keys (`hilbert_keys`, 2 to 9 columns): the position on the Hilbert curve, from compact Hilbert
     state tables.
  4. Keys wider than 64 bits are several words; `key_order` sorts either form, `key_bytes` gives
     big-endian bytes."""

from __future__ import annotations

import functools
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidOptionError

__all__ = ["NUM_RANGE_IDS", "MAX_HILBERT_COLUMNS", "range_bounds", "range_ids", "bits_for", "zorder_keys",
           "hilbert_keys", "key_order", "key_bytes", "curve_keys"]

# delta-spark's spark.databricks.io.skipping.mdc.rangeId.max
NUM_RANGE_IDS = 1000
MAX_HILBERT_COLUMNS = 9


def bits_for(num_ranges: int) -> int:
    """Bits per dimension for ids below `num_ranges` (delta-spark: highest one bit's position + 1)."""
    if num_ranges < 2:
        raise InvalidOptionError(f"the number of range ids must be greater than 1, got {num_ranges}")
    return int(num_ranges).bit_length()


# --- range partition ids -----------------------------------------------------------------------

def _as_array(values) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    return values


def _numpy_view(arr: pa.Array) -> np.ndarray | None:
    """The values of `arr` as a numpy array that sorts and compares as Arrow orders them —
    integers, dates, times, timestamps, durations (their integer storage) and floats — or None
    for other types. Slots under nulls hold whatever the buffer holds (a view, no copy)."""
    t = arr.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) and not pa.types.is_float16(t):
        dtype = t.to_pandas_dtype()
    elif pa.types.is_temporal(t) and not pa.types.is_interval(t) and t.bit_width in (32, 64):
        dtype = np.int32 if t.bit_width == 32 else np.int64
    else:
        return None
    buf = arr.buffers()[1]
    if buf is None:
        return None
    return np.frombuffer(buf, dtype=dtype, count=arr.offset + len(arr))[arr.offset:]


def _signed_zeros(values: np.ndarray) -> bool:
    """True when float `values` hold a -0.0 (Arrow's stable sort and hash keep -0.0 and 0.0
    apart where numpy's do not: such columns take the Arrow path, to give the same bounds)."""
    return values.dtype.kind == "f" and bool(np.any(np.signbit(values) & (values == 0)))


def range_bounds(values, num_ranges: int = NUM_RANGE_IDS) -> pa.Array:
    """The range bounds of `values` (ascending, distinct, at most `num_ranges - 1`): the value at
    each 1/num_ranges quantile of the non-null values, a value never split between two ranges."""
    arr = _as_array(values)
    arr = arr.drop_null() if arr.null_count else arr
    n = len(arr)
    if n == 0 or num_ranges < 2:
        return arr.slice(0, 0)
    # the first position where the running count reaches m * n / num_ranges
    pos = np.ceil(np.arange(1, num_ranges) * (n / num_ranges)).astype(np.int64) - 1
    pos = np.unique(np.clip(pos, 0, n - 1))
    view = _numpy_view(arr)
    if view is not None and not _signed_zeros(view):
        # numbers and times: numpy's sort of the values themselves (a vectorised sort, no
        # indirection) picks the same values; NaN sorts last in both
        picked = np.sort(view)[pos]
        picked = picked[np.concatenate(([True], (picked[1:] != picked[:-1]) & ~(np.isnan(picked[1:]) & np.isnan(picked[:-1]))))] \
            if picked.dtype.kind == "f" else np.unique(picked)
        return pa.Array.from_buffers(arr.type, len(picked), [None, pa.py_buffer(np.ascontiguousarray(picked))])
    ordered = arr.take(pc.sort_indices(arr))
    picked = ordered.take(pa.array(pos))
    return pc.unique(picked)   # sorted input: first occurrences keep the order


def range_ids(values, bounds: pa.Array) -> np.ndarray:
    """Per value: the number of `bounds` below it (Spark's RangePartitioner.getPartition); 0 for
    nulls. `bounds` come from `range_bounds` (same type)."""
    arr = _as_array(values)
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if len(bounds) == 0:
        return np.zeros(n, dtype=np.int64)
    b = _as_array(bounds)
    if b.type != arr.type:
        b = b.cast(arr.type)
    view, bview = _numpy_view(arr), _numpy_view(b)
    if view is not None and bview is not None and not b.null_count:
        # a binary search of each value among the bounds (NaN above every number, as in Arrow)
        ids = np.searchsorted(bview, view, side="left").astype(np.int64)
    else:
        both = pa.concat_arrays([b, arr])
        ranks = pc.rank(both, sort_keys="ascending", tiebreaker="dense").to_numpy(zero_copy_only=False)
        rb, rv = ranks[:len(b)], ranks[len(b):]
        ids = np.searchsorted(rb, rv, side="left").astype(np.int64)
    if arr.null_count:
        ids[np.asarray(pc.is_null(arr))] = 0
    return ids


# --- keys ------------------------------------------------------------------------------------------

def _words(total_bits: int) -> int:
    return max(1, math.ceil(total_bits / 64))


def _put_bits(words: np.ndarray, total_bits: int, position: int, values: np.ndarray, width: int) -> None:
    """OR `values` (width bits each) into the keys at bit `position` counted from the most
    significant bit of a `total_bits`-bit key held in `words` (rows × words, MSB word first)."""
    for w in range(width):
        bit = (values >> np.uint64(width - 1 - w)) & np.uint64(1)
        at = position + w                      # from the MSB of the key
        from_lsb = total_bits - 1 - at
        word = words.shape[1] - 1 - from_lsb // 64
        words[:, word] |= bit << np.uint64(from_lsb % 64)


def _finish(words: np.ndarray) -> np.ndarray:
    return words[:, 0] if words.shape[1] == 1 else words


@functools.lru_cache(maxsize=None)
def _spread_table(bits: int, n: int) -> np.ndarray:
    """Every `bits`-bit id with its bits spread `n` apart: bit b (from the most significant)
    moved to bit n * (bits - 1 - b) — one column's share of an interleaved key."""
    v = np.arange(1 << bits, dtype=np.uint64)
    out = np.zeros(1 << bits, dtype=np.uint64)
    for b in range(bits):
        out |= ((v >> np.uint64(b)) & np.uint64(1)) << np.uint64(n * b)
    return out


def zorder_keys(ids: list[np.ndarray], bits: int = bits_for(NUM_RANGE_IDS)) -> np.ndarray:
    """Z-order keys: bits of the ids interleaved, from the most significant bit down, column 0
    first at each bit (delta-spark's `interleave_bits`). A uint64 array when the key fits in 64
    bits, else rows × words."""
    if not ids:
        raise InvalidOptionError("Z-ordering needs at least one column")
    n = len(ids)
    rows = len(ids[0])
    total = n * bits
    cols = [np.asarray(i, dtype=np.uint64) for i in ids]
    if total <= 64 and bits <= 16:
        # one lookup per column: its ids with their bits spread n apart, shifted to its place
        spread = _spread_table(bits, n)
        key = np.zeros(rows, dtype=np.uint64)
        for j, c in enumerate(cols):
            key |= spread[c.astype(np.intp)] << np.uint64(n - 1 - j)
        return key
    words = np.zeros((rows, _words(total)), dtype=np.uint64)
    for b in range(bits):
        shift = np.uint64(bits - 1 - b)
        for j, c in enumerate(cols):
            _put_bits(words, total, b * n + j, (c >> shift) & np.uint64(1), 1)
    return _finish(words)


# --- Hilbert -----------------------------------------------------------------------------------------

def _rotl(n: int, x: int, s: int) -> int:
    s %= n
    return ((x << s) | (x >> (n - s))) & ((1 << n) - 1) if s else x


def _rotr(n: int, x: int, s: int) -> int:
    s %= n
    return ((x >> s) | (x << (n - s))) & ((1 << n) - 1) if s else x


def _x2_codes(n: int) -> list[int]:
    """The entry/exit corner pairs of the sub-cubes of the first-order curve in n dimensions
    (pairs laid end to end), built from those of n-1 dimensions by reflection."""
    if n == 1:
        return [0, 1, 0, 1]
    half = 1 << (n - 1)
    base = _x2_codes(n - 1)
    base[-1] = base[-2] + half
    out = [0] * (2 * len(base))
    for i, v in enumerate(base):
        out[i] = v
        out[len(out) - 1 - i] = v ^ half
    return out


@functools.lru_cache(maxsize=None)
def _hilbert_table(n: int) -> np.ndarray:
    """The n-dimensional Hilbert state table: entry `state * 2^n + corner` holds
    (position of that corner within the sub-cube order) << 32 | next state. A transformation is
    (reflection mask x2, rotation dy): t(e) = rotl(e ^ x2, dy)."""
    size = 1 << n
    x2 = _x2_codes(n)
    gray = [i ^ (i >> 1) for i in range(size)]
    # the transformation the curve applies inside sub-cube y of the first-order curve
    row_t = []
    for y in range(size):
        a, b = x2[2 * y], x2[2 * y + 1]
        trailing_zeros = ((a ^ b) & -(a ^ b)).bit_length() - 1
        row_t.append((a, n - 1 - trailing_zeros))    # reflect by a, rotate by the axis a→b moves on

    def compose(t: tuple[int, int], u: tuple[int, int]) -> tuple[int, int]:
        # t applied after u
        return (_rotr(n, t[0], u[1]) ^ u[0], (t[1] + u[1]) % n)

    def apply(t: tuple[int, int], e: int) -> int:
        return _rotl(n, e ^ t[0], t[1])

    states: dict[tuple[int, int], int] = {(0, 0): 0}
    order: list[tuple[int, int]] = [(0, 0)]
    # state 0: corner gray[y] is visited y-th; entering it, the curve continues in row_t[y]
    table: dict[int, list[tuple[int, int]]] = {}
    first: list[tuple[int, int]] = [(0, 0)] * size          # corner -> (position, next state)
    by_corner_y = {gray[y]: y for y in range(size)}
    for y in range(size):
        t = row_t[y]
        if t not in states:
            states[t] = len(order)
            order.append(t)
        first[gray[y]] = (y, states[t])
    table[0] = first
    i = 1
    while i < len(order):
        m = order[i]
        entries: list[tuple[int, int]] = [(0, 0)] * size
        for corner in range(size):
            j = apply(m, corner)
            y = by_corner_y[j]
            t = compose(order[first[j][1]], m)
            if t not in states:
                states[t] = len(order)
                order.append(t)
            entries[corner] = (y, states[t])
        table[i] = entries
        i += 1
    out = np.zeros(len(order) * size, dtype=np.uint64)
    for s, entries in table.items():
        for corner, (y, nxt) in enumerate(entries):
            out[s * size + corner] = (np.uint64(y) << np.uint64(32)) | np.uint64(nxt)
    return out


def hilbert_keys(ids: list[np.ndarray], bits: int = bits_for(NUM_RANGE_IDS)) -> np.ndarray:
    """Hilbert keys of the points (ids[0][r], ids[1][r], ...) with `bits` bits per dimension
    (delta-spark's `hilbert_index`; 2 to 9 columns). A uint64 array when n * bits < 64, else
    rows × words."""
    n = len(ids)
    if not 2 <= n <= MAX_HILBERT_COLUMNS:
        raise InvalidOptionError(
            f"Hilbert clustering needs 2 to {MAX_HILBERT_COLUMNS} columns, got {n}")
    table = _hilbert_table(n)
    rows = len(ids[0])
    total = n * bits
    words = np.zeros((rows, _words(total)), dtype=np.uint64)
    total_key = words.shape[1] * 64 if words.shape[1] > 1 else total
    offset = total_key - total
    cols = [np.asarray(i, dtype=np.uint64) for i in ids]
    state = np.zeros(rows, dtype=np.uint64)
    size = np.uint64(1 << n)
    mask32 = np.uint64((1 << 32) - 1)
    for b in range(bits):
        shift = np.uint64(bits - 1 - b)
        corner = np.zeros(rows, dtype=np.uint64)
        for c in cols:
            corner = (corner << np.uint64(1)) | ((c >> shift) & np.uint64(1))
        entry = table[(state * size + corner).astype(np.int64)]
        h = entry >> np.uint64(32)
        state = entry & mask32
        _put_bits(words, total_key, offset + b * n, h, n)
    return _finish(words)


def curve_keys(ids: list[np.ndarray], curve: str, bits: int = bits_for(NUM_RANGE_IDS)) -> np.ndarray:
    """Keys of `curve` ("zorder" or "hilbert"; Hilbert with one column is its range id)."""
    if curve == "zorder":
        return zorder_keys(ids, bits)
    if curve == "hilbert":
        if len(ids) == 1:
            return np.asarray(ids[0], dtype=np.uint64)
        return hilbert_keys(ids, bits)
    raise InvalidOptionError(f"unknown curve {curve!r}: expected 'zorder' or 'hilbert'")


def key_order(keys: np.ndarray) -> np.ndarray:
    """The stable ascending order of `keys` (one uint64 per row, or rows × words)."""
    if keys.ndim == 1:
        n = len(keys)
        index_bits = max(1, int(n - 1).bit_length())
        key_bits = int(keys.max()).bit_length() if n else 0
        if n and keys.dtype.kind in "ui" and keys.min() >= 0 and key_bits + index_bits <= 64:
            # each key with its row number below it: all distinct, so a plain (vectorised) sort
            # gives the stable order, and the row numbers are read back from the low bits
            both = (keys.astype(np.uint64) << np.uint64(index_bits)) | np.arange(n, dtype=np.uint64)
            both.sort()
            return (both & np.uint64((1 << index_bits) - 1)).astype(np.int64)
        return np.argsort(keys, kind="stable")
    return np.lexsort(keys.T[::-1])


def key_bytes(keys: np.ndarray) -> list[bytes]:
    """Big-endian bytes of each key: their unsigned byte order is the key order."""
    k = keys.reshape(len(keys), -1) if keys.ndim == 1 else keys
    be = k.astype(">u8")
    return [row.tobytes() for row in be]
