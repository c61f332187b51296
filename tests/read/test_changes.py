"""The change reader (`tahoe.read.changes`, `tahoe.Table.changes`, `tahoe changes`): deletion-vector
updates (a commit that removes a file with one deletion vector and adds it back with another yields
only the rows whose deleted/kept status changed), delta-spark's range rules and errors (CDF off in
the range, a start after the latest version, timestamps), an OPTIMIZE inside the range (no rows),
and column renames inside the range (delta-spark's schema errors and its end-version read schema).
Oracles: rows and messages derived by hand from what each commit did (delta-spark's message
texts copied from its error classes), and delta-rs's `load_cdf` read of the same table."""

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


# --- delta-spark's range and schema rules, through Table.changes and `tahoe changes` ----------------

def _cli(*args: str):
    from typer.testing import CliRunner

    from tahoe.cli import app

    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def _cli_error(r) -> str:
    """The `error: ...` the CLI printed (the console may wrap it: joined back)."""
    assert r.exit_code == 1, r.output
    return " ".join(r.output.split())


def test_change_feed_errors_ranges_and_timestamps_as_delta_spark(tmp_path):
    """CDF turned on midway (late_cdf): a range starting before it is refused with delta-spark's
    DELTA_MISSING_CHANGE_DATA message word for word; a start after the latest version with its
    message; an OPTIMIZE (dataChange=false) inside the range yields no row; timestamp bounds pick
    the versions committed within them. Oracles: rows and messages written down by hand
    (cdf_tables), delta-rs's load_cdf."""
    import pytest

    from tahoe.errors import ChangeDataRangeError
    from tahoe.read.changes import CdfNotEnabledError
    from tests.read.cdf_tables import (
        BASE_MS, HOUR_MS, LATE_CDF_CHANGES, LATE_CDF_LATEST, late_cdf, missing_change_data, start_after_latest,
    )

    path = late_cdf(str(tmp_path / "late"))
    t = tahoe.Table(path)
    with pytest.raises(CdfNotEnabledError) as ei:
        t.changes(0)
    assert str(ei.value) == missing_change_data(0, LATE_CDF_LATEST, 0)
    assert ei.value.error_class == "DELTA_MISSING_CHANGE_DATA"
    with pytest.raises(CdfNotEnabledError) as ei:
        t.changes(1, 3)
    assert str(ei.value) == missing_change_data(1, 3, 1)

    with pytest.raises(ChangeDataRangeError) as ei:
        t.changes(LATE_CDF_LATEST + 1)
    assert str(ei.value) == start_after_latest(LATE_CDF_LATEST + 1, LATE_CDF_LATEST)
    assert t.changes(LATE_CDF_LATEST + 1, allow_out_of_range=True).num_rows == 0

    # versions 3..5: the OPTIMIZE of version 4 rewrote every file with dataChange=false: no rows
    got = t.changes(3)
    rows3 = sorted(zip(got.column("id").to_pylist(), got.column("_change_type").to_pylist(),
                       got.column("_commit_version").to_pylist()))
    assert rows3 == LATE_CDF_CHANGES
    rs = _delta_rs_cdf(path, 3)
    assert sorted((r[0], r[1], r[2]) for r in rs) == LATE_CDF_CHANGES
    assert t.changes(4, 4).num_rows == 0

    # timestamps: commits are an hour apart from 2024-01-01T00:00Z; 02:30..04:30 holds versions 3 and 4
    by_ts = t.changes(starting_timestamp="2024-01-01 02:30:00", ending_timestamp="2024-01-01T04:30:00Z")
    assert list(zip(by_ts.column("id").to_pylist(), by_ts.column("_commit_version").to_pylist())) == [(3, 3)]
    assert [int(x.timestamp() * 1000) for x in by_ts.column("_commit_timestamp").to_pylist()] == \
        [BASE_MS + 3 * HOUR_MS]
    assert t.changes(starting_timestamp="2024-01-01T04:30:00Z").column("id").to_pylist() == [4]

    # the CLI: the same rows, and the same refusals (exit code 1, the message)
    r = _cli("changes", path, "--starting-version", "3", "--json")
    assert r.exit_code == 0, r.output
    assert sorted((x["id"], x["_change_type"], x["_commit_version"]) for x in json.loads(r.stdout)) == LATE_CDF_CHANGES
    r = _cli("changes", path, "--starting-timestamp", "2024-01-01T02:30:00Z", "--ending-timestamp",
             "2024-01-01T04:30:00Z", "--json")
    assert [(x["id"], x["_commit_version"]) for x in json.loads(r.stdout)] == [(3, 3)]
    out = _cli_error(_cli("changes", path))
    assert "error: CdfNotEnabledError: " + " ".join(missing_change_data(0, LATE_CDF_LATEST, 0).split()) in out
    out = _cli_error(_cli("changes", path, "--starting-version", "9"))
    assert " ".join(start_after_latest(9, LATE_CDF_LATEST).split()) in out
    # a subprocess, as a user runs it: the rows as tab-separated lines
    r = subprocess.run([sys.executable, "-m", "tahoe", "changes", path, "--starting-version", "3"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [ln.split("\t") for ln in r.stdout.splitlines()]
    assert lines[0] == ["id", "_change_type", "_commit_version", "_commit_timestamp"]
    assert sorted((int(a), b, int(c)) for a, b, c, _ in lines[1:]) == LATE_CDF_CHANGES


def test_change_feed_across_renames_as_delta_spark(tmp_path):
    """A column renamed twice under column mapping (`renamed`): a range spanning a rename the read
    schema cannot read is refused (DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE, naming the
    version), a range whose start version's data the read schema cannot read likewise
    (..._INCOMPATIBLE_DATA_SCHEMA); a range ending before the renames reads in the schema of its
    end version (delta-spark's `endVersion` schema mode for column-mapping tables). Oracle: rows
    written down by hand (cdf_tables)."""
    import pytest

    from tahoe.errors import ChangeDataFeedError
    from tests.read.cdf_tables import RENAMED_V0_V1, RENAMED_V4_V5, renamed

    path = renamed(str(tmp_path / "renamed"))
    t = tahoe.Table(path)

    def rows(tbl, col):
        return sorted(zip(tbl.column("id").to_pylist(), tbl.column(col).to_pylist(),
                          tbl.column("_change_type").to_pylist(), tbl.column("_commit_version").to_pylist()))

    with pytest.raises(ChangeDataFeedError) as ei:
        t.changes(0)
    assert ei.value.error_class == "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE"
    msg = str(ei.value)
    assert msg.startswith("[DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE] Retrieving table changes between "
                          "version 0 and 5 failed because of an incompatible schema change.")
    assert "at version 5, but we found an incompatible schema change at version 2." in msg
    assert "please query table changes separately from version 0 to 2 - 1, and from version 2 to 5." in msg
    with pytest.raises(ChangeDataFeedError) as ei:
        t.changes(3, 5)
    assert ei.value.error_class == "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA"
    assert "but we found an incompatible data schema at version 3." in str(ei.value)

    early = t.changes(0, 1)
    assert early.column_names == ["id", "a", "_change_type", "_commit_version", "_commit_timestamp"]
    assert rows(early, "a") == RENAMED_V0_V1
    late = t.changes(4)
    assert late.column_names[:2] == ["id", "c"] and rows(late, "c") == RENAMED_V4_V5
    r = _cli("changes", path, "--starting-version", "0", "--ending-version", "1", "--json")
    assert sorted((x["id"], x["a"], x["_change_type"], x["_commit_version"]) for x in json.loads(r.stdout)) == \
        RENAMED_V0_V1
    assert "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE" in _cli_error(_cli("changes", path))


def _delta_rs_cdf(path: str, start: int) -> list[tuple]:
    code = textwrap.dedent(f"""
        import json, os, pyarrow as pa
        from deltalake import DeltaTable
        t = pa.table(DeltaTable({path!r}).load_cdf(starting_version={start}).read_all())
        print(json.dumps([t.column(c).to_pylist() for c in ("id", "_change_type", "_commit_version")]))
        os._exit(0)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("[")]
    assert lines, r.stderr[-2000:]
    return sorted(zip(*json.loads(lines[-1])))
