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
    with pytest.raises(StreamingSourceError, match="DELTA_SCHEMA_CHANGED_WITH_VERSION") as ei:
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
