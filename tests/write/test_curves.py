"""The space-filling curves OPTIMIZE sorts by (tahoe.write.curves): range partition ids, Z-order
keys and Hilbert keys.

Oracles: values derived by hand in the comments (quantile bounds of small lists; bit
interleavings written out bit by bit; the 4×4 Hilbert curve drawn quadrant by quadrant), a
bit-by-bit reimplementation of delta-spark's `interleave_bits` (4 bytes per column) in this file,
and the defining property of a Hilbert curve (consecutive keys are grid neighbours)."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest

from tahoe.errors import InvalidOptionError
from tahoe.write.curves import (
    bits_for, curve_keys, hilbert_keys, key_bytes, key_order, range_bounds, range_ids, zorder_keys,
)


# --- range partition ids ---------------------------------------------------------------------------

def test_range_bounds_and_ids_by_hand():
    # sorted: 1 2 3 3 5 7 8 9 (n=8); 4 ranges -> positions ceil(m*8/4)-1 = 1, 3, 5 -> bounds 2, 3, 7
    values = pa.array([5, 1, 3, 3, 9, 7, 2, 8, None])
    bounds = range_bounds(values, 4)
    assert bounds.to_pylist() == [2, 3, 7]
    # id = number of bounds below the value (Spark's RangePartitioner.getPartition); null -> 0
    assert range_ids(values, bounds).tolist() == [2, 0, 1, 1, 3, 2, 0, 3, 0]
    # a value is never split between ranges: four 1s and a 2 in 4 ranges -> the one bound 1
    few = pa.array([1, 1, 1, 1, 2])
    assert range_bounds(few, 4).to_pylist() == [1]
    assert range_ids(few, range_bounds(few, 4)).tolist() == [0, 0, 0, 0, 1]
    # strings: b a d c in 2 ranges -> position ceil(4/2)-1 = 1 of a b c d -> bound "b"
    s = pa.chunked_array([["b", "a"], ["d", "c"]])
    assert range_bounds(s, 2).to_pylist() == ["b"]
    assert range_ids(s, range_bounds(s, 2)).tolist() == [0, 0, 1, 1]
    # no values / one range: everything in range 0
    assert range_bounds(pa.array([None, None], pa.int64()), 4).to_pylist() == []
    assert range_ids(pa.array([4, 5]), range_bounds(pa.array([4, 5]), 1)).tolist() == [0, 0]


def test_bits_for_the_number_of_range_ids():
    assert bits_for(1000) == 10 and bits_for(2) == 2 and bits_for(4) == 3 and bits_for(3) == 2
    with pytest.raises(InvalidOptionError, match="greater than 1"):
        bits_for(1)


# --- Z-order --------------------------------------------------------------------------------------

def test_zorder_keys_are_the_ids_bits_interleaved_by_hand():
    # 2 columns, 2 bits: key = x1 y1 x0 y0 (most significant bit first, column 0 first)
    morton = {(0, 0): 0, (0, 1): 1, (0, 2): 4, (0, 3): 5,
              (1, 0): 2, (1, 1): 3, (1, 2): 6, (1, 3): 7,
              (2, 0): 8, (2, 1): 9, (2, 2): 12, (2, 3): 13,
              (3, 0): 10, (3, 1): 11, (3, 2): 14, (3, 3): 15}
    pts = list(morton)
    keys = zorder_keys([np.array([p[0] for p in pts]), np.array([p[1] for p in pts])], bits=2)
    assert keys.dtype == np.uint64 and keys.tolist() == [morton[p] for p in pts]
    # 3 columns, 3 bits: x=5 (101), y=3 (011), z=6 (110) -> 1 0 1 | 0 1 1 | 1 1 0 = 0b101011110
    assert zorder_keys([np.array([5]), np.array([3]), np.array([6])], bits=3).tolist() == [0b101011110]
    # one column: the id itself
    assert zorder_keys([np.array([0, 7, 3])], bits=3).tolist() == [0, 7, 3]


def test_wide_zorder_keys_are_split_into_64_bit_words():
    # 7 columns x 10 bits = 70 bits: two words. Column 0 all ones, the rest zero: bit b of column 0
    # sits at position 7*b from the most significant of 70 bits, i.e. bit 69 - 7*b from the least
    # significant: 69 is bit 5 of the high word; 62, 55, ..., 6 are in the low word
    ids = [np.array([1023])] + [np.array([0])] * 6
    keys = zorder_keys(ids, bits=10)
    assert keys.shape == (1, 2)
    assert keys[0].tolist() == [1 << 5, sum(1 << (69 - 7 * b) for b in range(1, 10))]
    # the last column's lowest bit is the key's lowest bit
    assert zorder_keys([np.array([0])] * 6 + [np.array([1])], bits=10)[0].tolist() == [0, 1]


def _delta_spark_interleave(ids: list[int]) -> int:
    """delta-spark's interleave_bits: each id as 4 big-endian bytes; output bit i*n + j is bit i
    (from the most significant of 32) of column j."""
    out = 0
    for i in range(32):
        for v in ids:
            out = (out << 1) | ((v >> (31 - i)) & 1)
    return out


def test_zorder_order_is_delta_sparks_interleave_bits_order():
    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 7):            # 7 x 10 bits: a two-word key
        ids = [rng.integers(0, 1000, 300) for _ in range(n)]
        theirs = [_delta_spark_interleave([int(c[r]) for c in ids]) for r in range(300)]
        ours = zorder_keys(ids)       # 10 bits per column (1000 range ids)
        want = sorted(range(300), key=lambda r: (theirs[r], r))
        assert key_order(ours).tolist() == want
        by_bytes = sorted(range(300), key=lambda r: (key_bytes(ours)[r], r))
        assert by_bytes == want       # unsigned byte order of key_bytes is the key order


# --- Hilbert --------------------------------------------------------------------------------------

# The 4x4 Hilbert curve (x = column 0, y = column 1), drawn by hand: the first-order curve visits
# (0,0) (0,1) (1,1) (1,0); at the second order the quadrants go in that order, the first one
# transposed (it must leave towards the quadrant above), the last one transposed and reflected.
HILBERT_4X4 = [(0, 0), (1, 0), (1, 1), (0, 1),      # lower-left quadrant, transposed
               (0, 2), (0, 3), (1, 3), (1, 2),      # upper-left
               (2, 2), (2, 3), (3, 3), (3, 2),      # upper-right
               (3, 1), (2, 1), (2, 0), (3, 0)]      # lower-right, transposed and reflected


def _neighbours(a, b) -> bool:
    return sum(abs(x - y) for x, y in zip(a, b)) == 1


def test_hilbert_keys_on_a_2x2_and_a_4x4_grid_by_hand():
    assert hilbert_keys([np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])], bits=1).tolist() == [0, 1, 3, 2]
    pts = [(x, y) for x in range(4) for y in range(4)]
    keys = hilbert_keys([np.array([p[0] for p in pts]), np.array([p[1] for p in pts])], bits=2)
    assert {p: int(k) for p, k in zip(pts, keys)} == {p: i for i, p in enumerate(HILBERT_4X4)}


@pytest.mark.parametrize("dims,bits", [(2, 5), (3, 3), (4, 2), (9, 1)])
def test_hilbert_keys_visit_every_cell_once_moving_to_a_neighbour(dims, bits):
    pts = list(itertools.product(range(1 << bits), repeat=dims))
    keys = hilbert_keys([np.array([p[d] for p in pts]) for d in range(dims)], bits=bits)
    assert sorted(keys.tolist()) == list(range(len(pts)))          # a bijection onto 0 .. cells-1
    path = [pts[i] for i in key_order(keys)]
    assert path[0] == (0,) * dims
    assert all(_neighbours(a, b) for a, b in zip(path, path[1:]))


def test_wide_hilbert_keys_keep_the_curve():
    # 3 columns x 22 bits = 66 bits: two words. The cells of a 4x4x4 grid placed at the top of the
    # range (ids << 20) follow the same curve, one step apart in the key order
    pts = list(itertools.product(range(4), repeat=3))
    narrow = hilbert_keys([np.array([p[d] for p in pts]) for d in range(3)], bits=2)
    wide = hilbert_keys([np.array([p[d] << 20 for p in pts]) for d in range(3)], bits=22)
    assert wide.shape == (64, 2)
    assert key_order(wide).tolist() == key_order(narrow).tolist()


def test_curve_keys_dispatch_and_refusals():
    ids = [np.array([3, 1]), np.array([0, 2])]
    assert curve_keys(ids, "zorder", 2).tolist() == zorder_keys(ids, 2).tolist()
    assert curve_keys(ids, "hilbert", 2).tolist() == hilbert_keys(ids, 2).tolist()
    assert curve_keys(ids[:1], "hilbert", 2).tolist() == [3, 1]       # one column: its range id
    with pytest.raises(InvalidOptionError, match="unknown curve"):
        curve_keys(ids, "peano")
    with pytest.raises(InvalidOptionError, match="2 to 9 columns"):
        hilbert_keys([np.array([0])] * 10, bits=1)
    with pytest.raises(InvalidOptionError, match="at least one column"):
        zorder_keys([])


# --- the vectorised paths against plain Python ------------------------------------------------------

def _python_bounds(values: list, num_ranges: int) -> list:
    """range_bounds by hand: the non-null values sorted (NaN above every number), the value at
    each position ceil(m * n / num_ranges) - 1, duplicates dropped."""
    import math as m

    vals = sorted((v for v in values if v is not None), key=lambda v: (isinstance(v, float) and v != v, v))
    n = len(vals)
    out = []
    for k in range(1, num_ranges):
        v = vals[min(max(m.ceil(k * (n / num_ranges)) - 1, 0), n - 1)]
        if not out or not (out[-1] == v or (out[-1] != out[-1] and v != v)):
            out.append(v)
    return out


def _python_ids(values: list, bounds: list) -> list:
    """range_ids by hand: how many bounds are below each value (NaN above every number; null 0)."""
    import bisect

    def key(v):
        return (isinstance(v, float) and v != v, 0.0 if isinstance(v, float) and v != v else v)

    keys = [key(b) for b in bounds]
    return [0 if v is None else bisect.bisect_left(keys, key(v)) for v in values]


@pytest.mark.parametrize("kind", ["int64", "int8", "uint64", "float64", "float32", "timestamp", "date32",
                                  "string", "sliced"])
def test_range_bounds_and_ids_of_every_kind_match_python(kind):
    rng = np.random.default_rng(11)
    n = 5000
    if kind in ("int64", "sliced"):
        values = [int(v) for v in rng.integers(-50, 60, n)]
        t = pa.int64()
    elif kind == "int8":
        values, t = [int(v) for v in rng.integers(-128, 128, n)], pa.int8()
    elif kind == "uint64":
        values, t = [int(v) for v in rng.integers(0, 1 << 63, n, dtype=np.uint64) * 2 + 1], pa.uint64()
    elif kind in ("float64", "float32"):
        values = [float(v) + 0.0 for v in rng.normal(0, 3, n).round(1)]   # no -0.0: below
        values[::97] = [float("nan")] * len(values[::97])
        values[1::89] = [float("inf")] * len(values[1::89])
        t = pa.float64() if kind == "float64" else pa.float32()
    elif kind == "timestamp":
        values, t = [int(v) for v in rng.integers(0, 10**15, n)], pa.timestamp("us", "UTC")
    elif kind == "date32":
        values, t = [int(v) for v in rng.integers(0, 400, n)], pa.int32()
    else:
        values, t = [f"k{int(v):03d}" for v in rng.integers(0, 300, n)], pa.string()
    values = [None if i % 31 == 0 else v for i, v in enumerate(values)]
    arr = pa.array(values, t)
    if kind == "date32":
        arr = arr.cast(pa.date32())
    if kind == "sliced":     # an offset into a longer buffer, and chunks
        arr = pa.chunked_array([pa.array([7] * 13 + values, t).slice(13, 2000), pa.array(values[2000:], t)])
    if kind == "float32":
        values = arr.to_pylist()      # the float32 values themselves
    for num_ranges in (2, 7, 1000, 100_000):
        bounds = range_bounds(arr, num_ranges)
        py_bounds = _python_bounds(values, num_ranges)
        got = bounds.cast(pa.int64() if kind == "timestamp" else pa.int32()).to_pylist() if kind in ("timestamp", "date32") else bounds.to_pylist()
        assert len(got) == len(py_bounds)
        assert all(a == b or (a != a and b != b) for a, b in zip(got, py_bounds)), (num_ranges, got[:5], py_bounds[:5])
        assert range_ids(arr, bounds).tolist() == _python_ids(values, py_bounds)


def test_range_ids_with_signed_zeros_count_them_as_zero():
    values = [0.0, -0.0, 1.5, -1.5, None, 0.0, -0.0, float("nan")] * 5
    arr = pa.array(values, pa.float64())
    bounds = range_bounds(arr, 4)
    ids = range_ids(arr, bounds)
    assert ids.tolist() == _python_ids(values, [b for b in bounds.to_pylist()])
    # zeros of either sign get one id, below 1.5's and above -1.5's
    assert len({int(i) for v, i in zip(values, ids) if v == 0}) == 1


def test_key_order_is_stable_for_repeated_keys():
    rng = np.random.default_rng(5)
    for keys in (rng.integers(0, 16, 20_000).astype(np.uint64),                 # row numbers fit below the key
                 rng.integers(0, 4, 1000).astype(np.uint64) << np.uint64(62),   # they do not: the argsort path
                 np.zeros(0, np.uint64), np.array([5], np.uint64)):
        want = sorted(range(len(keys)), key=lambda r: (int(keys[r]), r))
        assert key_order(keys).tolist() == want
