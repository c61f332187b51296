"""delta-spark's `spark.databricks.delta.write.utcTimestampPartitionValues` on every Spark write
path: true (its default) writes timestamp partition values as UTC instants with a `Z`
(`2024-01-01T20:00:00.000000Z`); false writes them as the session zone's zone-less wall-clock
time (`2024-01-01 12:00:00`), as delta-spark < 3.3 did — through format("delta") (the data
source; classic and Spark Connect), write_delta (Spark's own writer), a DML that writes a new
partition, and a streaming write. Reads in the same zone give the same instants either way.

Oracle: the values derived by hand (12:00 in Los Angeles is 20:00Z in January)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

CONF = "spark.databricks.delta.write.utcTimestampPartitionValues"
LA = "America/Los_Angeles"


def _values(path) -> set:
    out = set()
    for f in sorted(Path(path, "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            a = json.loads(line)
            if "add" in a:
                out.add(a["add"]["partitionValues"]["ts"])
    return out


@pytest.fixture
def la(spark):
    s = spark.newSession()
    s.conf.set("spark.sql.session.timeZone", LA)
    return s


def _df(s, hours=(12,)):
    rows = ", ".join(f"({i}, timestamp'2024-01-01 {h:02d}:00:00')" for i, h in enumerate(hours))
    return s.sql(f"SELECT * FROM VALUES {rows} AS t(id, ts)")


def _instants(s, path) -> list:
    return sorted(r.u for r in s.read.format("delta").load(path).selectExpr("unix_timestamp(ts) AS u").collect())


NOON_LA = int(dt.datetime(2024, 1, 1, 20, tzinfo=dt.timezone.utc).timestamp())


@pytest.mark.parametrize("utc", [True, False])
def test_every_classic_write_path(la, tmp_path, utc):
    from tahoe.spark import DeltaTable, write_delta

    la.conf.set(CONF, str(utc).lower())
    want = {"2024-01-01T20:00:00.000000Z"} if utc else {"2024-01-01 12:00:00"}
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    _df(la).write.format("delta").partitionBy("ts").save(a)          # the data source
    write_delta(_df(la), b, mode="append", partition_by=["ts"])      # Spark's parquet writer
    assert _values(a) == want and _values(b) == want
    assert _instants(la, a) == [NOON_LA] and _instants(la, b) == [NOON_LA]
    # a DML writing a new partition: 12:00 → 13:30 LA (21:30Z)
    DeltaTable.forPath(la, b).update("id = 0", {"ts": "timestamp'2024-01-01 13:30:00'"})
    assert _values(b) == want | ({"2024-01-01T21:30:00.000000Z"} if utc else {"2024-01-01 13:30:00"})
    assert _instants(la, b) == [NOON_LA + 5400]
    # a streaming write
    c, cp = str(tmp_path / "c"), str(tmp_path / "cp")
    _df(la).write.format("delta").save(str(tmp_path / "src"))
    q = (la.readStream.format("delta").load(str(tmp_path / "src")).writeStream.format("delta")
         .partitionBy("ts").option("checkpointLocation", cp).trigger(availableNow=True).start(c))
    q.awaitTermination(120)
    assert _values(c) == want and _instants(la, c) == [NOON_LA]


def test_bad_value_refused_by_name(la, tmp_path):
    from tahoe.errors import InvalidOptionError

    la.conf.set(CONF, "sometimes")
    with pytest.raises(InvalidOptionError, match=CONF):
        _df(la).write.format("delta").partitionBy("ts").save(str(tmp_path / "x"))


def test_connect_write(connect, tmp_path):
    key = "spark.sql.session.timeZone"
    before = connect.conf.get(key)
    connect.conf.set(key, LA)
    connect.conf.set(CONF, "false")
    try:
        path = str(tmp_path / "t")
        _df(connect).write.format("delta").partitionBy("ts").save(path)
        assert _values(path) == {"2024-01-01 12:00:00"}
        assert _instants(connect, path) == [NOON_LA]
        # a DML over Connect writing a new partition: 12:00 -> 13:30 LA
        from tahoe.spark import DeltaTable

        DeltaTable.forPath(connect, path).update("id = 0", {"ts": "timestamp'2024-01-01 13:30:00'"})
        assert _values(path) == {"2024-01-01 12:00:00", "2024-01-01 13:30:00"}
        assert _instants(connect, path) == [NOON_LA + 5400]
    finally:
        connect.conf.unset(CONF)
        connect.conf.set(key, before)
