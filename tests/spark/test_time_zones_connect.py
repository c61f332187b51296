"""Session time zones over Spark Connect (issue 35): a client session in a zone behind UTC
(America/Los_Angeles) and one ahead (Asia/Kolkata) reads zone-less timestamps in its zone, as on
classic (tests/spark/test_time_zones.py) — time travel by timestamp (`timestampAsOf`, SQL
`TIMESTAMP AS OF`), DML with a timestamp predicate (DeltaTable.delete/update with SQL strings and
Columns, SQL DELETE), and filters on a timestamp partition column (values written with a Z and of
the older zone-less form).

Tables and expected rows are the classic tests' (one row per file; derived by hand from the zone
offsets). The zone is set on the shared Connect client session and restored after."""

from __future__ import annotations

import pytest

from tests.spark.test_time_zones import (
    AS_OF, BEFORE_NOON, INSTANTS, NOON, _at_noon, _before_noon, _ids, _in_zone, _table, _time_tables, _versioned,
)

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

KEY = "spark.sql.session.timeZone"


@pytest.fixture(params=["America/Los_Angeles", "Asia/Kolkata"])
def zone(request, connect):
    before = connect.conf.get(KEY)
    connect.conf.set(KEY, request.param)
    yield request.param
    connect.conf.set(KEY, before)


@pytest.fixture
def delta_sql(connect):
    """Delta SQL on the Connect session for one test (the one-line setup), off again after."""
    from tahoe.spark import enable
    from tahoe.spark.sql import disable

    enable(connect)
    yield connect
    disable(connect)


def test_time_travel_by_timestamp_over_connect(connect, zone, delta_sql, tmp_path):
    """NOON names 20:00Z in Los Angeles (newest version at or before it: 2) and 06:30Z in
    Kolkata (version 0); a string with its own zone is that instant in every zone (version 1)."""
    p = _versioned(str(tmp_path / "t"))
    want = {10 + v for v in range(AS_OF[zone] + 1)}
    assert _ids(connect.read.format("delta").option("timestampAsOf", NOON).load(p)) == want
    assert _ids(connect.sql(f"SELECT id FROM delta.`{p}` TIMESTAMP AS OF '{NOON}'")) == want
    assert _ids(connect.read.format("delta").option("timestampAsOf", "2024-01-01T12:00:00Z").load(p)) == {10, 11}


def test_dml_with_a_timestamp_predicate_over_connect(connect, zone, delta_sql, tmp_path):
    """DELETE / UPDATE act on the row Spark's evaluation in the session zone selects, with the
    files pruned in that zone (one row per file: a file pruned in UTC keeps its row)."""
    from pyspark.sql import functions as F

    from tahoe.spark import DeltaTable

    everything = {1, 2, 3, 4}
    for kind in ("plain", "part", "zoneless"):
        target = _at_noon(kind, zone)
        p = _table(str(tmp_path / f"api_{kind}"), kind)
        DeltaTable.forPath(connect, p).delete(f"ts = timestamp'{NOON}'")
        assert _ids(connect.read.format("delta").load(p)) == everything - {target}, kind
        q = _table(str(tmp_path / f"col_{kind}"), kind)
        DeltaTable.forPath(connect, q).delete(F.col("ts") == F.expr(f"timestamp'{NOON}'"))
        assert _ids(connect.read.format("delta").load(q)) == everything - {target}, kind
        s = _table(str(tmp_path / f"sql_{kind}"), kind)
        r = connect.sql(f"DELETE FROM delta.`{s}` WHERE ts = timestamp'{NOON}'").collect()
        assert r[0][0] == 1, kind
        assert _ids(connect.read.format("delta").load(s)) == everything - {target}, kind

    p = _table(str(tmp_path / "upd"), "plain")
    DeltaTable.forPath(connect, p).update(F.col("ts") < F.expr(f"timestamp'{NOON}'"), {"id": F.expr("id + 100")})
    before = BEFORE_NOON[zone]
    assert _ids(DeltaTable.forPath(connect, p).toDF()) == (everything - before) | {i + 100 for i in before}


@pytest.mark.parametrize("kind", ["part", "zoneless"])
def test_partition_filter_over_connect(connect, zone, kind, tmp_path):
    """A filter on the timestamp partition column keeps the partition of the instant NOON names
    in the zone (`part`, values with a Z) or whose wall-clock value is NOON (`zoneless`); Spark
    shows row 1's value in the zone (its instant there, or the zone-less value as written)."""
    import zoneinfo

    p = _table(str(tmp_path / "t"), kind)
    df = connect.read.format("delta").load(p)
    assert _ids(df.filter(f"ts = timestamp'{NOON}'")) == {_at_noon(kind, zone)}
    assert _ids(df.filter(f"ts < timestamp'{NOON}'")) == _before_noon(kind, zone)
    shown = df.filter("id = 1").selectExpr("CAST(ts AS STRING)").collect()[0][0]
    local = INSTANTS[1].astimezone(zoneinfo.ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S")
    assert shown == (NOON if kind == "zoneless" else local)


@pytest.mark.parametrize("entry", _time_tables())
def test_conformance_tables_with_dates_and_timestamps_read_in_kolkata(connect, entry):
    """The classic test's conformance tables over Connect, in a Kolkata client session: the
    reference's rows, zone-less timestamp partition values at the session's wall clock."""
    from tests.conftest import GOLDEN, assert_rows_equal, read_expected

    table = GOLDEN / entry["table"]
    before = connect.conf.get(KEY)
    connect.conf.set(KEY, "Asia/Kolkata")
    try:
        got = connect.read.format("delta").load(str(table)).toArrow()
    finally:
        connect.conf.set(KEY, before)
    assert_rows_equal(got, _in_zone(read_expected(entry), table, "Asia/Kolkata"), entry["name"])
