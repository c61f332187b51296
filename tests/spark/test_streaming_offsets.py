"""The Delta streaming source's offsets and admission control, driven the way Spark drives it
(`initialOffset`, `latestOffset(start, limit)`, `partitions(start, end)`, `read`) without a Spark
session: cheap checks of what the streaming queries in test_streaming.py cannot afford one query
each for — maxBytesPerTrigger, an upstream whole-file DELETE (refused, passed by ignoreDeletes),
an additive schema change after the stream's schema, a checkpoint of another table.

Oracles: rows and versions written by hand (each file of one commit), delta-spark's offset
rule (after a version's last file the offset is the next version at index -1) and its error
classes; delta-rs (in a subprocess) as the independent writer of the DELETE.
"""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from tahoe.errors import StreamingSourceError
from tahoe.log import DeltaLog
from tahoe.write import write_table


def _append(path: str, ids: list[int], **kw) -> None:
    write_table(path, pa.table({"id": pa.array(ids, pa.int64())}), mode="append", **kw)


def _reader(path: str, **options):
    from tahoe.spark.scan import spark_read_schema
    from tahoe.spark.streaming import DeltaStreamReader

    schema = spark_read_schema(DeltaLog.for_table(path).snapshot())
    return DeltaStreamReader({"path": path, **{k: str(v) for k, v in options.items()}}, schema)


def _rows(reader, start, end) -> list[int]:
    return sorted(i for p in reader.partitions(start, end) for b in reader.read(p)
                  for i in b.column(0).to_pylist())


def _at(reader, version: int, index: int = -1) -> tuple:
    return (reader.table_id, version, index)


def _key(off: dict) -> tuple:
    return (off["reservoirId"], off["reservoirVersion"], off["index"])


def test_admission_offsets_and_schema_change(tmp_path):
    from pyspark.sql.streaming.datasource import ReadMaxBytes

    p = str(tmp_path / "t")
    for k in range(3):                                  # versions 0, 1, 2: one file of two rows each
        _append(p, [2 * k, 2 * k + 1])
    r = _reader(p, startingVersion=0, maxFilesPerTrigger=2)
    start = r.initialOffset()
    assert _key(start) == _at(r, 0) and start["isStartingVersion"] is False
    limit = r.getDefaultReadLimit()
    end1 = r.latestOffset(start, limit)                 # two files: versions 0 and 1 whole
    assert _key(end1) == _at(r, 2)
    assert _rows(r, start, end1) == [0, 1, 2, 3]
    end2 = r.latestOffset(end1, limit)
    assert _key(end2) == _at(r, 3)
    assert _rows(r, end1, end2) == [4, 5]
    assert r.latestOffset(end2, limit) == end2         # nothing new

    # maxBytesPerTrigger: files while under the size, always at least one
    rb = _reader(p, startingVersion=0, maxBytesPerTrigger="1b")
    assert isinstance(rb.getDefaultReadLimit(), ReadMaxBytes)
    s = rb.initialOffset()
    e = rb.latestOffset(s, rb.getDefaultReadLimit())
    assert _key(e) == _at(rb, 1) and _rows(rb, s, e) == [0, 1]

    # no startingVersion: the snapshot the stream was created on first, as isStartingVersion offsets
    rs = _reader(p)
    s = rs.initialOffset()
    assert s["isStartingVersion"] is True and s["reservoirVersion"] == 2
    e = rs.latestOffset(s, rs.getDefaultReadLimit())
    assert _rows(rs, s, e) == [0, 1, 2, 3, 4, 5]

    # a column added after the stream's schema: the versions before it are read, then the stream stops
    write_table(p, pa.table({"id": pa.array([6], pa.int64()), "extra": ["x"]}), mode="append", schema_mode="merge")
    # (the stream was given startingVersion: delta-spark's _WITH_STARTING_OPTIONS variant)
    with pytest.raises(StreamingSourceError, match="DELTA_SCHEMA_CHANGED_WITH_STARTING_OPTIONS") as ei:
        r.latestOffset(end2, limit)
    assert "version 3" in str(ei.value)
    # a restarted stream (its schema now the new one) reads on from its checkpoint's offset
    r2 = _reader(p, startingVersion=0)
    assert _rows(r2, end2, r2.latestOffset(end2, r2.getDefaultReadLimit())) == [6]

    # an offset of another table (the table at the path was replaced)
    other = str(tmp_path / "other")
    _append(other, [1])
    with pytest.raises(StreamingSourceError, match="DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE"):
        _reader(other).latestOffset(end2, limit)


