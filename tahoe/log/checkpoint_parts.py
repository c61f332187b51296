"""Which part of a multi-part checkpoint — or which sidecar of a V2 checkpoint — each file action
goes to: delta-spark's `repartition(numParts, coalesce(add.path, remove.path))`.

  1. `spark_string_hash`: Spark's `hash()` of a string (Murmur3 x86_32 over its UTF-8 bytes, seed
     42), vectorised over Arrow; a null path (the non-file actions) hashes to the seed.
  2. `checkpoint_part_of`: part = pmod(hash, numParts), a function of the path and the number of
     parts alone, so the parts of two writers of one version (tahoe or delta-spark, whatever
     tombstones each one's clock keeps) mix into a complete, duplicate-free checkpoint.
  3. `partition_file_actions` / `split_parts`: the checkpoint's rows cut into those parts.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["SPARK_HASH_SEED", "spark_string_hash", "checkpoint_part_of", "partition_file_actions", "split_parts"]

SPARK_HASH_SEED = 42
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _mix(h: np.ndarray, k: np.ndarray) -> None:
    """h = mixH1(h, mixK1(k)) in place (uint32 arithmetic wraps)."""
    k *= _C1
    k = (k << np.uint32(15)) | (k >> np.uint32(17))
    k *= _C2
    h ^= k
    h[:] = (h << np.uint32(13)) | (h >> np.uint32(19))
    h *= np.uint32(5)
    h += np.uint32(0xE6546B64)


def spark_string_hash(strings: pa.Array | pa.ChunkedArray, seed: int = SPARK_HASH_SEED) -> np.ndarray:
    """Spark's `hash()` of each string (Murmur3Hash: `Murmur3_x86_32.hashUnsafeBytes` over the
    UTF-8 bytes — 4-byte little-endian words, then each trailing byte mixed on its own, sign
    extended — with `seed`); a null hashes to the seed. int32 per row, vectorised over the
    Arrow buffers: rows are ordered by length so that word j of every row long enough is one
    contiguous slice."""
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks() if strings.num_chunks else pa.array([], pa.large_string())
    arr = strings.cast(pa.large_string())
    n = len(arr)
    if n == 0:
        return np.zeros(0, np.int32)
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], np.int64)[arr.offset:arr.offset + n + 1]
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    data = np.concatenate([data, np.zeros(4, np.uint8)])      # room for the last 4-byte read
    # the little-endian uint32 starting at every byte offset (an unaligned, overlapping view)
    word_at = np.ndarray((len(data) - 3,), dtype="<u4", buffer=data, strides=(1,))
    length = offsets[1:] - offsets[:-1]
    order = np.argsort(-length, kind="stable")
    start = offsets[:-1][order]
    length = length[order]
    words = length // 4
    # rows (in `order`) with at least j words are the prefix [0, count[j])
    count = np.searchsorted(-words, -np.arange(int(words[0]) + 1, dtype=np.int64), side="right")
    h = np.full(n, seed & 0xFFFFFFFF, np.uint32)
    with np.errstate(over="ignore"):
        for j in range(int(words[0])):
            m = int(count[j + 1])
            k = word_at[start[:m] + 4 * j].astype(np.uint32)
            _mix(h[:m], k)
        tail = length % 4
        for t in range(3):
            rows = np.nonzero(tail > t)[0]
            if len(rows):
                hk = h[rows]
                _mix(hk, data[start[rows] + 4 * words[rows] + t].astype(np.int8).astype(np.int32).astype(np.uint32))
                h[rows] = hk
        h ^= length.astype(np.uint32)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    out = np.empty(n, np.uint32)
    out[order] = h
    if arr.null_count:
        out[np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)] = seed & 0xFFFFFFFF
    return out.view(np.int32)


def checkpoint_part_of(paths: pa.Array | pa.ChunkedArray, num_parts: int) -> np.ndarray:
    """The 0-based part of a multi-part checkpoint each action goes to, by its file path (null for
    non-file actions): delta-spark's partitioning (see above)."""
    return np.mod(spark_string_hash(paths).astype(np.int64), num_parts)


def partition_file_actions(files: pa.Table, parts: int) -> list[pa.Table]:
    """File-action rows hash-partitioned by path as delta-spark partitions them
    (`checkpoint_part_of`), each part sorted by path, adds before removes on equal paths."""
    paths = pc.coalesce(pc.struct_field(files.column("add"), "path"),
                        pc.struct_field(files.column("remove"), "path"))
    part_of = checkpoint_part_of(paths, parts)
    order = pc.sort_indices(pa.table({"part": part_of, "p": paths, "i": np.arange(files.num_rows)}),
                            sort_keys=[("part", "ascending"), ("p", "ascending"), ("i", "ascending")])
    files = files.take(order)
    bounds = np.searchsorted(part_of[order.to_numpy()], np.arange(parts + 1))
    return [files.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i])) for i in range(parts)]


def split_parts(table: pa.Table, n_non_file: int, parts: int) -> list[pa.Table]:
    """Hash-partition the actions by file path as delta-spark does (`checkpoint_part_of`); within
    a part, the non-file actions (all in part pmod(42, parts)) come first, then the file actions
    sorted by path, adds before removes on equal paths."""
    out = partition_file_actions(table.slice(n_non_file), parts)
    non_file_part = SPARK_HASH_SEED % parts
    out[non_file_part] = pa.concat_tables([table.slice(0, n_non_file), out[non_file_part]])
    return out
