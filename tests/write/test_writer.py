"""`tahoe.write_table` and the data-file writer: round trips read back by tahoe and by delta-rs
(partitioned with nulls and special characters, every primitive type, nested types, column
mapping by name and id), overwrite, replaceWhere, schema evolution, idempotent writes, constraint
enforcement that commits nothing, and the checkpoints the commits trigger."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tahoe
from tahoe import DeltaLog, Table
from tahoe.errors import (
    ConstraintViolationError, InvalidTableOperationError, SchemaError, UnsupportedFeatureError,
)
from tahoe.protocol.partition_values import unescape_path_name
from tahoe.protocol.schema import StructField, StructType, LONG, STRING, INTEGER
from tahoe.storage import resolve_data_path
from tahoe.write import conform_to_schema, write_data_files
from tahoe.storage import encode_log_path
from tests.conftest import normalized_rows

UTC = dt.timezone.utc


# --- helpers -----------------------------------------------------------------------------------

def delta_rs_rows(paths: list[str], tmp_path: Path, sql: bool = False) -> dict[str, pa.Table]:
    """Each table as delta-rs reads it (in a subprocess: it may abort at exit). `sql`: through its
    QueryBuilder (the path that reads column-mapping tables), else `to_pyarrow_table()`."""
    script = r"""
import json, os, sys
import pyarrow as pa, pyarrow.parquet as pq
from deltalake import DeltaTable, QueryBuilder
sql, out_dir = sys.argv[1] == "1", sys.argv[2]
for i, p in enumerate(sys.argv[3:]):
    try:
        t = DeltaTable(p)
        data = pa.table(QueryBuilder().register("t", t).execute("select * from t").read_all()) if sql \
            else t.to_pyarrow_table()
        pq.write_table(data, os.path.join(out_dir, f"{i}.parquet"))
        print(json.dumps([p, "ok"]), flush=True)
    except Exception as e:
        print(json.dumps([p, str(e)[:500]]), flush=True)
