"""Deleting rows by position with deletion vectors (spec "Deletion Vectors", "Writer Requirement
for Deletion Vectors"), Spark-free: the building block of merge-on-read DML.

    old, new = stage_deleted_rows(snapshot, {add.path: [0, 17, 42]})
    txn.remove_files(old); txn.add_files(new)

`stage_deleted_rows` unions the given row indexes with each file's current deletion vector,
writes all the new bitmaps into one DV file (`<table>/<prefix>/deletion_vector_<uuid>.bin`) and
returns the files' current AddFiles (to remove, each with its old DV, as the log keys logical
files by path and DV) and their replacements: the same data file with the new DV, `numRecords`
kept (it counts the physical rows, as the spec requires) and `tightBounds` false (the min/max
still bound the valid rows, but no longer tightly). Nothing is committed here; a transaction
that never commits leaves the DV file as an orphan for VACUUM. `delete_rows` wraps it in one
DELETE commit.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Iterable, Mapping

import numpy as np
from pyroaring import BitMap64

from ..errors import InvalidTableOperationError
from ..log import DeltaLog
from ..log.snapshot import Snapshot
from ..protocol.actions import AddFile
from ..protocol.deletion_vectors import (
    DeletionVectorDescriptor, encode_dv_file, load_deletion_vector, new_dv_path_component,
)
from ..protocol.stats import parse_stats
from ..protocol.table_features import is_feature_supported
from ..txn import Transaction

__all__ = ["stage_deleted_rows", "delete_rows"]


def stage_deleted_rows(snapshot: Snapshot, rows_by_path: Mapping[str, Iterable[int]]
                       ) -> tuple[list[AddFile], list[AddFile]]:
    """(current AddFiles, replacements with deletion vectors) for marking `rows_by_path` — row
    indexes within each data file (an iterable of ints or a pyroaring BitMap64), keyed by the
    AddFile's `path` — deleted. A file whose given
    rows its deletion vector already holds stays as it is (not returned). InvalidTableOperationError, before
    anything is written, when the table does not support deletion vectors, a path is not an
    active file, a file has no numRecords, or an index is past the file's last row."""
    if not rows_by_path:
        return [], []
    if not is_feature_supported(snapshot.protocol, "deletionVectors"):
        raise InvalidTableOperationError(
            f"table {snapshot.table_root} does not support deletion vectors: set "
            f"delta.enableDeletionVectors=true on it first")
    active = {a.path: a for a in snapshot.add_files() if a.path in rows_by_path}
    missing = sorted(set(rows_by_path) - set(active))
    if missing:
        raise InvalidTableOperationError(
            f"cannot delete rows of {missing[:3]}: not active files of version {snapshot.version}")
    old, bitmaps = [], []
    for path, rows in rows_by_path.items():
        add = active[path]
        st = parse_stats(add.stats) if add.stats else None
        if st is None or st.num_records is None:
            raise InvalidTableOperationError(
                f"{path} has no numRecords in its stats: a file with a deletion vector must have one")
        if isinstance(rows, BitMap64):
            bm = BitMap64(rows)
            if bm and bm.max() >= st.num_records:
                raise InvalidTableOperationError(
                    f"row index {bm.max()} is outside {path}, which has {st.num_records} rows")
        else:
            idx = np.sort(np.asarray(rows if isinstance(rows, np.ndarray) else list(rows), dtype=np.int64))
            idx = idx[np.r_[True, idx[1:] != idx[:-1]]] if idx.size else idx  # (np.unique: 70x slower here)
            if idx.size and (idx[0] < 0 or idx[-1] >= st.num_records):
                bad = int(idx[0] if idx[0] < 0 else idx[-1])
                raise InvalidTableOperationError(
                    f"row index {bad} is outside {path}, which has {st.num_records} rows")
            bm = BitMap64(idx.astype(np.uint64))
        if add.deletion_vector is not None:
            before = load_deletion_vector(add.deletion_vector, snapshot.table_root, snapshot.store.read_range)
            if bm.issubset(before):  # nothing new for this file
                continue
            bm |= before
        if not bm:
            continue
        old.append(add)
        bitmaps.append(bm)
    if not old:
        return [], []
    data, placements = encode_dv_file(bitmaps)
    path_or_inline, u = new_dv_path_component()
    prefix = path_or_inline[:-20]  # the z85 text of the uuid is 20 characters
    store = snapshot.store
    store.write(store.join(snapshot.table_root, *([prefix] if prefix else []), f"deletion_vector_{u}.bin"), data)
    new = [dataclasses.replace(
               a, data_change=True, stats=_wide_bounds(a.stats),
               deletion_vector=DeletionVectorDescriptor("u", path_or_inline, size, len(bm), off))
           for a, bm, (off, size) in zip(old, bitmaps, placements)]
    return old, new


def _wide_bounds(stats: str) -> str:
    """The stats with `tightBounds` false: min/max were taken over rows some of which are gone."""
    d = json.loads(stats)
    d["tightBounds"] = False
    return json.dumps(d, separators=(",", ":"))


def delete_rows(table: str | DeltaLog, rows_by_path: Mapping[str, Iterable[int]],
                predicate: str | None = None, storage_options: dict | None = None) -> int | None:
    """Mark rows deleted with deletion vectors in one DELETE commit (the table must have
    `delta.enableDeletionVectors`); returns the version, or None when nothing was new."""
    log = table if isinstance(table, DeltaLog) else DeltaLog.for_table(table, storage_options)
    snap = log.snapshot()
    old, new = stage_deleted_rows(snap, rows_by_path)
    if not old:
        return None
    txn = Transaction(log, "DELETE", {"predicate": json.dumps([predicate] if predicate else [])}, snapshot=snap)
    txn.read_whole_table()
    txn.remove_files(old)
    txn.add_files(new)
    return txn.commit()
