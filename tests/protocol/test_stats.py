"""Per-file statistics: parsing and typing the stats JSON, and computing it for new files — checked
against the stats delta-spark wrote for the conformance tables' own data files."""

from __future__ import annotations

import json
import random
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tahoe.errors import CorruptLogError, SchemaError
from tahoe.protocol import column_mapping as cm
from tahoe.protocol.schema import (
    BINARY, BOOLEAN, DATE, DOUBLE, FLOAT, INTEGER, LONG, STRING, TIMESTAMP, TIMESTAMP_NTZ,
    ArrayType, DataType, DecimalType, MapType, StructField, StructType,
)
from tahoe.protocol.stats import (
    FileStats, JsonNumber, compute_stats, get_nested, parse_stats, stats_columns,
    truncate_max_string, truncate_min_string, typed_value,
)
from tests.conftest import GOLDEN, conformance_params

UTC = timezone.utc


# --- parsing -----------------------------------------------------------------------------------

def test_parse_stats_basic():
    assert parse_stats(None) is None and parse_stats("") is None
    s = parse_stats('{"numRecords":3,"minValues":{"a":1,"s":{"b":"x"}},"maxValues":{"a":9},'
                    '"nullCount":{"a":0,"s":{"b":3}},"tightBounds":true}')
    assert s == FileStats(3, {"a": 1, "s": {"b": "x"}}, {"a": 9}, {"a": 0, "s": {"b": 3}}, True)
    assert s.nulls(["s", "b"]) == 3 and s.nulls("zz") is None
    assert s.min_value("a", LONG) == 1 and s.max_value("a", LONG) == 9
    assert parse_stats('{"numRecords":5}') == FileStats(5, {}, {}, {}, None)
    assert parse_stats('{}').num_records is None


@pytest.mark.parametrize("bad", ["{not json", "[1,2]", '"x"', '{"numRecords":"x"}',
                                 '{"numRecords":-1}', '{"minValues":[1]}', '{"tightBounds":"yes"}'])
def test_parse_stats_malformed(bad):
    with pytest.raises(CorruptLogError):
        parse_stats(bad)


def test_decimal_stats_stay_exact():
    s = parse_stats('{"minValues":{"d":-9999999999.9999999999,"e":-3.1661E-8,"f":1.00}}')
    d = s.min_values["d"]
    assert isinstance(d, JsonNumber) and isinstance(d, float) and d.text == "-9999999999.9999999999"
    assert typed_value(d, DecimalType(20, 10)) == Decimal("-9999999999.9999999999")
    assert str(typed_value(s.min_values["e"], DecimalType(25, 12))) == "-3.1661E-8"
    assert typed_value(s.min_values["e"], DecimalType(25, 12)) == Decimal("-0.000000031661")
    assert str(typed_value(s.min_values["f"], DecimalType(5, 2))) == "1.00"
    assert typed_value(3, DecimalType(5, 2)) == Decimal("3.00")
    assert json.loads(json.dumps({"x": d})) == {"x": float(d)}


def test_typed_value_per_type():
    assert typed_value(None, LONG) is None
    assert typed_value(5, INTEGER) == 5 and typed_value(5.0, LONG) == 5
    assert typed_value(0.5, DOUBLE) == 0.5 and typed_value(1, FLOAT) == 1.0
    assert typed_value("NaN", DOUBLE) != typed_value("NaN", DOUBLE)
    assert typed_value("Infinity", DOUBLE) == float("inf") and typed_value("-Infinity", FLOAT) == float("-inf")
    assert typed_value("abc", STRING) == "abc"
    assert typed_value("2021-01-01", DATE) == date(2021, 1, 1)
    assert typed_value("2021-01-01T00:00:00.000Z", TIMESTAMP) == datetime(2021, 1, 1, tzinfo=UTC)
    assert typed_value("2000-01-01T00:00:00.000-08:00", TIMESTAMP) == datetime(2000, 1, 1, 8, tzinfo=UTC)
    assert typed_value("2021-01-01T00:00:00.123+00:00", TIMESTAMP) == datetime(2021, 1, 1, 0, 0, 0, 123000, tzinfo=UTC)
    assert typed_value("1850-01-01T01:01:01.000+00:53:28", TIMESTAMP) == datetime(1850, 1, 1, 0, 7, 33, tzinfo=UTC)
    assert typed_value("2021-11-18T02:30:00.123", TIMESTAMP_NTZ) == datetime(2021, 11, 18, 2, 30, 0, 123000)
    st = StructType([StructField("a", LONG), StructField("b", DATE)])
    assert typed_value({"a": 1, "b": "2020-02-02"}, st) == {"a": 1, "b": date(2020, 2, 2)}
    with pytest.raises(CorruptLogError):
        typed_value("x", LONG)
    with pytest.raises(CorruptLogError):
        typed_value("not a date", DATE)
    with pytest.raises(CorruptLogError):
        typed_value(True, INTEGER)


