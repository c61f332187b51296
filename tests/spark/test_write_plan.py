"""The Spark writers on the shared planner and commit step: concurrent table creation (never a
metadata overwrite), commits whose acknowledgement is lost, column defaults, type widening,
partition values that do not parse, and delta-spark's commitInfo for every write.

Oracles: hand-made rows, the raw `_delta_log` JSON and the files on disk, delta-rs, and
delta-spark's own commits in the conformance tables (operation names, parameters, metrics)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

import tahoe
from tahoe import DeltaLog, Table
from tahoe.errors import ProtocolChangedException, SchemaError
from tests.conftest import assert_rows_equal
from tests.spark.test_write import _norm, delta_rs_read

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def _versions(path: str) -> list[int]:
    d = Path(path, "_delta_log")
    if not d.exists():
        return []
    return sorted(int(n.split(".")[0]) for n in os.listdir(d) if n.endswith(".json") and not n.startswith("."))


def _version_zero_id(path: str) -> str:
    lines = Path(path, "_delta_log", f"{0:020d}.json").read_text().splitlines()
    return next(json.loads(x)["metaData"]["id"] for x in lines if '"metaData"' in x)


def _parquet_files(path: str) -> list[str]:
    out = []
    for dirpath, _dirs, names in os.walk(path):
        if "_delta_log" in dirpath:
            continue
        out += [os.path.join(dirpath, n) for n in names if n.endswith(".parquet")]
    return out


def _rows(spark, path: str) -> pa.Table:
    from tahoe.spark import read_delta

    return pa.Table.from_pylist([r.asDict() for r in read_delta(spark, path).collect()])


# --- two writers creating the same table -------------------------------------------------------------

def test_write_delta_loses_a_create_race_without_touching_the_winner(spark, tmp_path, monkeypatch):
    """write_delta planned on no table; after its job, before its commit, another writer creates
    the table. The commit fails with delta-spark's ProtocolChangedException, its files are
    deleted, and the winner's table (id, schema, rows) is untouched — on today's main the loser
    committed its create-metadata on top, replacing the table id."""
    import tahoe.spark.write as sw
    from tahoe.spark import write_delta

    path = str(tmp_path / "t")
    rival = pa.table({"k": ["a", "b"], "v": [1.0, 2.0]})
    original = sw._write_native

    def then_rival(*a, **kw):
        out = original(*a, **kw)
        tahoe.write_table(path, rival, partition_by="k")
        return out

    monkeypatch.setattr(sw, "_write_native", then_rival)
    with pytest.raises(ProtocolChangedException, match="multiple writers are writing to an empty directory"):
        write_delta(spark.range(5), path)
    assert _versions(path) == [0]
    assert DeltaLog.for_table(path).snapshot().metadata.id == _version_zero_id(path)
    assert len(_parquet_files(path)) == 2
    assert_rows_equal(_norm(delta_rs_read(path, tmp_path)), _norm(rival), "delta-rs")


def test_datasource_loses_a_create_race_without_touching_the_winner(spark, tmp_path):
    """The same through `format("delta").save()`, whose commit runs in a Spark Python worker: the
    job's tasks wait (a UDF polls a flag file) until the rival has created the table; the commit
    then fails with ProtocolChangedException and the winner's table survives."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    path = str(tmp_path / "t")
    started, go = str(tmp_path / "started"), str(tmp_path / "go")

    @F.udf(LongType())
    def gate(x):
        import os as _os
        import time as _time

        open(started, "a").close()
        deadline = _time.time() + 120
        while not _os.path.exists(go) and _time.time() < deadline:
            _time.sleep(0.05)
        return x

    rival = pa.table({"id": [100, 200]})

    def rival_writer():   # creates the table while the save's tasks wait
        deadline = time.time() + 120
        while not os.path.exists(started) and time.time() < deadline:
            time.sleep(0.05)
        try:
            tahoe.write_table(path, rival)
        finally:
            open(go, "w").close()

    t = threading.Thread(target=rival_writer)
    t.start()
    errors: list = []
    try:
        spark.range(4).repartition(1).select(gate("id").alias("id")).write.format("delta").mode("append").save(path)
    except Exception as e:  # noqa: BLE001
        errors.append(e)
    t.join(timeout=300)
    assert len(errors) == 1 and "multiple writers are writing to an empty directory" in str(errors[0])
    assert _versions(path) == [0]
    assert DeltaLog.for_table(path).snapshot().metadata.id == _version_zero_id(path)
    assert len(_parquet_files(path)) == 1      # the loser's files are gone
    assert_rows_equal(_norm(delta_rs_read(path, tmp_path)), _norm(rival), "delta-rs")


# --- a commit whose acknowledgement is lost -----------------------------------------------------------

def test_write_delta_commit_with_a_lost_acknowledgement_keeps_its_files(spark, tmp_path):
    from tests.write.test_commit_outcome import AckLosingLocalStore

    from tahoe.spark import write_delta

    path = str(tmp_path / "t")
    write_delta(spark.range(3), path)
    store = AckLosingLocalStore()
    v = write_delta(spark.range(3, 5), DeltaLog(store, os.path.abspath(path)))
    assert store.lost == 1 and v == 1 and _versions(path) == [0, 1]
    assert_rows_equal(_norm(delta_rs_read(path, tmp_path)), pa.table({"id": list(range(5))}), "delta-rs")


