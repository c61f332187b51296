"""The filters Spark pushes into tahoe's Python data sources, through the one expression engine:
`tahoe.spark.skipping.pushed_filter` (pyspark's `EqualTo`, `In`, `Not`, ... → a tahoe.expressions
tree) for the `delta` source's file skipping, and `tahoe.spark.sharing.filter_to_json` (that tree
→ the Delta Sharing JSON predicate) for the `deltaSharing` source's hints.

No Spark session: pyspark's filter classes are plain Python values, built here as Spark's planner
builds them (timestamps as aware datetimes, timestamp_ntz as naive ones). Oracles: the JSON trees
of the protocol's "JSON predicates for Filtering", written out by hand; the rows of a hand-made
table (which files may hold matching rows)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql.datasource import (
    EqualNullSafe, EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNotNull, IsNull, LessThan, LessThanOrEqual, Not,
    StringStartsWith,
)

from tahoe.spark.sharing import filter_to_json
from tahoe.spark.skipping import pushed_filter

SCHEMA = ('{"type":"struct","fields":['
          '{"name":"id","type":"long","nullable":true,"metadata":{}},'
          '{"name":"n","type":"integer","nullable":true,"metadata":{}},'
          '{"name":"s","type":"string","nullable":true,"metadata":{}},'
          '{"name":"d","type":"date","nullable":true,"metadata":{}},'
          '{"name":"ts","type":"timestamp","nullable":true,"metadata":{}},'
          '{"name":"ntz","type":"timestamp_ntz","nullable":true,"metadata":{}},'
          '{"name":"x","type":"double","nullable":true,"metadata":{}},'
          '{"name":"b","type":"boolean","nullable":true,"metadata":{}},'
          '{"name":"dec","type":"decimal(10,2)","nullable":true,"metadata":{}},'
          '{"name":"st","type":{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]},'
          '"nullable":true,"metadata":{}}]}')

UTC = dt.timezone.utc


def col(name: str, vt: str) -> dict:
    return {"op": "column", "name": name, "valueType": vt}


def val(value: str, vt: str) -> dict:
    return {"op": "literal", "value": value, "valueType": vt}


@pytest.mark.parametrize("f, expected", [
    (EqualTo(("id",), 7), {"op": "equal", "children": [col("id", "long"), val("7", "long")]}),
    (GreaterThan(("n",), 3), {"op": "greaterThan", "children": [col("n", "int"), val("3", "int")]}),
    (LessThanOrEqual(("s",), "it's"), {"op": "lessThanOrEqual", "children": [col("s", "string"), val("it's", "string")]}),
    (GreaterThanOrEqual(("d",), dt.date(2021, 4, 29)),
     {"op": "greaterThanOrEqual", "children": [col("d", "date"), val("2021-04-29", "date")]}),
    # an instant in another zone is sent in UTC, its microseconds kept (cutting them moves the bound)
    (LessThan(("ts",), dt.datetime(2021, 1, 1, 2, 0, 0, 500, tzinfo=dt.timezone(dt.timedelta(hours=2)))),
     {"op": "lessThan", "children": [col("ts", "timestamp"), val("2021-01-01T00:00:00.000500Z", "timestamp")]}),
    (EqualTo(("ts",), dt.datetime(2021, 1, 1, tzinfo=UTC)),
     {"op": "equal", "children": [col("ts", "timestamp"), val("2021-01-01T00:00:00.000Z", "timestamp")]}),
    (EqualTo(("x",), 1.5), {"op": "equal", "children": [col("x", "double"), val("1.5", "double")]}),
    (EqualTo(("b",), True), {"op": "equal", "children": [col("b", "bool"), val("true", "bool")]}),
    (In(("id",), (1, 2)), {"op": "or", "children": [
        {"op": "equal", "children": [col("id", "long"), val("1", "long")]},
        {"op": "equal", "children": [col("id", "long"), val("2", "long")]}]}),
    (In(("id",), (5,)), {"op": "equal", "children": [col("id", "long"), val("5", "long")]}),
    (IsNull(("s",)), {"op": "isNull", "children": [col("s", "string")]}),
    (IsNotNull(("s",)), {"op": "not", "children": [{"op": "isNull", "children": [col("s", "string")]}]}),
    (Not(EqualTo(("id",), 7)),
     {"op": "not", "children": [{"op": "equal", "children": [col("id", "long"), val("7", "long")]}]}),
])
def test_pushed_filters_become_the_protocols_json_predicates(f, expected):
    assert filter_to_json(f, SCHEMA) == expected


@pytest.mark.parametrize("f", [
    EqualTo(("dec",), Decimal("1.25")),            # JSON predicates have no decimal value type
    EqualTo(("ntz",), dt.datetime(2021, 1, 1)),    # a timestamp_ntz is no instant
    EqualTo(("st", "a"), 1),                       # nested columns are not in the JSON tree
    EqualTo(("nope",), 1),                         # not a column of the read
    EqualNullSafe(("id",), 1),                     # <=> has no JSON form
    EqualTo(("id",), None),                        # a comparison with NULL
    In(("id",), (1, None)),
    StringStartsWith(("s",), "ab"),                # no LIKE in JSON predicates
    Not(StringStartsWith(("s",), "ab")),
])
def test_filters_without_an_exact_json_form_are_not_sent(f):
    assert filter_to_json(f, SCHEMA) is None


def test_pushed_filters_as_expressions_skip_files_by_their_stats():
    """The `delta` source's skipping with pushed filters: files whose stats show no row can match
    are dropped, every other file kept — an aware timestamp compared as an instant, a naive one
    against a timestamp_ntz column as a wall-clock time."""
    import json

    from tahoe.expressions import file_mask
    from tahoe.protocol.schema import LONG, TIMESTAMP, TIMESTAMP_NTZ, StructField, StructType

    schema = StructType([StructField("id", LONG), StructField("ts", TIMESTAMP), StructField("ntz", TIMESTAMP_NTZ)])

    def stats(lo, hi, ts_lo, ts_hi):
        return json.dumps({"numRecords": 2, "minValues": {"id": lo, "ts": ts_lo, "ntz": ts_lo[:-1]},
                           "maxValues": {"id": hi, "ts": ts_hi, "ntz": ts_hi[:-1]},
                           "nullCount": {"id": 0, "ts": 0, "ntz": 0}})

    files = pa.table({"path": ["a", "b", "c"], "partitionValues": [[], [], []],
                      "stats": [stats(1, 9, "2021-01-01T00:00:00.000Z", "2021-01-01T10:00:00.000Z"),
                                stats(10, 19, "2021-01-02T00:00:00.000Z", "2021-01-02T10:00:00.000Z"),
                                stats(20, 29, "2021-01-03T00:00:00.000Z", "2021-01-03T10:00:00.000Z")]},
                     schema=pa.schema([("path", pa.string()), ("partitionValues", pa.map_(pa.string(), pa.string())),
                                       ("stats", pa.string())]))

    def kept(f) -> list[str]:
        mask = file_mask(pushed_filter(f), files, schema, [])
        return [p for p, k in zip(files.column("path").to_pylist(), mask) if k]

    assert kept(GreaterThan(("id",), 15)) == ["b", "c"]
    assert kept(In(("id",), (3, 25))) == ["a", "c"]
    assert kept(Not(LessThan(("id",), 20))) == ["c"]
    # 2021-01-02T05:00 in UTC+05:00 is 2021-01-02T00:00Z: only file b's range holds it
    assert kept(EqualTo(("ts",), dt.datetime(2021, 1, 2, 5, tzinfo=dt.timezone(dt.timedelta(hours=5))))) == ["b"]
    assert kept(EqualTo(("ntz",), dt.datetime(2021, 1, 3, 5))) == ["c"]
    assert kept(IsNull(("id",))) == []
