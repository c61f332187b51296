"""The change reader (`tahoe.read.changes.read_changes_arrow`) over deletion-vector updates: a
commit that removes a file with one deletion vector and adds it back with another yields only the
rows whose deleted/kept status changed. Oracles: rows derived by hand from what each commit did,
and delta-rs's `load_cdf` read of the same table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq

import tahoe
from tahoe.log import DeltaLog
from tahoe.read.changes import read_changes_arrow
from tahoe.write import delete_rows


def _changes(t: pa.Table) -> list[tuple]:
    return sorted(zip(t.column("id").to_pylist(), t.column("v").to_pylist(),
                      t.column("_change_type").to_pylist(), t.column("_commit_version").to_pylist()))


def _delta_rs_changes(path: str, start: int, end: int) -> list[tuple]:
    code = textwrap.dedent(f"""
        import json, os, pyarrow as pa
        from deltalake import DeltaTable
        t = pa.table(DeltaTable({path!r}).load_cdf(starting_version={start}, ending_version={end}).read_all())
        print(json.dumps([t.column(c).to_pylist() for c in ("id", "v", "_change_type", "_commit_version")]))
        os._exit(0)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("[")]
    assert lines, r.stderr[-2000:]
    return sorted(zip(*json.loads(lines[-1])))


def test_change_rows_of_deletion_vector_updates(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": pa.array(range(10), pa.int64()), "v": [f"a{i}" for i in range(10)]}),
                      properties={"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true"})
    (f,) = DeltaLog.for_table(path).snapshot().add_files()       # row position i holds id i
    assert delete_rows(path, {f.path: [1, 2]}) == 1               # a first DV
    assert delete_rows(path, {f.path: [2, 5]}) == 2               # the DV grows by row 5 only

    # version 3, an UPDATE in DV style without change data files: row 3 is marked deleted in its
    # file and written again, with its new value, in a new file
    from tahoe.protocol.actions import AddFile
    from tahoe.txn import Transaction
    from tahoe.write.deletion_vectors import stage_deleted_rows

    log = DeltaLog.for_table(path)
    snap = log.snapshot()
    pq.write_table(pa.table({"id": pa.array([3], pa.int64()), "v": ["b3"]}), os.path.join(path, "updated.parquet"))
    old, grown = stage_deleted_rows(snap, {f.path: [3]})
    txn = Transaction(log, "UPDATE", {"predicate": json.dumps(["id = 3"])}, snapshot=snap)
    txn.read_whole_table()
    txn.remove_files(old)
    txn.add_files(grown + [AddFile("updated.parquet", {}, os.path.getsize(os.path.join(path, "updated.parquet")),
                                   1_700_000_000_000, True, json.dumps({"numRecords": 1}))])
    assert txn.commit() == 3

    got = _changes(read_changes_arrow(DeltaLog.for_table(path), 0, 3))
    want = sorted([(i, f"a{i}", "insert", 0) for i in range(10)]
                  + [(1, "a1", "delete", 1), (2, "a2", "delete", 1),
                     (5, "a5", "delete", 2),
                     (3, "a3", "delete", 3), (3, "b3", "insert", 3)])
    assert got == want
    assert _delta_rs_changes(path, 0, 3) == want
    # one version alone, and the current rows agree with the changes' net effect
    assert _changes(read_changes_arrow(DeltaLog.for_table(path), 2, 2)) == [(5, "a5", "delete", 2)]
    rows = sorted(tahoe.Table(path).to_arrow().to_pylist(), key=lambda r: (r["id"], r["v"]))
    assert rows == [{"id": i, "v": "b3" if i == 3 else f"a{i}"} for i in range(10) if i not in (1, 2, 5)]

    # version 4, a RESTORE-like commit: the file comes back without its deletion vector, so the
    # rows it had hidden are inserted again
    snap = DeltaLog.for_table(path).snapshot()
    (dv_file,) = [a for a in snap.add_files() if a.path == f.path]
    txn = Transaction(DeltaLog.for_table(path), "RESTORE", {"version": 0}, snapshot=snap)
    txn.read_whole_table()
    txn.remove_files([dv_file.remove(1_700_000_000_000)])
    txn.add_files([AddFile(f.path, {}, f.size, f.modification_time, True, f.stats)])
    assert txn.commit() == 4
    restored = sorted([(1, "a1", "insert", 4), (2, "a2", "insert", 4), (3, "a3", "insert", 4),
                       (5, "a5", "insert", 4)])
    assert _changes(read_changes_arrow(DeltaLog.for_table(path), 4, 4)) == restored
    assert _delta_rs_changes(path, 4, 4) == restored
