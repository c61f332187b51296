"""Partition values: parsing (per value and vectorised) checked against the conformance tables'
expected rows, serialization in delta-spark's forms, and Hive-style directory escaping."""

from __future__ import annotations

import json
import random
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tahoe.errors import CorruptLogError, SchemaError
from tahoe.protocol.partition_values import (
    HIVE_DEFAULT_PARTITION, escape_path_name, parse_partition_path, parse_partition_value,
    partition_column_to_arrow, partition_path, serialize_partition_value, unescape_path_name,
)
from tahoe.protocol.schema import (
    BINARY, BOOLEAN, BYTE, DATE, DOUBLE, FLOAT, INTEGER, LONG, SHORT, STRING, TIMESTAMP,
    TIMESTAMP_NTZ, VOID, ArrayType, DecimalType, StructType, to_arrow_type,
)
from tests.conftest import GOLDEN

UTC = timezone.utc


def _log(table: str) -> tuple[StructType, list[str], list[dict]]:
    """(schema, partition columns, adds) of a conformance table (single metadata assumed)."""
    schema = parts = None
    adds = []
    for f in sorted((GOLDEN / table / "delta" / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            if not line.strip():
                continue
            d = json.loads(line)
            if "metaData" in d:
                schema = StructType.from_json(d["metaData"]["schemaString"])
                parts = d["metaData"]["partitionColumns"]
            if "add" in d:
                adds.append(d["add"])
    assert schema is not None
    return schema, parts, adds


def _expected(table: str, sub: str = "expected") -> pa.Table:
    files = sorted((GOLDEN / table / sub).glob("*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files])


@pytest.mark.conformance
def test_data_reader_partition_values_match_expected_utc():
    schema, parts, adds = _log("data-reader-partition-values")
    expected = {r["value"]: r for r in _expected("data-reader-partition-values", "expected_utc").to_pylist()}
    assert len(adds) == 3
    for add in adds:
        pv = add["partitionValues"]
        typed = {c: parse_partition_value(pv[c], schema[c].type) for c in parts}
        # every file holds the rows whose partition values equal their `value` column's number
        key = "2" if typed["as_int"] is None else str(typed["as_int"])
        row = expected[key]
        for c in parts:
            assert typed[c] == row[c], (c, pv[c], typed[c], row[c])
    assert parse_partition_value("2021-09-08 11:11:11", TIMESTAMP) == datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC)
    assert parse_partition_value("null", STRING) == "null"  # the literal string, not a null


@pytest.mark.conformance
def test_vectorised_matches_expected_for_every_partition_type():
    schema, parts, adds = _log("data-reader-partition-values")
    for c in parts:
        raw = [a["partitionValues"][c] for a in adds]
        arr = partition_column_to_arrow(raw, schema[c].type)
        assert arr.type == to_arrow_type(schema[c].type)
        assert arr.to_pylist() == [parse_partition_value(v, schema[c].type) for v in raw]


@pytest.mark.conformance
@pytest.mark.parametrize("table", [
    "kernel-timestamp-int96", "kernel-timestamp-pst", "kernel-timestamp-timestamp_micros",
    "kernel-timestamp-timestamp_millis", "data-reader-timestamp_ntz", "basic-decimal-table",
    "basic-decimal-table-legacy", "data-reader-escaped-chars",
])
def test_partition_values_match_expected_rows(table):
    schema, parts, adds = _log(table)
    expected = _expected(table)
    for c in parts:
        dt = schema[c].type
        want = set(expected.column(c).to_pylist())
        got_scalar = {parse_partition_value(a["partitionValues"][c], dt) for a in adds}
        got_vector = set(partition_column_to_arrow([a["partitionValues"][c] for a in adds], dt).to_pylist())
        assert got_scalar == want
        assert got_vector == want


@pytest.mark.conformance
@pytest.mark.parametrize("table", [
    "data-reader-timestamp_ntz-id-mode", "data-reader-timestamp_ntz-name-mode", "dv-with-columnmapping",
])
def test_partition_values_under_column_mapping(table):
    schema, parts, adds = _log(table)
    expected = _expected(table)
    for c in parts:
        f = schema[c]
        phys = f.metadata["delta.columnMapping.physicalName"]
        got = {parse_partition_value(a["partitionValues"][phys], f.type) for a in adds}
        assert got == set(expected.column(c).to_pylist())


@pytest.mark.conformance
def test_escaped_chars_directories():
    schema, parts, adds = _log("data-reader-escaped-chars")
    for add in adds:
        pv = add["partitionValues"]
        directory = unquote(add["path"]).rsplit("/", 1)[0]  # add.path is a URI
        assert partition_path(parts, pv) == directory  # e.g. _2=bar+%2521 for "bar+%21"
        assert parse_partition_path(directory) == pv
        assert (GOLDEN / "data-reader-escaped-chars" / "delta" / directory).is_dir()


def test_special_character_names_escape_like_hive():
    # log-replay-special-characters holds a file named `special p@#h`: Hive escapes only '#'
    assert escape_path_name("special p@#h") == "special p@%23h"
    chars = "".join(chr(c) for c in range(1, 32)) + "\"#%'*/:=?\\\x7f{[]^"
    assert escape_path_name(chars) == "".join(f"%{ord(c):02X}" for c in chars)
    kept = " !$&()+,-.;<>@_`|}~azAZ09é日\x00"
    assert escape_path_name(kept) == kept
    for s in [chars, kept, "a=b/c", "100%", "%zz", "x%4", "ab%2"]:
        assert unescape_path_name(escape_path_name(s)) == s
    assert unescape_path_name("a%3Db%zz%4") == "a=b%zz%4"
    assert unescape_path_name("%2f") == "/"


def test_partition_path():
    assert partition_path(["a", "b"], {"a": "1", "b": None}) == f"a=1/b={HIVE_DEFAULT_PARTITION}"
    assert partition_path(["a"], {"a": ""}) == f"a={HIVE_DEFAULT_PARTITION}"
    assert partition_path(["A=b"], {"a=B": "x/y"}) == "A%3Db=x%2Fy"
    assert partition_path([], {}) == ""
    with pytest.raises(SchemaError, match="'c'"):
        partition_path(["c"], {"a": "1"})
    assert parse_partition_path(f"a=1/b={HIVE_DEFAULT_PARTITION}/part-0.parquet") == {"a": "1", "b": None}


def test_parse_each_type():
    assert parse_partition_value(None, INTEGER) is None
    for dt in (STRING, INTEGER, DOUBLE, DATE, TIMESTAMP, BINARY, BOOLEAN, DecimalType(5, 2)):
        assert parse_partition_value("", dt) is None
    assert parse_partition_value("true", BOOLEAN) is True
    assert parse_partition_value("FALSE", BOOLEAN) is False
    assert parse_partition_value("-128", BYTE) == -128
    assert parse_partition_value("32767", SHORT) == 32767
    assert parse_partition_value("9223372036854775807", LONG) == 2**63 - 1
    assert parse_partition_value("1.5", FLOAT) == 1.5
    assert parse_partition_value("Infinity", DOUBLE) == float("inf")
    assert parse_partition_value("-Infinity", DOUBLE) == float("-inf")
    v = parse_partition_value("NaN", DOUBLE)
    assert v != v
    assert parse_partition_value("1.5", DecimalType(5, 2)) == Decimal("1.50")
    assert str(parse_partition_value("1.5", DecimalType(5, 2))) == "1.50"
    assert parse_partition_value("12345678901234567890123456789012345678", DecimalType(38, 0)) == \
        Decimal("12345678901234567890123456789012345678")
    assert parse_partition_value("1970-01-01", DATE) == date(1970, 1, 1)
    assert parse_partition_value("1970-01-01 00:00:00", TIMESTAMP) == datetime(1970, 1, 1, tzinfo=UTC)
    assert parse_partition_value("1970-01-01 00:00:00.123456", TIMESTAMP) == \
        datetime(1970, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)
    assert parse_partition_value("1970-01-01T00:00:00.123456Z", TIMESTAMP) == \
        datetime(1970, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)
    assert parse_partition_value("1970-01-01T02:00:00.5+02:00", TIMESTAMP) == \
        datetime(1970, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)
    assert parse_partition_value("2024-06-14 04:00:00UTC", TIMESTAMP) == datetime(2024, 6, 14, 4, tzinfo=UTC)
    assert parse_partition_value("1970-01-01 00:00:00.123456789", TIMESTAMP).microsecond == 123456
    assert parse_partition_value("1970-01-01 00:00:00.123", TIMESTAMP_NTZ) == datetime(1970, 1, 1, 0, 0, 0, 123000)
    assert parse_partition_value("1970-01-01 00:00:00", TIMESTAMP_NTZ).tzinfo is None
    assert parse_partition_value("\u0001\u0002é", BINARY) == b"\x01\x02\xc3\xa9"
    assert parse_partition_value("x", VOID) is None


@pytest.mark.parametrize("text,dt", [
    ("abc", INTEGER), ("128", BYTE), ("1.5", LONG), ("yes", BOOLEAN), ("x", DOUBLE),
    ("2021-13-01", DATE), ("2021-02-30 00:00:00", TIMESTAMP), ("nope", TIMESTAMP),
    ("1970-01-01T00:00:00Z", TIMESTAMP_NTZ), ("1.234", DecimalType(3, 2)), ("abc", DecimalType(5, 2)),
])
def test_malformed_values_raise(text, dt):
    with pytest.raises(CorruptLogError, match="invalid partition value"):
        parse_partition_value(text, dt)
    with pytest.raises(CorruptLogError, match="invalid partition value"):
        partition_column_to_arrow(["", text, None], dt)


def test_complex_partition_type_refused():
    with pytest.raises(SchemaError):
        parse_partition_value("x", ArrayType(INTEGER))


def test_vectorised_types_nulls_and_inputs():
    cases = [
        (INTEGER, ["1", None, "", "-7"]),
        (LONG, ["9223372036854775807", "0"]),
        (BYTE, ["-128", "127"]),
        (SHORT, ["5", None]),
        (DOUBLE, ["1.5", "NaN", "Infinity", "-Infinity", "0.0"]),
        (FLOAT, ["0.1", "1.0"]),
        (BOOLEAN, ["true", "false", None, "TRUE"]),
        (DATE, ["2021-09-08", "1969-12-31", None]),
        (STRING, ["a", "", None, "null"]),
        (BINARY, ["ab", None]),
        (DecimalType(12, 5), ["-2342342.23423", "0.00004", "234.00000", None]),
        (TIMESTAMP, ["2021-09-08 11:11:11", "2020-01-01 08:09:10.001", None, "1969-01-01 00:00:00"]),
        (TIMESTAMP, ["2021-09-08T11:11:11.123456Z", "2021-09-08T13:11:11+02:00"]),
        (TIMESTAMP, ["2021-09-08 11:11:11", "2021-09-08T11:11:11Z"]),  # mixed forms
        (TIMESTAMP_NTZ, ["2013-07-05 17:01:00.123456", None]),
        (VOID, ["x", None]),
    ]
    for dt, raw in cases:
        want = [parse_partition_value(v, dt) for v in raw]
        for values in (raw, pa.array(raw, pa.string()), pa.chunked_array([pa.array(raw, pa.string())]),
                       pa.array(raw, pa.string()).dictionary_encode()):
            arr = partition_column_to_arrow(values, dt)
            assert arr.type == to_arrow_type(dt)
            got = arr.to_pylist()
            if dt == FLOAT:  # Arrow widens float32 to the nearest double
                want = [None if x is None else float(np.float32(x)) for x in want]
            assert [("nan" if isinstance(x, float) and x != x else x) for x in got] == \
                   [("nan" if isinstance(x, float) and x != x else x) for x in want], (dt, raw)
    assert partition_column_to_arrow([None, None], INTEGER).to_pylist() == [None, None]
    assert partition_column_to_arrow([], DATE).to_pylist() == []


def test_vectorised_many_values():
    """Many values, hand-derived results (the time it takes is measured in bench/partition_values.py)."""
    n = 10_000
    ints = [str(i % 1000) for i in range(n)]
    stamps = pa.array([f"2021-09-08 11:{i % 60:02d}:00" for i in range(n)])
    a = partition_column_to_arrow(ints, LONG)
    b = partition_column_to_arrow(stamps, TIMESTAMP)
    c = partition_column_to_arrow(pa.array(ints), DecimalType(10, 2))
    assert a.to_pylist() == [i % 1000 for i in range(n)]
    assert b.to_pylist() == [datetime(2021, 9, 8, 11, i % 60, tzinfo=UTC) for i in range(n)]
    assert c.to_pylist() == [Decimal(f"{i % 1000}.00") for i in range(n)]


# --- writers -----------------------------------------------------------------------------------

def test_serialize_forms():
    s = serialize_partition_value
    assert s(None, INTEGER) is None
    assert s("", STRING) is None
    assert s("null", STRING) == "null"
    assert s(True, BOOLEAN) == "true" and s(False, BOOLEAN) == "false"
    assert s(-5, INTEGER) == "-5" and s(2**63 - 1, LONG) == "9223372036854775807"
    with pytest.raises(SchemaError):
        s(300, BYTE)
    assert s(0.0, DOUBLE) == "0.0" and s(1.5, DOUBLE) == "1.5"
    assert s(float("nan"), DOUBLE) == "NaN"
    assert s(float("inf"), FLOAT) == "Infinity" and s(float("-inf"), DOUBLE) == "-Infinity"
    assert s(0.1, FLOAT) == "0.1"  # shortest float32 text, not 0.10000000149011612
    assert s(Decimal("1.5"), DecimalType(5, 2)) == "1.50"
    assert s(Decimal("1E-7"), DecimalType(10, 8)) == "0.00000010"  # never exponent notation
    assert s(Decimal("0"), DecimalType(1, 0)) == "0"
    with pytest.raises(SchemaError):
        s(Decimal("1.234"), DecimalType(5, 2))
    assert s(date(2021, 9, 8), DATE) == "2021-09-08"
    assert s(datetime(2021, 9, 8, 23, 0), DATE) == "2021-09-08"
    ts = datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC)
    # delta-spark >= 3.3 (write.utcTimestampPartitionValues, on by default): the instant in UTC,
    # ISO 8601 with microseconds and a Z (delta-kernel-rs's reference table of Spark's output too)
    assert s(ts, TIMESTAMP) == "2021-09-08T11:11:11.000000Z"
    assert s(ts.replace(microsecond=123456), TIMESTAMP) == "2021-09-08T11:11:11.123456Z"
    assert s(ts.astimezone(timezone(timedelta(hours=-7))), TIMESTAMP) == "2021-09-08T11:11:11.000000Z"
    assert s(datetime(2021, 9, 8, 11, 11, 11), TIMESTAMP) == "2021-09-08T11:11:11.000000Z"  # naive = UTC
    # a naive value in a named zone: 04:11:11 in Los Angeles (PDT, UTC-7) is 11:11:11 UTC
    assert s(datetime(2021, 9, 8, 4, 11, 11), TIMESTAMP, time_zone="America/Los_Angeles") == \
        "2021-09-08T11:11:11.000000Z"
    # the spec's zone-less form, on request (UTC, trailing zeros of the fraction dropped as Spark does)
    assert s(ts, TIMESTAMP, iso_timestamps=False) == "2021-09-08 11:11:11"
    assert s(ts.replace(microsecond=1000), TIMESTAMP, iso_timestamps=False) == "2021-09-08 11:11:11.001"
    assert s(ts.replace(microsecond=123456), TIMESTAMP, iso_timestamps=False) == "2021-09-08 11:11:11.123456"
    assert s(datetime(2013, 7, 5, 17, 1, 0, 123456), TIMESTAMP_NTZ) == "2013-07-05 17:01:00.123456"
    with pytest.raises(SchemaError):
        s(ts, TIMESTAMP_NTZ)
    assert s(b"\x01\x02", BINARY) == "\x01\x02"
    with pytest.raises(SchemaError):
        s(b"\xff", BINARY)


def test_serialize_parse_round_trip():
    rnd = random.Random(7)
    values = {
        BOOLEAN: [True, False], BYTE: [-128, 0, 127], SHORT: [-32768, 32767], INTEGER: [-(2**31), 2**31 - 1],
        LONG: [-(2**63), 2**63 - 1], DOUBLE: [0.1, -1e300, 5e-324, 1e16], FLOAT: [0.1, 3.4028234663852886e38],
        STRING: ["a b", "日本", "%", " "], DATE: [date(1, 1, 1), date(9999, 12, 31), date(1969, 12, 31)],
        DecimalType(38, 10): [Decimal("-1234567890123456789012345678.0123456789"), Decimal("0E-10")],
        TIMESTAMP: [datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
                    datetime(1, 1, 1, tzinfo=UTC), datetime(2262, 4, 11, 23, 47, 16, 854775, tzinfo=UTC)],
        TIMESTAMP_NTZ: [datetime(1900, 1, 1, 0, 0, 0, 10), datetime(9999, 12, 31, 23, 59, 59, 999999)],
        BINARY: [b"abc", "é".encode()],
    }
    for _ in range(20):
        values[TIMESTAMP].append(datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=rnd.randrange(-2**50, 2**50)))
    for dt, vs in values.items():
        for v in vs:
            text = serialize_partition_value(v, dt)
            back = parse_partition_value(text, dt)
            if dt == FLOAT:
                assert abs(back - v) <= abs(v) * 1e-7
            else:
                assert back == v, (dt, v, text, back)
            if dt == TIMESTAMP:
                assert parse_partition_value(serialize_partition_value(v, dt, iso_timestamps=False), dt) == v


def test_partition_values_to_arrow_finds_physical_logical_and_case_insensitive_keys():
    import pyarrow as pa

    from tahoe.protocol.partition_values import partition_values_to_arrow
    from tahoe.protocol.schema import DATE, INTEGER, StructField

    mapped = StructField("day", DATE, metadata={"delta.columnMapping.physicalName": "col-1", "delta.columnMapping.id": 1})
    plain = StructField("Part", INTEGER)
    pvs = [{"col-1": "2024-01-02", "Part": "1"}, None, {"day": "2024-01-03", "part": "3"}, {"col-1": "", "PART": None}]
    out = partition_values_to_arrow(pvs, [mapped, plain], "name")
    assert out["day"].type == pa.date32()
    assert [str(d) if d else None for d in out["day"].to_pylist()] == ["2024-01-02", None, "2024-01-03", None]
    assert out["Part"].to_pylist() == [1, None, 3, None]
    as_map = pa.array([{"Part": "7"}], pa.map_(pa.string(), pa.string()))
    assert partition_values_to_arrow(as_map, [plain])["Part"].to_pylist() == [7]


def test_timestamp_partition_values_read_in_both_forms_zone_less_in_the_readers_zone():
    """The rule of `tahoe.protocol.partition_values` (delta-spark's): a value with a zone is that
    instant; a zone-less one is wall-clock time in the reader's zone (the Spark session's), UTC
    by default. Expected instants derived by hand: Los Angeles is UTC-8 in January, Kolkata UTC+5:30."""
    import pyarrow as pa

    from tahoe.protocol.partition_values import partition_column_to_arrow, partition_values_to_arrow
    from tahoe.protocol.schema import StructField

    def utc(*a):
        return datetime(*a, tzinfo=UTC)

    zoneless, zoned = "2024-01-01 12:00:00", "2024-01-01T20:00:00.000000Z"
    assert parse_partition_value(zoneless, TIMESTAMP) == utc(2024, 1, 1, 12)
    assert parse_partition_value(zoneless, TIMESTAMP, time_zone="America/Los_Angeles") == utc(2024, 1, 1, 20)
    assert parse_partition_value(zoneless, TIMESTAMP, time_zone="Asia/Kolkata") == utc(2024, 1, 1, 6, 30)
    for tz in (None, "UTC", "America/Los_Angeles", "Asia/Kolkata"):
        assert parse_partition_value(zoned, TIMESTAMP, time_zone=tz) == utc(2024, 1, 1, 20)
        assert parse_partition_value("2024-01-01T12:00:00-08:00", TIMESTAMP, time_zone=tz) == utc(2024, 1, 1, 20)
    # a whole column at once, the two forms mixed (values a delta-spark upgrade leaves side by side)
    for tz, first in ((None, utc(2024, 1, 1, 12)), ("America/Los_Angeles", utc(2024, 1, 1, 20)),
                      ("Asia/Kolkata", utc(2024, 1, 1, 6, 30))):
        col = partition_column_to_arrow([zoneless, zoned, None], TIMESTAMP, time_zone=tz)
        assert col.type == pa.timestamp("us", tz="UTC")
        assert col.to_pylist() == [first, utc(2024, 1, 1, 20), None]
        only = partition_column_to_arrow([zoneless, zoneless], TIMESTAMP, time_zone=tz)
        assert only.to_pylist() == [first, first]
        typed = partition_values_to_arrow([{"ts": zoneless}], [StructField("ts", TIMESTAMP)], time_zone=tz)
        assert typed["ts"].to_pylist() == [first]
    # a daylight-saving gap moves forward, a repeated hour takes the earlier offset (Java's rule)
    assert parse_partition_value("2024-03-10 02:30:00", TIMESTAMP, time_zone="America/Los_Angeles") == \
        utc(2024, 3, 10, 10, 30)   # 03:30 PDT
    assert parse_partition_value("2024-11-03 01:30:00", TIMESTAMP, time_zone="America/Los_Angeles") == \
        utc(2024, 11, 3, 8, 30)    # 01:30 PDT, the first of the two