def test_whole_file_delete_refused_unless_ignore_deletes(tmp_path):
    p = str(tmp_path / "t")
    _append(p, [0, 1])                                  # version 0
    _append(p, [2, 3])                                  # version 1
    code = (f"import os\nfrom deltalake import DeltaTable\nDeltaTable({p!r}).delete('id < 2')\n"
            "print('OK')\nos._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "OK" in out.stdout, out.stderr[-2000:]       # version 2 removes the first file whole
    _append(p, [4])                                     # version 3

    r = _reader(p, startingVersion=0)
    start = r.initialOffset()
    end = r.latestOffset(start, r.getDefaultReadLimit())
    assert _key(end) == _at(r, 2) and _rows(r, start, end) == [0, 1, 2, 3]
    with pytest.raises(StreamingSourceError, match="DELTA_SOURCE_IGNORE_DELETE") as ei:
        r.latestOffset(end, r.getDefaultReadLimit())
    assert "ignoreDeletes" in str(ei.value) and "version 2" in str(ei.value)

    ri = _reader(p, startingVersion=0, ignoreDeletes="true")
    s = ri.initialOffset()
    e = ri.latestOffset(s, ri.getDefaultReadLimit())
    assert _key(e) == _at(ri, 4) and _rows(ri, s, e) == [0, 1, 2, 3, 4]


def test_non_additive_schema_changes_stop_the_stream_as_delta_spark(tmp_path):
    """delta-spark's DeltaSource schema checks: a column renamed under column mapping — met by a
    running stream, or before the version a new stream starts from — stops it with
    DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG; a type changed by an overwrite of the
    schema (no column mapping) with DELTA_SCHEMA_CHANGED_WITH_STARTING_OPTIONS when the stream was
    given startingVersion, DELTA_SCHEMA_CHANGED_WITH_VERSION when it reads the snapshot first.
    Oracle: the error classes and message texts of delta-spark's error classes, versions by hand."""
    import tahoe

    p = str(tmp_path / "cm")
    write_table(p, pa.table({"id": pa.array([0, 1], pa.int64()), "a": ["x", "y"]}),
                properties={"delta.columnMapping.mode": "name"})          # version 0
    r = _reader(p, startingVersion=0)
    s = r.initialOffset()
    e = r.latestOffset(s, r.getDefaultReadLimit())
    assert _rows(r, s, e) == [0, 1]
    tahoe.Table(p).rename_column("a", "b")                                 # version 1
    write_table(p, pa.table({"id": pa.array([2], pa.int64()), "b": ["z"]}), mode="append")   # version 2
    with pytest.raises(StreamingSourceError) as ei:
        r.latestOffset(e, r.getDefaultReadLimit())
    assert ei.value.error_class == "DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG"
    assert str(ei.value).startswith("[DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG] Streaming read is "
                                    "not supported on tables with read-incompatible schema changes (e.g. rename or "
                                    "drop or datatype changes).")
    assert '"name":"a"' in str(ei.value).split("Incompatible data schema:")[0]      # the stream's schema
    assert '"name":"b"' in str(ei.value).split("Incompatible data schema:")[1]
    # a new stream from version 0 (its schema: the latest, after the rename): refused at its start
    r2 = _reader(p, startingVersion=0)
    with pytest.raises(StreamingSourceError, match="USE_SCHEMA_LOG"):
        r2.latestOffset(r2.initialOffset(), r2.getDefaultReadLimit())
    # ... and from version 1 on it reads
    r3 = _reader(p, startingVersion=1)
    s3 = r3.initialOffset()
    assert _rows(r3, s3, r3.latestOffset(s3, r3.getDefaultReadLimit())) == [2]

    q = str(tmp_path / "retyped")
    write_table(q, pa.table({"id": pa.array([0], pa.int64()), "v": pa.array([1], pa.int32())}))   # version 0
    by_version = _reader(q, startingVersion=0)
    snapshot_first = _reader(q)
    write_table(q, pa.table({"id": pa.array([1], pa.int64()), "v": ["one"]}), mode="overwrite",
                schema_mode="overwrite")                                   # version 1: v int -> string
    s = by_version.initialOffset()
    e = by_version.latestOffset(s, by_version.getDefaultReadLimit())       # version 0 is read first
    assert _rows(by_version, s, e) == [0]
    with pytest.raises(StreamingSourceError) as ei:
        by_version.latestOffset(e, by_version.getDefaultReadLimit())
    assert ei.value.error_class == "DELTA_SCHEMA_CHANGED_WITH_STARTING_OPTIONS"
    assert str(ei.value).startswith("[DELTA_SCHEMA_CHANGED_WITH_STARTING_OPTIONS] Detected schema change in version "
                                    "1:\nstreaming source schema: ")
    assert "'startingVersion' or 'startingTimestamp' option to start from a version newer than\n1 with" in str(ei.value)
    s = snapshot_first.initialOffset()
    e = snapshot_first.latestOffset(s, snapshot_first.getDefaultReadLimit())
    with pytest.raises(StreamingSourceError) as ei:
        snapshot_first.latestOffset(e, snapshot_first.getDefaultReadLimit())
    assert ei.value.error_class == "DELTA_SCHEMA_CHANGED_WITH_VERSION"