def test_get_nested():
    d = {"a": {"b": {"c": 1}}, "x.y": 2}
    assert get_nested(d, ["a", "b", "c"]) == 1
    assert get_nested(d, "x.y") == 2  # a string is one name
    assert get_nested(d, ["a", "q"]) is None and get_nested(d, ["a", "b", "c", "d"]) is None
    assert get_nested(None, "a") is None


# --- against delta-spark's own stats -----------------------------------------------------------

def _tables_with_stats():
    out, ids = [], []
    for log_dir in sorted(GOLDEN.glob("*/delta/_delta_log")):
        meta = None
        for f in sorted(log_dir.glob("*.json")):
            for line in f.read_text().splitlines():
                if not line.strip():
                    continue
                d = json.loads(line)
                if "metaData" in d and d["metaData"].get("schemaString"):
                    meta = d["metaData"]
                add = d.get("add")
                if add and add.get("stats") and meta is not None:
                    data = log_dir.parent / unquote(add["path"])
                    if data.is_file():
                        out.append((meta, add, data))
                        ids.append(f"{log_dir.parent.parent.name}:{add['path'][-20:]}")
    return conformance_params(out, ids, n=3)


CASES = _tables_with_stats()


def _compare(mine, theirs, dt: DataType, where: str, side: str):
    """Semantic equality of one stats subtree; timestamp maxima may be rounded up (< 1 ms)."""
    if isinstance(dt, StructType):
        assert isinstance(mine, dict) and isinstance(theirs, dict), where
        assert set(mine) == set(theirs), (where, set(mine) ^ set(theirs))
        for k in mine:
            f = next(x for x in dt.fields if cm.physical_name(x) == k or x.name == k)
            _compare(mine[k], theirs[k], f.type, f"{where}.{k}", side)
        return
    if side == "nullCount":
        assert mine == theirs, where
        return
    a, b = typed_value(mine, dt), typed_value(theirs, dt)
    if dt in (TIMESTAMP, TIMESTAMP_NTZ) and side == "maxValues":
        assert b <= a <= b + timedelta(milliseconds=1), (where, a, b)
    elif isinstance(a, float) and a != a:
        assert b != b, where
    else:
        assert a == b, (where, mine, theirs)


@pytest.mark.conformance
def test_conformance_has_stats_cases():
    assert len(CASES) > 50


@pytest.mark.parametrize("meta,add,data", CASES)
def test_compute_stats_matches_delta_spark(meta, add, data):
    schema = StructType.from_json(meta["schemaString"])
    conf = meta.get("configuration") or {}
    mode = cm.mode(conf)
    theirs = json.loads(add["stats"], parse_float=JsonNumber)
    mine_text = compute_stats(pq.ParquetFile(data).read(), schema,
                              int(conf.get("delta.dataSkippingNumIndexedCols", 32)),
                              column_mapping_mode=mode, partition_columns=meta["partitionColumns"],
                              tight_bounds=theirs.get("tightBounds"))
    mine = json.loads(mine_text, parse_float=JsonNumber)
    assert list(mine) == list(theirs)  # same keys, same order
    assert mine["numRecords"] == theirs["numRecords"]
    phys = cm.to_physical_schema(
        StructType([f for f in schema if f.name not in meta["partitionColumns"]]), mode)
    for side in ("minValues", "maxValues", "nullCount"):
        if side in theirs:
            _compare(mine[side], theirs[side], phys, side, side)


