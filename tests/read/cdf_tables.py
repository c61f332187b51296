"""Tables for the change data feed tests (Spark-free in tests/read/test_changes.py, through Spark in
tests/spark/test_streaming.py), built here with the rows each version wrote written down by hand.

`late_cdf(path)` — the change data feed turned on midway, an OPTIMIZE inside the CDF range:
  v0 WRITE ids 0, 1 (CDF off)      v1 WRITE id 2 (CDF off)   v2 SET TBLPROPERTIES CDF on
  v3 WRITE id 3                    v4 OPTIMIZE (dataChange=false: no change rows)
  v5 WRITE id 4
Commit files are given the modification times 2024-01-01T00:00Z + v hours (the commit timestamps
delta-spark and tahoe take), so timestamp ranges are known.

`renamed(path)` — column mapping (name) and CDF, a column renamed twice:
  v0 WRITE (0, x), (1, y) as (id, a)   v1 WRITE (2, z)   v2 RENAME a -> b
  v3 WRITE (3, w)                      v4 RENAME b -> c  v5 WRITE (4, v)
"""

from __future__ import annotations

import os
from datetime import datetime, timezone

import pyarrow as pa

BASE_MS = int(datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp() * 1000)
HOUR_MS = 3600_000

# (id, _change_type, _commit_version) of every change row of late_cdf from version 3 on
LATE_CDF_CHANGES = [(3, "insert", 3), (4, "insert", 5)]
LATE_CDF_LATEST = 5

# renamed: rows as (id, value, _change_type, _commit_version)
RENAMED_V0_V1 = [(0, "x", "insert", 0), (1, "y", "insert", 0), (2, "z", "insert", 1)]
RENAMED_V4_V5 = [(4, "v", "insert", 5)]


def _stamp_commits(path: str) -> None:
    log = os.path.join(path, "_delta_log")
    for name in os.listdir(log):
        if name.endswith(".json") and name[:20].isdigit():
            t = (BASE_MS + int(name[:20]) * HOUR_MS) / 1000
            os.utime(os.path.join(log, name), (t, t))


def late_cdf(path: str) -> str:
    import tahoe
    from tahoe.write import write_table

    write_table(path, pa.table({"id": pa.array([0, 1], pa.int64())}))
    write_table(path, pa.table({"id": pa.array([2], pa.int64())}), mode="append")
    tahoe.Table(path).set_properties({"delta.enableChangeDataFeed": "true"})
    write_table(path, pa.table({"id": pa.array([3], pa.int64())}), mode="append")
    m = tahoe.Table(path).optimize()
    assert m["numFilesRemoved"] == 3 and m["version"] == 4
    write_table(path, pa.table({"id": pa.array([4], pa.int64())}), mode="append")
    assert tahoe.Table(path).version == LATE_CDF_LATEST
    _stamp_commits(path)
    return path


def renamed(path: str) -> str:
    import tahoe
    from tahoe.write import write_table

    def rows(ids, values, col):
        return pa.table({"id": pa.array(ids, pa.int64()), col: values})
    write_table(path, rows([0, 1], ["x", "y"], "a"),
                properties={"delta.columnMapping.mode": "name", "delta.enableChangeDataFeed": "true"})
    write_table(path, rows([2], ["z"], "a"), mode="append")
    tahoe.Table(path).rename_column("a", "b")
    write_table(path, rows([3], ["w"], "b"), mode="append")
    tahoe.Table(path).rename_column("b", "c")
    write_table(path, rows([4], ["v"], "c"), mode="append")
    assert tahoe.Table(path).version == 5
    return path


def missing_change_data(start: int, end: int, version: int) -> str:
    """delta-spark's DELTA_MISSING_CHANGE_DATA message (delta-error-classes.json), filled in."""
    return (f"[DELTA_MISSING_CHANGE_DATA] Error getting change data for range [{start} , {end}] as change data "
            f"was not\nrecorded for version [{version}]. If you've enabled change data feed on this table,\n"
            f"use `DESCRIBE HISTORY` to see when it was first enabled.\n"
            f"Otherwise, to start recording change data, use `ALTER TABLE table_name SET TBLPROPERTIES\n"
            f"(delta.enableChangeDataFeed=true)`.")


def start_after_latest(start: int, latest: int) -> str:
    """delta-spark's DeltaErrors.startVersionAfterLatestVersion message, filled in."""
    return (f"Provided Start version({start}) for reading change data is invalid. Start version cannot be greater "
            f"than the latest version of the table({latest}).")