# --- column defaults -------------------------------------------------------------------------------------

def test_column_defaults_in_every_writer(spark, tmp_path):
    """A table with `CURRENT_DEFAULT` columns (spec "Default Columns"; feature allowColumnDefaults):
    every writer fills an omitted column with its default — an explicit NULL stays NULL; on today's
    main the defaults were ignored (nulls written)."""
    from tahoe.protocol.schema import LONG, STRING, StructField, StructType
    from tahoe.spark import write_delta
    from tahoe.txn import create_table

    path = str(tmp_path / "t")
    schema = StructType([StructField("id", LONG), StructField("status", STRING, False, {"CURRENT_DEFAULT": "'new'"}),
                         StructField("n", LONG, True, {"CURRENT_DEFAULT": "42"})])
    snap = create_table(path, schema)
    assert "allowColumnDefaults" in (snap.protocol.writer_features or ())
    tahoe.write_table(path, pa.table({"id": [1]}))                                  # Arrow
    tahoe.write_table(path, pa.table({"id": [2], "n": pa.array([None], pa.int64())}))  # explicit NULL
    write_delta(spark.createDataFrame([(3,)], "id long"), path)                     # Spark, native files
    spark.createDataFrame([(4, "old")], "id long, status string").write.format("delta").mode("append").save(path)
    expected = pa.table({"id": [1, 2, 3, 4], "status": ["new", "new", "new", "old"], "n": [42, None, 42, 42]})
    assert_rows_equal(_norm(delta_rs_read(path, tmp_path)), _norm(expected), "delta-rs")
    assert_rows_equal(_norm(_rows(spark, path)), _norm(expected), "tahoe on Spark")


# --- type widening -----------------------------------------------------------------------------------------

def test_write_delta_type_widening_records_type_changes(spark, tmp_path):
    """mergeSchema widening int → long and float → double on a table with
    delta.enableTypeWidening: the schema records `delta.typeChanges` (spec "Type Widening"), the
    protocol lists typeWidening (reader and writer), and the old narrow files read as the wide
    type. delta-rs 1.6.6 parses the widened schema with its history, but refuses to read the data
    of a table with the typeWidening reader feature (it does not support it)."""
    import subprocess
    import sys

    from tahoe.spark import write_delta

    path = str(tmp_path / "t")
    write_delta(spark.createDataFrame([(1, 1.5)], "id int, x float"), path,
                properties={"delta.enableTypeWidening": "true"})
    write_delta(spark.createDataFrame([(2**40, 2.25)], "id long, x double"), path, merge_schema=True)
    code = ("import json, os\nfrom deltalake import DeltaTable\nt = DeltaTable(%r)\n"
            "print(json.dumps([t.schema().to_json(), list(t.protocol().reader_features or [])]))\n"
            "try:\n    t.to_pyarrow_table()\nexcept Exception as e:\n    print('REFUSED', e)\nos._exit(0)\n") % path
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    schema_json, reader_features = json.loads(out.splitlines()[0])
    fields = {f["name"]: f for f in json.loads(schema_json)["fields"]}
    assert fields["id"]["type"] == "long" and fields["x"]["type"] == "double"
    assert fields["id"]["metadata"]["delta.typeChanges"] == [{"fromType": "integer", "toType": "long"}]
    assert fields["x"]["metadata"]["delta.typeChanges"] == [{"fromType": "float", "toType": "double"}]
    assert "typeWidening" in reader_features and "REFUSED" in out and "typeWidening" in out
    expected = pa.table({"id": [1, 2**40], "x": [1.5, 2.25]})
    assert_rows_equal(_rows(spark, path), expected, "tahoe on Spark")
    assert_rows_equal(Table(path).to_arrow(), expected, "tahoe Arrow reader")


# --- partition values that do not parse ----------------------------------------------------------------

def test_unparsable_partition_value_fails_the_write(spark, tmp_path):
    """Spark writes a date partition of year 10000 as the directory `d=+10000-01-01`, which is no
    valid Delta partition value: the write fails naming the column, nothing is committed and no
    file is left (today's main committed the raw string)."""
    from tahoe.spark import write_delta

    path = str(tmp_path / "t")
    write_delta(spark.sql("select 1L as id, date'2024-01-01' as d"), path, partition_by="d")
    bad = spark.sql("select 2L as id, make_date(10000, 1, 1) as d")
    with pytest.raises(SchemaError, match=r"partition column 'd'.*\+10000-01-01"):
        write_delta(bad, path)
    assert _versions(path) == [0] and len(_parquet_files(path)) == 1
    new = str(tmp_path / "new")
    with pytest.raises(SchemaError, match="partition column 'd'"):
        write_delta(bad, new, partition_by="d")
    assert _versions(new) == [] and _parquet_files(new) == []