@pytest.mark.conformance
def test_basic_stats_all_types_exactly():
    table = "data-skipping-basic-stats-all-types"
    log = (GOLDEN / table / "delta" / "_delta_log" / "00000000000000000000.json").read_text().splitlines()
    meta = next(json.loads(l)["metaData"] for l in log if '"metaData"' in l)
    schema = StructType.from_json(meta["schemaString"])
    adds = [json.loads(l)["add"] for l in log if '"add"' in l]
    assert adds
    for add in adds:
        t = pq.ParquetFile(GOLDEN / table / "delta" / add["path"]).read()
        mine = json.loads(compute_stats(t, schema))
        theirs = json.loads(add["stats"])
        # identical except the time zone the timestamp is rendered in (theirs: the writer's, -08:00)
        assert mine["maxValues"]["as_timestamp"] == "2000-01-01T08:00:00.000Z"
        assert theirs["maxValues"]["as_timestamp"] == "2000-01-01T00:00:00.000-08:00"
        for side in ("minValues", "maxValues"):
            mine[side].pop("as_timestamp"), theirs[side].pop("as_timestamp")
        assert mine == theirs


# --- computing: behaviour ----------------------------------------------------------------------

def test_nested_structs_and_null_propagation():
    schema = StructType([
        StructField("id", LONG),
        StructField("s", StructType([StructField("a", INTEGER), StructField("t", StructType([StructField("b", STRING)]))])),
        StructField("arr", ArrayType(INTEGER)),
        StructField("m", MapType(STRING, LONG)),
        StructField("flag", BOOLEAN),
        StructField("bin", BINARY),
    ])
    t = pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "s": pa.array([{"a": 5, "t": {"b": "x"}}, None, {"a": None, "t": None}],
                      pa.struct([("a", pa.int32()), ("t", pa.struct([("b", pa.string())]))])),
        "arr": pa.array([[1], None, []], pa.list_(pa.int32())),
        "m": pa.array([None, None, [("k", 1)]], pa.map_(pa.string(), pa.int64())),
        "flag": pa.array([True, None, False]),
        "bin": pa.array([b"a", b"b", None]),
    })
    st = json.loads(compute_stats(t, schema))
    assert st == {
        "numRecords": 3,
        "minValues": {"id": 1, "s": {"a": 5, "t": {"b": "x"}}},
        "maxValues": {"id": 3, "s": {"a": 5, "t": {"b": "x"}}},
        "nullCount": {"id": 0, "s": {"a": 2, "t": {"b": 2}}, "arr": 1, "m": 2, "flag": 1, "bin": 1},
    }


def test_all_null_and_empty_and_missing_columns():
    schema = StructType([StructField("a", LONG), StructField("s", StructType([StructField("b", STRING)])),
                         StructField("gone", DATE)])
    t = pa.table({"a": pa.array([None, None], pa.int64()),
                  "s": pa.array([None, {"b": None}], pa.struct([("b", pa.string())]))})
    st = json.loads(compute_stats(t, schema))
    assert st == {"numRecords": 2, "minValues": {"s": {}}, "maxValues": {"s": {}},
                  "nullCount": {"a": 2, "s": {"b": 2}, "gone": 2}}
    empty = json.loads(compute_stats(t.slice(0, 0), schema))
    assert empty["numRecords"] == 0 and empty["nullCount"] == {"a": 0, "s": {"b": 0}, "gone": 0}
    only_bool = json.loads(compute_stats(pa.table({"f": [True]}), StructType([StructField("f", BOOLEAN)])))
    assert only_bool == {"numRecords": 1, "nullCount": {"f": 0}}


def test_num_indexed_cols_counts_leaves():
    schema = StructType([
        StructField("a", LONG),
        StructField("s", StructType([StructField("x", LONG), StructField("y", LONG)])),
        StructField("arr", ArrayType(LONG)),
        StructField("b", LONG),
    ])
    cols = lambda n: json.loads(compute_stats(_longs_table(schema), schema, n))["nullCount"]
    assert cols(2) == {"a": 0, "s": {"x": 0}}
    assert cols(3) == {"a": 0, "s": {"x": 0, "y": 0}}
    assert cols(4) == {"a": 0, "s": {"x": 0, "y": 0}, "arr": 0}
    assert cols(-1) == cols(32) == {"a": 0, "s": {"x": 0, "y": 0}, "arr": 0, "b": 0}
    assert json.loads(compute_stats(_longs_table(schema), schema, 0)) == {"numRecords": 1}
    # partition columns are not data columns: they neither get stats nor use up the budget
    assert json.loads(compute_stats(_longs_table(schema), schema, 1, partition_columns=["A"]))["nullCount"] == \
        {"s": {"x": 0}}


