"""The native streaming source (`tahoe.spark.streaming.NativeStreamSource`, `tahoe.spark.calls` rule 7): on a
classic session `spark.readStream.format("delta").load(path)` of a table Spark's JVM reaches is Spark's v1
streaming `Source` in the driver, each micro-batch read by Spark's parquet reader; the offsets, admission
and errors are the data source's. `spark.tahoe.read.nativeStreamingSource=false` keeps the data source; Spark
Connect, the change data feed and a schema given keep it too. The scenarios that matter run on both sources.

Oracles: rows derived by hand, delta-rs reading the sink, the checkpoint's offset files (delta-spark's
DeltaSourceOffset JSON), Spark's own word on which source ran (`sources[0].description`: delta-spark's
DeltaSource names itself `DeltaSource[<path>]`)."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from tahoe.spark.calls import NATIVE_STREAM_SOURCE_CONF
from tahoe.write import write_table
from tests.spark.test_streaming import _append, _delta_rs, _delta_rs_rows

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


@pytest.fixture(params=["native", "datasource"])
def source_kind(request, spark):
    if request.param == "datasource":
        spark.conf.set(NATIVE_STREAM_SOURCE_CONF, "false")
    yield request.param
    spark.conf.unset(NATIVE_STREAM_SOURCE_CONF)


def _source_description(q) -> str:
    return next(p["sources"][0]["description"] for p in reversed(q.recentProgress) if p.get("sources"))


def _is_native(q) -> bool:
    return _source_description(q).startswith("DeltaSource[")


def _run(df, sink: str, ck: str, **trigger):
    q = df.writeStream.format("delta").option("checkpointLocation", ck).trigger(**(trigger or {"availableNow": True})) \
        .start(sink)
    q.awaitTermination()
    return q


def _offsets(ck: str) -> list[dict]:
    """The source offset of each batch in Spark's offset log (its last line)."""
    d = os.path.join(ck, "offsets")
    return [json.loads(open(os.path.join(d, n)).read().strip().splitlines()[-1])
            for n in sorted((n for n in os.listdir(d) if n.isdigit()), key=int)]


def test_partitions_deletion_vectors_and_admission_on_both_sources(spark, tmp_path, source_kind):
    """A partitioned table with a deletion vector in its snapshot and later appends, read one file a
    batch: the rows are the live rows (by hand), the partition column typed and filled, one batch per
    file, the offsets delta-spark's (reservoirVersion / index / isStartingVersion); the sink (read by
    delta-rs) holds each row once."""
    from tahoe.log import DeltaLog
    from tahoe.write import delete_rows

    src, sink, ck = (str(tmp_path / n) for n in ("src", "sink", "ck"))
    write_table(src, pa.table({"id": pa.array(range(6), pa.int64()), "day": pa.array([1, 1, 1, 2, 2, 2], pa.int32())}),
                partition_by=["day"], properties={"delta.enableDeletionVectors": "true"})
    first = sorted(DeltaLog.for_table(src).snapshot().add_files(), key=lambda f: f.path)[0]
    delete_rows(src, {first.path: [1]})                             # id 1 (day 1, the file's 2nd row)
    write_table(src, pa.table({"id": pa.array([6], pa.int64()), "day": pa.array([3], pa.int32())}), mode="append")
    df = spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(src)
    assert df.schema.simpleString() == "struct<id:bigint,day:int>"
    q = _run(df, sink, ck)
    assert q.exception() is None and _is_native(q) == (source_kind == "native")
    assert _delta_rs_rows(sink) == [(0, 1), (2, 1), (3, 2), (4, 2), (5, 2), (6, 3)]
    offs = _offsets(ck)
    assert len(offs) == 3                                           # one file a batch
    assert [(o["reservoirVersion"], o["index"], o["isStartingVersion"]) for o in offs] == \
        [(2, 0, True), (2, 1, True), (3, -1, False)]    # the snapshot of version 2 (3 files), then after it
    assert {o["reservoirId"] for o in offs} == {DeltaLog.for_table(src).snapshot().metadata.id}


def test_a_checkpoint_moves_between_the_two_sources(spark, tmp_path):
    """A query started on the data source continues on the native source from its checkpoint and
    back again: every row once, batch ids consecutive (the offsets' JSON is the same text)."""
    src, sink, ck = (str(tmp_path / n) for n in ("src", "sink", "ck"))
    _append(src, [0, 1])
    try:
        for k, native in enumerate(["false", "true", "false", "true"]):
            spark.conf.set(NATIVE_STREAM_SOURCE_CONF, native)
            if k:
                _append(src, [2 * k, 2 * k + 1])
            q = _run(spark.readStream.format("delta").load(src), sink, ck)
            assert q.exception() is None and _is_native(q) == (native == "true")
    finally:
        spark.conf.unset(NATIVE_STREAM_SOURCE_CONF)
    assert _delta_rs_rows(sink) == [(i,) for i in range(8)]
    assert len(_offsets(ck)) == 4


def test_errors_and_what_keeps_the_data_source(spark, tmp_path):
    """On the native source a version that changes data stops the stream with delta-spark's error
    class (the data source's message), having delivered what came before; the change data feed and
    a schema given stay on the data source; the conf takes only true / false."""
    from tahoe.errors import InvalidOptionError

    src, sink, ck = (str(tmp_path / n) for n in ("src", "sink", "ck"))
    _append(src, [0, 1])                                            # version 0
    _append(src, [2, 3])                                            # version 1
    _delta_rs(f"DeltaTable({src!r}).delete('id = 0')\nout = 0")    # version 2 rewrites a file
    q = (spark.readStream.format("delta").option("startingVersion", 1).load(src).writeStream.format("memory")
         .queryName("tahoe_native_refused").trigger(availableNow=True).start())
    try:
        q.awaitTermination()
    except Exception:  # noqa: BLE001 - q.exception() holds it
        pass
    err = q.exception()
    assert err is not None and "DELTA_SOURCE_TABLE_IGNORE_CHANGES" in str(err) and "version 2" in str(err)
    assert _is_native(q)
    assert sorted(r.id for r in spark.table("tahoe_native_refused").collect()) == [2, 3]

    cdf = spark.readStream.format("delta").option("readChangeFeed", "true").option("startingVersion", 0).load(src)
    q = _run(cdf.select("id", "_change_type"), sink, ck)
    assert q.exception() is None and not _is_native(q)
    given = spark.readStream.format("delta").schema("id BIGINT").load(src)
    q = _run(given, str(tmp_path / "sink2"), str(tmp_path / "ck2"))
    assert not _is_native(q)
    try:
        spark.conf.set(NATIVE_STREAM_SOURCE_CONF, "yes")
        with pytest.raises(InvalidOptionError, match=NATIVE_STREAM_SOURCE_CONF):
            spark.readStream.format("delta").load(src)
    finally:
        spark.conf.unset(NATIVE_STREAM_SOURCE_CONF)