os._exit(0)
"""
    out_dir = tmp_path / f"deltars-{os.getpid()}-{len(list(tmp_path.iterdir()))}"
    out_dir.mkdir()
    res = subprocess.run([sys.executable, "-c", script, "1" if sql else "0", str(out_dir), *paths],
                         capture_output=True, text=True, timeout=120)
    status = dict(json.loads(line) for line in res.stdout.splitlines() if line.startswith("["))
    out = {}
    for i, p in enumerate(paths):
        assert status.get(p) == "ok", (p, status.get(p), res.stderr[-1500:])
        out[p] = pq.read_table(out_dir / f"{i}.parquet")
    return out


def same_rows(a: pa.Table, b: pa.Table, context: str = "") -> None:
    assert sorted(a.column_names) == sorted(b.column_names), context
    b = b.select(a.column_names)
    assert a.num_rows == b.num_rows, context
    assert normalized_rows(a) == normalized_rows(b), context


def read_back(path: str, tmp_path: Path, expected: pa.Table, sql: bool = False) -> None:
    """tahoe and delta-rs both return exactly the expected rows."""
    ours = Table(path).to_arrow()
    same_rows(ours, expected, "tahoe")
    theirs = delta_rs_rows([path], tmp_path, sql=sql)[path]
    same_rows(theirs, expected, "delta-rs")


def data_files(root: str) -> list[str]:
    out = []
    for d, _, files in os.walk(root):
        if "_delta_log" in d:
            continue
        out += [os.path.join(d, f) for f in files if f.endswith(".parquet")]
    return sorted(out)


# --- round trips -------------------------------------------------------------------------------

def test_partitioned_round_trip_with_nulls_special_characters_dates_timestamps(tmp_path):
    path = str(tmp_path / "t")
    specials = ["a", "a b", "100%", "x/y", "k=v", "c:d", "#h?q", "é ü", "", None, "[1]", "a+b"]
    n = len(specials)
    data = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "s": pa.array(specials, pa.string()),
        "d": pa.array([dt.date(2020, 1, 1 + i % 3) if i % 4 else None for i in range(n)], pa.date32()),
        "ts": pa.array([dt.datetime(2021, 9, 8, 11, 11, 11, 123456 * (i % 2), tzinfo=UTC) if i % 5 else None
                        for i in range(n)], pa.timestamp("us", tz="UTC")),
        "i": pa.array([i % 2 if i % 3 else None for i in range(n)], pa.int32()),
        "v": pa.array([f"value {i}" for i in range(n)]),
    })
    v = tahoe.write_table(path, data, partition_by=["s", "d", "ts", "i"])
    assert v == 0
    snap = DeltaLog.for_table(path).snapshot()
    assert snap.partition_columns == ["s", "d", "ts", "i"]
    for r in snap.files_table(["path", "partitionValues"]).to_pylist():
        pv = dict(r["partitionValues"])
        # directories are Hive-escaped on disk; the log path is that, URI-encoded
        on_disk = resolve_data_path(path, r["path"])
        assert os.path.exists(on_disk)
        dirs = os.path.relpath(on_disk, path).split(os.sep)[:-1]
        assert [unescape_path_name(d.split("=", 1)[1]) for d in dirs] == \
            [pv[c] if pv[c] is not None else "__HIVE_DEFAULT_PARTITION__" for c in ["s", "d", "ts", "i"]]
        # delta-spark >= 3.3's form: the instant in UTC, ISO 8601 with microseconds and a Z
        assert pv["ts"] is None or pv["ts"] in ("2021-09-08T11:11:11.000000Z", "2021-09-08T11:11:11.123456Z")
    # the empty string is a null partition value, as delta-spark reads it
    expected = data.set_column(1, "s", pa.array([None if s == "" else s for s in specials]))
    read_back(path, tmp_path, expected)
    # the partition files hold no partition columns
    for f in data_files(path):
        assert pq.ParquetFile(f).schema_arrow.names == ["id", "v"]


def test_log_paths_encode_like_delta_spark():
    assert encode_log_path("p=a%3Ab/part-0.parquet") == "p=a%253Ab/part-0.parquet"
    assert encode_log_path("_2=bar+%21/f") == "_2=bar+%2521/f"
    assert encode_log_path("p=a b/f") == "p=a%20b/f"
    assert encode_log_path("p=x@y#z/f") == "p=x@y%23z/f"


ALL_TYPES = pa.table({
    "i8": pa.array([1, -128, None], pa.int8()),
    "i16": pa.array([2, 32767, None], pa.int16()),
    "i32": pa.array([3, -2**31, None], pa.int32()),
    "i64": pa.array([4, 2**63 - 1, None], pa.int64()),
    "f32": pa.array([1.5, float("nan"), None], pa.float32()),
    "f64": pa.array([2.25, float("-inf"), None], pa.float64()),
    "b": pa.array([True, False, None]),
    "s": pa.array(["x", "ü€", None]),
    "bin": pa.array([b"\x00\x01", b"", None], pa.binary()),
    "d": pa.array([dt.date(1970, 1, 1), dt.date(9999, 12, 31), None], pa.date32()),
    "ts": pa.array([dt.datetime(2021, 1, 1, 1, 2, 3, 4, tzinfo=UTC), dt.datetime(1900, 1, 1, tzinfo=UTC), None],
                   pa.timestamp("us", tz="UTC")),
    "ntz": pa.array([dt.datetime(2021, 1, 1, 1, 2, 3, 4), dt.datetime(2000, 2, 29), None], pa.timestamp("us")),
    "dec": pa.array([Decimal("1.25"), Decimal("-99999999.99"), None], pa.decimal128(10, 2)),
    "dec38": pa.array([Decimal("12345678901234567890123456789012.345678"), Decimal("0"), None], pa.decimal128(38, 6)),
})


def test_all_primitive_types_round_trip(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_table(path, ALL_TYPES)
    t = Table(path)
    assert [f.type.simple_string() for f in t.schema.fields] == [
        "byte", "short", "integer", "long", "float", "double", "boolean", "string", "binary", "date",
        "timestamp", "timestamp_ntz", "decimal(10,2)", "decimal(38,6)"]
    assert t.protocol.min_reader_version == 3 and "timestampNtz" in t.protocol.reader_features
    # timestamps are INT64 micros, UTC-adjusted for `timestamp`, local for `timestamp_ntz`
    f = data_files(path)[0]
    pschema = pq.ParquetFile(f).schema
    ts_col = pschema.column(pq.ParquetFile(f).schema_arrow.get_field_index("ts"))
    assert ts_col.physical_type == "INT64" and "isAdjustedToUTC=true" in str(ts_col.logical_type)
    ntz_col = pschema.column(pq.ParquetFile(f).schema_arrow.get_field_index("ntz"))
    assert "isAdjustedToUTC=false" in str(ntz_col.logical_type)
    stats = json.loads(t.files(["stats"]).column(0)[0].as_py())
    assert stats["numRecords"] == 3 and stats["nullCount"]["b"] == 1 and stats["minValues"]["i64"] == 4
    read_back(path, tmp_path, ALL_TYPES)


def test_pandas_and_narrow_input_types_are_cast(tmp_path):
    import pandas as pd

    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": pa.array([1], pa.int64()), "ts": pa.array([dt.datetime(2020, 1, 1, tzinfo=UTC)],
                                                                                    pa.timestamp("us", tz="UTC"))}))
    df = pd.DataFrame({"id": pd.Series([2, 3], dtype="int16"),
                       "ts": pd.to_datetime(["2021-01-01 00:00:00.123456789", "2022-01-01 00:00:00.000000000"], utc=True)})
    tahoe.write_table(path, df)
    got = Table(path).to_arrow().sort_by("id")
    assert got.column("id").to_pylist() == [1, 2, 3]
    assert got.column("ts")[1].as_py() == dt.datetime(2021, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)
    with pytest.raises(SchemaError, match="id"):
        tahoe.write_table(path, pa.table({"id": ["x"]}))


NESTED = pa.table({
    "id": pa.array([1, 2, 3], pa.int64()),
    "st": pa.array([{"a": 1, "b": "x", "inner": {"c": 1.5}}, None, {"a": None, "b": "z", "inner": None}],
                   pa.struct([("a", pa.int32()), ("b", pa.string()), ("inner", pa.struct([("c", pa.float64())]))])),
    "arr": pa.array([[1, 2], [], None], pa.list_(pa.int64())),
    "arr_st": pa.array([[{"k": "a"}], None, [{"k": None}, None]], pa.list_(pa.struct([("k", pa.string())]))),
    "m": pa.array([[("a", 1), ("b", None)], None, []], pa.map_(pa.string(), pa.int32())),
    "nested_arr": pa.array([[[1], [2, 3]], None, [[]]], pa.list_(pa.list_(pa.int32()))),
})


def test_nested_types_round_trip(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_table(path, NESTED)
    schema = Table(path).schema
    assert schema.field("m").type.simple_string() == "map<string,integer>"
    stats = json.loads(Table(path).files(["stats"]).column(0)[0].as_py())
    assert stats["minValues"]["st"] == {"a": 1, "b": "x", "inner": {"c": 1.5}}
    assert stats["nullCount"]["st"] == {"a": 2, "b": 1, "inner": {"c": 2}} and stats["nullCount"]["arr"] == 1
    read_back(path, tmp_path, NESTED)


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping_round_trip(tmp_path, mode):
    path = str(tmp_path / mode)
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "part": ["a", "b", None],
                     "st": pa.array([{"x": 1}, None, {"x": 3}], pa.struct([("x", pa.int32())])),
                     "my col": ["p", "q", "r"]})
    tahoe.write_table(path, data, partition_by="part", properties={"delta.columnMapping.mode": mode})
    tahoe.write_table(path, data.slice(0, 1))
    snap = DeltaLog.for_table(path).snapshot()
    assert snap.column_mapping_mode == mode and "columnMapping" in (snap.protocol.writer_features or ["columnMapping"])
    phys = {f.name: f.metadata["delta.columnMapping.physicalName"] for f in snap.schema.fields}
    ids = {f.name: f.metadata["delta.columnMapping.id"] for f in snap.schema.fields}
    for r in snap.files_table(["path", "partitionValues", "stats"]).to_pylist():
        assert set(dict(r["partitionValues"])) == {phys["part"]}
        assert r["path"].startswith(phys["part"] + "=")
        stats = json.loads(r["stats"])
        assert set(stats["nullCount"]) == {phys["id"], phys["st"], phys["my col"]}
    f = data_files(path)[0]
    fschema = pq.ParquetFile(f).schema_arrow
    assert fschema.names == [phys["id"], phys["st"], phys["my col"]]
    assert int(fschema.field(phys["id"]).metadata[b"PARQUET:field_id"]) == ids["id"]
    expected = pa.concat_tables([data, data.slice(0, 1)])
    same_rows(Table(path).to_arrow(), expected, "tahoe")
    same_rows(delta_rs_rows([path], tmp_path, sql=True)[path], expected, "delta-rs QueryBuilder")


# --- modes -------------------------------------------------------------------------------------

def test_overwrite_and_time_travel(tmp_path):
    path = str(tmp_path / "t")
    first = pa.table({"id": [1, 2], "p": ["a", "b"]})
    tahoe.write_table(path, first, partition_by="p")
    second = pa.table({"id": [10], "p": ["c"]})
    v = tahoe.write_table(path, second, mode="overwrite")
    assert v == 1
    same_rows(Table(path).to_arrow(), second)
    same_rows(Table(path, version=0).to_arrow(), first)
    ci = DeltaLog.for_table(path).history(1)[0].commit_info
    assert ci["operation"] == "WRITE" and ci["operationParameters"]["mode"] == "Overwrite"
    # delta-spark's WRITE metrics (DeltaOperationMetrics.WRITE; a conformance table's Overwrite
    # commit carries exactly these three): the removed files are in the tombstones, not the metrics
    assert set(ci["operationMetrics"]) == {"numFiles", "numOutputRows", "numOutputBytes"}
    assert ci["operationMetrics"]["numFiles"] == "1" and ci["operationMetrics"]["numOutputRows"] == "1"
    assert DeltaLog.for_table(path).snapshot().tombstones_table(["path"]).num_rows == 2
    read_back(path, tmp_path, second)


def test_error_and_ignore_modes(tmp_path):
    path = str(tmp_path / "t")
    data = pa.table({"id": [1]})
    assert tahoe.write_table(path, data, mode="error") == 0
    with pytest.raises(InvalidTableOperationError, match="already exists"):
        tahoe.write_table(path, data, mode="error")
    assert tahoe.write_table(path, pa.table({"other": ["x"]}), mode="ignore") == 0
    assert Table(path).to_arrow().num_rows == 1


def test_replace_where(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": [1, 2, 3, 4], "p": [1, 1, 2, 3]}), partition_by="p")
    v = tahoe.write_table(path, pa.table({"id": [10, 11], "p": [1, 2]}), mode="overwrite", predicate="p IN (1, 2)")
    assert v == 1
    assert sorted(Table(path).to_arrow().column("id").to_pylist()) == [4, 10, 11]
    ci = DeltaLog.for_table(path).history(1)[0].commit_info
    assert json.loads(ci["operationParameters"]["predicate"]) == ["p IN (1, 2)"]
    # rows outside the predicate are refused and nothing is written
    before = data_files(path)
    with pytest.raises(ConstraintViolationError, match="does not match"):
        tahoe.write_table(path, pa.table({"id": [5], "p": [3]}), mode="overwrite", predicate="p = 1")
    assert data_files(path) == before and Table(path).version == 1
    with pytest.raises(InvalidTableOperationError):
        tahoe.write_table(path, pa.table({"id": [5], "p": [1]}), predicate="p = 1")
    read_back(path, tmp_path, pa.table({"id": [4, 10, 11], "p": [3, 1, 2]}))
    # a predicate on a data column replaces the rows it matches (delta-spark >= 1.1; the other
    # rows of their files stay): id 11 goes, 12 comes
    tahoe.write_table(path, pa.table({"id": [12], "p": [1]}), mode="overwrite", predicate="id > 10")
    read_back(path, tmp_path, pa.table({"id": [4, 10, 12], "p": [3, 1, 1]}))


def test_merge_schema(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": [1], "s": ["a"]}))
    with pytest.raises(SchemaError, match="extra"):
        tahoe.write_table(path, pa.table({"id": [2], "extra": [1.5]}))
    assert Table(path).version == 0
    tahoe.write_table(path, pa.table({"id": [2], "extra": [1.5]}), schema_mode="merge")
    t = Table(path)
    assert t.schema.names == ["id", "s", "extra"]
    expected = pa.table({"id": [1, 2], "s": ["a", None], "extra": [None, 1.5]})
    read_back(path, tmp_path, expected)
    # overwrite the schema and the partitioning
    tahoe.write_table(path, pa.table({"k": ["x"], "n": [1]}), mode="overwrite", schema_mode="overwrite",
                      partition_by=["k"])
    t = Table(path)
    assert t.schema.names == ["k", "n"] and t.partition_columns == ["k"]
    with pytest.raises(InvalidTableOperationError, match="partition"):
        tahoe.write_table(path, pa.table({"k": ["x"], "n": [1]}), partition_by=["n"])


def test_idempotent_application_transactions(tmp_path):
    path = str(tmp_path / "t")
    data = pa.table({"id": [1, 2]})
    assert tahoe.write_table(path, data, txn_app_id="job", txn_version=1) == 0
    assert tahoe.write_table(path, data, txn_app_id="job", txn_version=1) == 0
    assert tahoe.write_table(path, data, txn_app_id="job", txn_version=0) == 0
    assert Table(path).to_arrow().num_rows == 2
    assert tahoe.write_table(path, data, txn_app_id="job", txn_version=2) == 1
    assert DeltaLog.for_table(path).snapshot().txn_version("job") == 2
    assert Table(path).to_arrow().num_rows == 4


def test_user_metadata_and_table_name(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": [1]}), name="events", description="all events",
                      user_metadata="backfill", properties={"delta.appendOnly": "true"})
    snap = DeltaLog.for_table(path).snapshot()
    assert snap.metadata.name == "events" and snap.metadata.description == "all events"
    ci = DeltaLog.for_table(path).history(1)[0].commit_info
    # a first save to a new path is a WRITE, as delta-spark logs it (the conformance tables' version-0
    # commits: {"operation":"WRITE","operationParameters":{"mode":"Append","partitionBy":"[]"}})
    assert ci["operation"] == "WRITE" and ci["userMetadata"] == "backfill"
    assert ci["operationParameters"] == {"mode": "Append", "partitionBy": "[]"} and "readVersion" not in ci
    assert ci["isBlindAppend"] is True
    assert ci["operationMetrics"] == {"numFiles": "1", "numOutputRows": "1",
                                      "numOutputBytes": ci["operationMetrics"]["numOutputBytes"]}
    with pytest.raises(InvalidTableOperationError, match="DELTA_CANNOT_MODIFY_APPEND_ONLY.*only allow appends"):
        tahoe.write_table(path, pa.table({"id": [2]}), mode="overwrite")
    assert Table(path).version == 0


# --- constraints -------------------------------------------------------------------------------

def _constrained_table(path):
    from tahoe.txn import create_table

    schema = StructType([
        StructField("id", LONG, nullable=False),
        StructField("s", STRING),
        StructField("st", StructType([StructField("x", INTEGER, nullable=False)])),
        StructField("g", LONG, metadata={"delta.generationExpression": "id * 2"}),
    ])
    create_table(path, schema, properties={"delta.constraints.positive": "id > 0 AND (s IS NULL OR s <> 'bad')"})


def test_constraint_violations_commit_nothing(tmp_path):
    path = str(tmp_path / "t")
    _constrained_table(path)
    ok = pa.table({"id": [1, 2], "s": ["a", None], "st": pa.array([{"x": 1}, {"x": 2}], pa.struct([("x", pa.int32())]))})
    assert tahoe.write_table(path, ok) == 1
    assert Table(path).to_arrow().sort_by("id").column("g").to_pylist() == [2, 4]   # generated
    cases = [
        (pa.table({"id": [3, None]}), "NOT NULL constraint violated for column: id"),
        (pa.table({"id": [3], "st": pa.array([{"x": None}], pa.struct([("x", pa.int32())]))}), "st.x"),
        (pa.table({"id": [-1]}), "CHECK constraint positive"),
        (pa.table({"id": [5], "s": ["bad"]}), "CHECK constraint positive"),
        (pa.table({"id": [5], "g": [11]}), "Generated Column"),
    ]
    for data, message in cases:
        with pytest.raises(ConstraintViolationError, match=message):
            tahoe.write_table(path, data)
    assert Table(path).version == 1 and len(data_files(path)) == 1
    tahoe.write_table(path, pa.table({"id": [5], "g": [10], "st": pa.array([{"x": 5}], pa.struct([("x", pa.int32())]))}))
    assert Table(path).to_arrow().num_rows == 3
    # a required field inside a null struct is not a violation (the file is written all-nullable)
    assert tahoe.write_table(path, pa.table({"id": [6], "st": pa.array([None], pa.struct([("x", pa.int32())]))})) == 3
    f = [x for x in Table(path).files(["path", "stats"]).to_pylist() if json.loads(x["stats"])["minValues"]["id"] == 6]
    assert json.loads(f[0]["stats"])["nullCount"]["st"] == {"x": 1}


def test_unsupported_check_expression_is_refused_not_skipped(tmp_path):
    from tahoe.txn import create_table

    path = str(tmp_path / "t")
    # soundex() is a Spark function the Arrow evaluator does not implement (length() now is one)
    create_table(path, StructType([StructField("s", STRING)]), properties={"delta.constraints.snd": "soundex(s) <> ''"})
    with pytest.raises(UnsupportedFeatureError, match="(?i)soundex"):
        tahoe.write_table(path, pa.table({"s": ["abcd"]}))
    assert Table(path).version == 0


def test_check_constraint_with_functions_is_enforced(tmp_path):
    from tahoe.txn import create_table

    path = str(tmp_path / "t")
    create_table(path, StructType([StructField("s", STRING)]), properties={"delta.constraints.len": "length(s) > 2"})
    assert tahoe.write_table(path, pa.table({"s": ["abcd"]})) == 1
    with pytest.raises(ConstraintViolationError, match="CHECK constraint len .*\n - s : ab"):
        tahoe.write_table(path, pa.table({"s": ["xyz", "ab"]}))
    assert Table(path).version == 1


def test_arrow_evaluator_semantics():
    from tahoe.expressions import Scope, evaluate, parse

    t = pa.table({"x": pa.array([1, None, 5], pa.int64()), "d": pa.array([dt.date(2020, 1, 1)] * 3),
                  "s": ["ab", "cd", None], "st": pa.array([{"y": 1}] * 3, pa.struct([("y", pa.int8())]))})
    ev = lambda sql: evaluate(parse(sql), Scope.of(t)).to_pylist()  # noqa: E731
    assert ev("x > 2") == [False, None, True]
    assert ev("x IN (1, 2)") == [True, None, False]
    assert ev("x IN (2, NULL)") == [None, None, None]
    assert ev("x BETWEEN 0 AND 4 OR x IS NULL") == [True, True, False]
    assert ev("d >= '2020-01-01' AND st.y = 1") == [True, True, True]
    assert ev("s LIKE 'a%'") == [True, False, None]
    assert ev("NOT (x % 2 = 1)") == [False, None, False]
    assert ev("x * 2 + 1 < 4 / 2 + 2") == [True, None, False]
    assert ev("`X` <> 1") == [False, None, True]


# --- the data-file writer ----------------------------------------------------------------------

def test_write_data_files_splits_and_indexes(tmp_path):
    root = str(tmp_path / "t")
    schema = StructType([StructField("a", LONG), StructField("b", STRING), StructField("c", LONG), StructField("p", STRING)])
    data = conform_to_schema(pa.table({"a": list(range(10)), "b": ["x"] * 10, "c": list(range(10)),
                                       "p": ["u", "v"] * 5}), schema)
    store = DeltaLog.for_table(root).store
    adds = write_data_files(store, root, data, schema, ["p"], "none",
                            {"delta.dataSkippingNumIndexedCols": "1"}, target_file_rows=2)
    assert len(adds) == 6 and sorted(a.partition_values["p"] for a in adds) == ["u"] * 3 + ["v"] * 3
    for a in adds:
        stats = json.loads(a.stats)
        assert set(stats["nullCount"]) == {"a"} and a.data_change and a.size > 0
        assert os.path.getsize(resolve_data_path(root, a.path)) == a.size
    adds = write_data_files(store, root, data, schema, ["p"], "none",
                            {"delta.dataSkippingStatsColumns": "c,b"})
    assert set(json.loads(adds[0].stats)["minValues"]) == {"b", "c"}
    assert write_data_files(store, root, data.slice(0, 0), schema, ["p"], "none", {}) == []


def test_commits_trigger_checkpoints_readable_by_delta_rs(tmp_path):
    path = str(tmp_path / "t")
    for i in range(12):
        tahoe.write_table(path, pa.table({"id": [i], "p": [str(i % 3)]}), partition_by="p")
    log_dir = Path(path) / "_delta_log"
    assert (log_dir / "00000000000000000010.checkpoint.parquet").exists()
    assert json.loads((log_dir / "_last_checkpoint").read_text())["version"] == 10
    snap = DeltaLog.for_table(path).snapshot()
    assert snap.segment.checkpoint_version == 10 and snap.num_files == 12
    read_back(path, tmp_path, pa.table({"id": list(range(12)), "p": [str(i % 3) for i in range(12)]}))


def test_write_and_checkpoint_on_s3(tmp_path):
    """The writer and the checkpoint writer through the S3 store (moto, put-if-absent)."""
    import uuid as _uuid

    import boto3

    from tahoe.log.checkpoints import write_checkpoint
    from tests.fixtures.moto import TEST_CREDENTIALS, start_moto_server

    url, stop = start_moto_server()
    try:
        bucket = f"tahoe-write-{_uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=url, aws_access_key_id="testing", aws_secret_access_key="testing",
                     region_name="us-east-1").create_bucket(Bucket=bucket)
        opts = {**TEST_CREDENTIALS, "endpoint_url": url, "allow_http": "true"}
        uri = f"s3://{bucket}/tables/t"
        tahoe.write_table(uri, pa.table({"id": [1, 2], "p": ["a b", None]}), partition_by="p", storage_options=opts)
        tahoe.write_table(uri, pa.table({"id": [3], "p": ["a b"]}), storage_options=opts)
        log = DeltaLog.for_table(uri, opts)
        lc = write_checkpoint(log)
        assert lc.version == 1 and lc.num_of_add_files == 3
        assert write_checkpoint(log).size_in_bytes == lc.size_in_bytes   # exists: kept
        t = Table(uri, storage_options=opts)
        assert t.snapshot.segment.checkpoint_version == 1
        assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 2, 3]
    finally:
        stop()


# --- dynamic partition overwrite ---------------------------------------------------------------

_SPECIAL = "x/y=z %é"


def _dpo_base(path: str) -> None:
    tahoe.write_table(path, pa.table({"id": [1, 2, 3, 4, 5], "p": ["a", "b", None, _SPECIAL, "a"]}),
                      partition_by="p")


def _files_by_partition(path: str) -> dict:
    files = Table(path).files()
    out: dict = {}
    for path_, pv in zip(files.column("path").to_pylist(), files.column("partitionValues").to_pylist()):
        out.setdefault(dict(pv)["p"], set()).add(path_)
    return out


def test_dynamic_partition_overwrite(tmp_path):
    """Only the partitions the data writes to are replaced (a null partition and one with special
    characters included); the commit removes exactly their files; delta-rs reads the result."""
    from tests.txn._helpers import commit_actions, commit_info

    path = str(tmp_path / "t")
    _dpo_base(path)
    before = _files_by_partition(path)
    v = tahoe.write_table(path, pa.table({"id": [10, 30, 40], "p": ["a", None, _SPECIAL]}), mode="overwrite",
                          partition_overwrite_mode="DYNAMIC")
    expected = pa.table({"id": [2, 10, 30, 40], "p": ["b", "a", None, _SPECIAL]})
    read_back(path, tmp_path, expected)
    removed = {a["remove"]["path"] for a in commit_actions(path, v) if "remove" in a}
    assert removed == before["a"] | before[None] | before[_SPECIAL]
    assert _files_by_partition(path)["b"] == before["b"]
    ci = commit_info(path, v)
    assert ci["operationParameters"] == {"mode": "Overwrite", "partitionBy": '["p"]',
                                         "isDynamicPartitionOverwrite": "true"}
    assert "numRemovedFiles" not in ci["operationMetrics"] and not ci["isBlindAppend"]   # WRITE metrics
    # no rows: nothing replaced; 'static' (and the default) replaces everything
    tahoe.write_table(path, pa.table({"id": pa.array([], pa.int64()), "p": pa.array([], pa.string())}),
                      mode="overwrite", partition_overwrite_mode="dynamic")
    assert Table(path).to_arrow().num_rows == 4
    tahoe.write_table(path, pa.table({"id": [7], "p": ["b"]}), mode="overwrite", partition_overwrite_mode="static")
    assert Table(path).to_arrow().to_pylist() == [{"id": 7, "p": "b"}]


def test_dynamic_partition_overwrite_rules_like_delta_spark(tmp_path):
    path = str(tmp_path / "t")
    _dpo_base(path)
    v = Table(path).version
    one = pa.table({"id": [9], "p": ["a"]})
    with pytest.raises(InvalidTableOperationError, match="replaceWhere"):
        tahoe.write_table(path, one, mode="overwrite", predicate="p = 'a'", partition_overwrite_mode="dynamic")
    with pytest.raises(InvalidTableOperationError, match="overwriteSchema"):
        tahoe.write_table(path, one, mode="overwrite", schema_mode="overwrite", partition_overwrite_mode="dynamic")
    with pytest.raises(ValueError, match="'static' or 'dynamic'"):
        tahoe.write_table(path, one, mode="overwrite", partition_overwrite_mode="sometimes")
    assert Table(path).version == v
    # append: the mode has no effect
    tahoe.write_table(path, one, mode="append", partition_overwrite_mode="dynamic")
    assert Table(path).to_arrow().num_rows == 6
    # an unpartitioned table: ignored, the whole table is overwritten
    flat = str(tmp_path / "flat")
    tahoe.write_table(flat, pa.table({"id": [1, 2], "p": ["a", "b"]}))
    tahoe.write_table(flat, one, mode="overwrite", partition_overwrite_mode="dynamic")
    assert Table(flat).to_arrow().to_pylist() == [{"id": 9, "p": "a"}]


def _with_concurrent_commit(monkeypatch, concurrent):
    """Run `concurrent()` once, after the writer read the table and wrote its files, before it
    commits."""
    import tahoe.write.writer as writer_mod

    original = writer_mod.write_data_files
    state = {"done": False}

    def hooked(*a, **kw):
        out = original(*a, **kw)
        if not state["done"]:
            state["done"] = True
            concurrent()
        return out

    monkeypatch.setattr(writer_mod, "write_data_files", hooked)


@pytest.mark.parametrize("case", ["serializable_blind_append", "reading_writer", "delete"])
def test_dynamic_overwrite_conflicts_with_writers_into_replaced_partitions(tmp_path, monkeypatch, case):
    from tahoe.errors import ConcurrentAppendException, ConcurrentDeleteDeleteException
    from tahoe.txn import Transaction
    from tests.txn._helpers import fake_add

    path = str(tmp_path / "t")
    _dpo_base(path)
    if case == "serializable_blind_append":
        Table(path).set_properties({"delta.isolationLevel": "Serializable"})
    files_a = sorted(_files_by_partition(path)["a"])

    def concurrent():
        if case == "serializable_blind_append":
            tahoe.write_table(path, pa.table({"id": [99], "p": ["a"]}))
        elif case == "reading_writer":   # e.g. an UPDATE of partition a: read it, wrote into it
            txn = Transaction(DeltaLog.for_table(path), "UPDATE")
            txn.read_predicate(lambda pv: pv.get("p") == "a")
            txn.add_files([fake_add("p=a/new.parquet", "a")])
            txn.commit()
        else:
            txn = Transaction(DeltaLog.for_table(path), "DELETE")
            txn.remove_files([a for a in Table(path).snapshot.add_files() if a.path == files_a[0]])
            txn.commit()

    _with_concurrent_commit(monkeypatch, concurrent)
    v = Table(path).version
    before = {os.path.normpath(f) for f in data_files(path)}
    expected = ConcurrentDeleteDeleteException if case == "delete" else ConcurrentAppendException
    with pytest.raises(expected, match="p=a"):
        tahoe.write_table(path, pa.table({"id": [10], "p": ["a"]}), mode="overwrite",
                          partition_overwrite_mode="dynamic")
    assert Table(path).version == v + 1             # the concurrent commit only
    live = {os.path.normpath(resolve_data_path(path, f)) for f in Table(path).files().column("path").to_pylist()}
    assert {os.path.normpath(f) for f in data_files(path)} - before <= live   # the failed write's files are gone


@pytest.mark.parametrize("isolation", [None, "Serializable"])
def test_dynamic_overwrite_does_not_conflict_with_appends_into_other_partitions(tmp_path, monkeypatch, isolation):
    path = str(tmp_path / "t")
    _dpo_base(path)
    if isolation:
        Table(path).set_properties({"delta.isolationLevel": isolation})
    _with_concurrent_commit(monkeypatch, lambda: tahoe.write_table(path, pa.table({"id": [77], "p": ["b"]})))
    tahoe.write_table(path, pa.table({"id": [10], "p": ["a"]}), mode="overwrite", partition_overwrite_mode="dynamic")
    rows = sorted((r["id"], r["p"]) for r in Table(path).to_arrow().to_pylist())
    assert rows == [(2, "b"), (3, None), (4, _SPECIAL), (10, "a"), (77, "b")]


def test_dynamic_overwrite_and_a_blind_append_under_write_serializable(tmp_path, monkeypatch):
    """WriteSerializable (the default): a concurrent blind append does not conflict, as in
    delta-spark — the overwrite commits after it and the appended row stays (as if appended
    after the overwrite)."""
    path = str(tmp_path / "t")
    _dpo_base(path)
    _with_concurrent_commit(monkeypatch, lambda: tahoe.write_table(path, pa.table({"id": [99], "p": ["a"]})))
    tahoe.write_table(path, pa.table({"id": [10], "p": ["a"]}), mode="overwrite", partition_overwrite_mode="dynamic")
    assert sorted(r["id"] for r in Table(path).to_arrow().to_pylist() if r["p"] == "a") == [10, 99]