def _longs_table(schema):
    return pa.table({
        "a": pa.array([1], pa.int64()),
        "s": pa.array([{"x": 1, "y": 2}], pa.struct([("x", pa.int64()), ("y", pa.int64())])),
        "arr": pa.array([[1]], pa.list_(pa.int64())),
        "b": pa.array([4], pa.int64()),
    })


def test_indexed_columns_by_name():
    schema = StructType([
        StructField("a", LONG),
        StructField("s", StructType([StructField("x", LONG), StructField("y", LONG)])),
        StructField("arr", ArrayType(LONG)),
        StructField("b", LONG),
    ])
    t = _longs_table(schema)
    nc = lambda cols: json.loads(compute_stats(t, schema, 1, indexed_columns=cols)).get("nullCount")
    assert nc(["B", "s.y"]) == {"s": {"y": 0}, "b": 0}
    assert nc(["s"]) == {"s": {"x": 0, "y": 0}}
    assert nc(["`s`.`x`", "nope"]) == {"s": {"x": 0}}
    assert nc([]) is None
    assert stats_columns(schema, 32, ["a"], partition_columns=["a"]).names == []
    with pytest.raises(SchemaError):
        stats_columns(schema, 32, ["a..b"])


def test_column_mapping_keys_and_lookup():
    schema = StructType([
        StructField("id", LONG, True, {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-1"}),
        StructField("s", StructType([StructField("v", STRING, True, {"delta.columnMapping.id": 3,
                                                                       "delta.columnMapping.physicalName": "col-3"})]),
                    True, {"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "col-2"}),
    ])
    physical = pa.table({"col-1": pa.array([7], pa.int64()),
                         "col-2": pa.array([{"col-3": "q"}], pa.struct([("col-3", pa.string())]))})
    logical = pa.table({"id": pa.array([7], pa.int64()),
                        "s": pa.array([{"v": "q"}], pa.struct([("v", pa.string())]))})
    want = {"numRecords": 1, "minValues": {"col-1": 7, "col-2": {"col-3": "q"}},
            "maxValues": {"col-1": 7, "col-2": {"col-3": "q"}}, "nullCount": {"col-1": 0, "col-2": {"col-3": 0}}}
    assert json.loads(compute_stats(physical, schema, column_mapping_mode="name")) == want
    assert json.loads(compute_stats(logical, schema, column_mapping_mode="id")) == want
    assert "id" in json.loads(compute_stats(logical, schema))["minValues"]


def test_floats_nan_infinity_and_float32_text():
    schema = StructType([StructField("f", FLOAT), StructField("d", DOUBLE), StructField("n", DOUBLE),
                         StructField("i", DOUBLE)])
    t = pa.table({
        "f": pa.array([0.1, 46.566, None], pa.float32()),
        "d": pa.array([1.5, float("nan"), -2.0]),
        "n": pa.array([float("nan"), None, float("nan")]),
        "i": pa.array([float("-inf"), 1.0, float("inf")]),
    })
    text = compute_stats(t, schema)
    assert '"f":0.1' in text and '"f":46.566' in text  # shortest float32 text, like Spark
    st = json.loads(text)
    assert st["minValues"] == {"f": 0.1, "d": -2.0, "n": "NaN", "i": "-Infinity"}
    assert st["maxValues"] == {"f": 46.566, "d": "NaN", "n": "NaN", "i": "Infinity"}  # NaN sorts last
    assert st["nullCount"] == {"f": 1, "d": 0, "n": 1, "i": 0}


def test_timestamps_dates_decimals():
    schema = StructType([StructField("ts", TIMESTAMP), StructField("ntz", TIMESTAMP_NTZ),
                         StructField("ns", TIMESTAMP), StructField("d", DATE),
                         StructField("dec", DecimalType(25, 12)), StructField("big", DecimalType(38, 0))])
    t = pa.table({
        "ts": pa.array([datetime(2021, 1, 1, 0, 0, 0, 123456, tzinfo=UTC), datetime(1969, 12, 31, 23, 59, 59, 999500, tzinfo=UTC)],
                       pa.timestamp("us", tz="UTC")),
        "ntz": pa.array([datetime(2021, 11, 18, 2, 30, 0, 123000), datetime(2021, 11, 18, 2, 30, 0, 123001)],
                        pa.timestamp("us")),
        "ns": pa.array([1_000_000_001, 5], pa.timestamp("ns")),  # INT96-style: naive ns read as UTC
        "d": pa.array([date(2000, 1, 1), date(1969, 1, 1)]),
        "dec": pa.array([Decimal("-0.000000031661"), Decimal("5.000000000000")], pa.decimal128(25, 12)),
        "big": pa.array([Decimal("99999999999999999999999999999999999999"), Decimal("-1")], pa.decimal128(38, 0)),
    })
    text = compute_stats(t, schema)
    st = json.loads(text)
    assert st["minValues"]["ts"] == "1969-12-31T23:59:59.999Z"
    assert st["maxValues"]["ts"] == "2021-01-01T00:00:00.124Z"  # rounded up: still an upper bound
    assert st["minValues"]["ntz"] == "2021-11-18T02:30:00.123"
    assert st["maxValues"]["ntz"] == "2021-11-18T02:30:00.124"
    assert st["minValues"]["ns"] == "1970-01-01T00:00:00.000Z"
    assert st["maxValues"]["ns"] == "1970-01-01T00:00:01.001Z"
    assert st["minValues"]["d"] == "1969-01-01" and st["maxValues"]["d"] == "2000-01-01"
    assert '"dec":-3.1661E-8' in text and '"dec":5.000000000000' in text  # Java BigDecimal.toString form
    assert '"big":99999999999999999999999999999999999999' in text
    parsed = parse_stats(text)
    assert parsed.max_value("big", DecimalType(38, 0)) == Decimal("99999999999999999999999999999999999999")
    assert parsed.min_value("dec", DecimalType(25, 12)) == Decimal("-0.000000031661")


def test_strings_truncated_and_dictionary_input():
    schema = StructType([StructField("s", STRING)])
    long_a = "a" * 40
    t = pa.table({"s": pa.array([long_a, "b" * 10 + "é" * 30, None]).dictionary_encode()})
    st = json.loads(compute_stats(t, schema))
    assert st["minValues"]["s"] == "a" * 32
    assert st["maxValues"]["s"] == "b" * 10 + "é" * 22 + "\U0010ffff"
    assert st["nullCount"]["s"] == 1
    st = json.loads(compute_stats(t, schema, string_prefix_length=100))
    assert st["maxValues"]["s"] == "b" * 10 + "é" * 30
    assert json.loads(compute_stats(pa.table({"s": ["x" * 40]}), schema))["maxValues"]["s"] == "x" * 32 + "\x7f"


def test_truncate_string_rules():
    assert truncate_min_string(None, 3) is None
    assert truncate_min_string("abcdef", 3) == "abc"
    assert truncate_min_string("ab\U0001f600cd", 3) == "ab\U0001f600"  # never splits a surrogate pair
    assert truncate_max_string("abc", 3) == "abc"
    assert truncate_max_string("abcd", 3) == "abc\x7f"
    assert truncate_max_string("abc\x7fz", 3) == "abc\U0010ffff"
    assert truncate_max_string("abcé", 3) == "abc\U0010ffff"
    assert truncate_max_string("abc\U0010ffffz", 3) == "abc\U0010ffff\x7f"
    assert truncate_max_string("abc" + "\U0010ffff" * 2 + "z", 3) is None  # no bound within 2x prefix
    assert truncate_max_string("abcd", 0) is None


def test_truncated_bounds_hold_in_utf8_order():
    rnd = random.Random(3)
    alphabet = ["a", "z", "\x7e", "\x7f", "\x80", "é", "\uffff", "\U0001f600", "\U0010ffff", "\U0010fffe"]
    for _ in range(3000):
        s = "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(0, 12)))
        n = rnd.randrange(0, 8)
        lo, hi = truncate_min_string(s, n), truncate_max_string(s, n)
        if lo is not None:
            assert lo.encode() <= s.encode()
        if hi is not None:
            assert hi.encode() >= s.encode(), (s, n, hi)


def test_tight_bounds_and_record_batches():
    schema = StructType([StructField("x", LONG)])
    batch = pa.record_batch({"x": pa.array([3, 1], pa.int64())})
    assert compute_stats(batch, schema, tight_bounds=True) == \
        '{"numRecords":2,"minValues":{"x":1},"maxValues":{"x":3},"nullCount":{"x":0},"tightBounds":true}'
    assert "tightBounds" not in compute_stats(batch, schema)
