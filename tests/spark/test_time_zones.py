"""Session time zones (`spark.sql.session.timeZone`): every place tahoe turns a zone-less timestamp
into an instant — a literal in a DML / read / OPTIMIZE condition, a time-travel or change-feed
or streaming option, a timestamp partition value of the zone-less form — reads it in the session
zone, as delta-spark does (`tahoe.protocol.timestamps`).

Each test runs under UTC, a zone behind UTC (America/Los_Angeles, UTC-8 in January) and one ahead
(Asia/Kolkata, UTC+5:30), set on the one shared session and restored after (`zone` fixture). Tables
hold one row per file, so that a file pruned in the wrong zone loses its row. Expected rows are
derived by hand from the offsets: `timestamp'2024-01-01 12:00:00'` is 12:00Z in UTC, 20:00Z in
Los Angeles and 06:30Z in Kolkata, and the rows sit at exactly those instants (and a decoy).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

import tahoe
from tahoe.log import DeltaLog

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

UTC = dt.timezone.utc
ZONES = ["UTC", "America/Los_Angeles", "Asia/Kolkata"]
NOON = "2024-01-01 12:00:00"                      # zone-less: an instant only in a zone
# rows at the instant NOON names in each zone (and a decoy none of them names)
INSTANTS = {1: dt.datetime(2024, 1, 1, 12, tzinfo=UTC),       # NOON in UTC (04:00 LA, 17:30 Kolkata)
            2: dt.datetime(2024, 1, 1, 20, tzinfo=UTC),       # NOON in Los Angeles
            3: dt.datetime(2024, 1, 1, 6, 30, tzinfo=UTC),    # NOON in Kolkata
            4: dt.datetime(2024, 1, 2, 0, 0, tzinfo=UTC)}     # decoy
AT_NOON = {"UTC": 1, "America/Los_Angeles": 2, "Asia/Kolkata": 3}
BEFORE_NOON = {"UTC": {3}, "America/Los_Angeles": {1, 3}, "Asia/Kolkata": set()}


@pytest.fixture(scope="module")
def tz_spark(spark):
    """A session of the shared Spark session (its own confs: the other tests' stay UTC) with
    Delta SQL on — no new SparkContext, no JVM start."""
    import tahoe.spark

    s = spark.newSession()
    tahoe.spark.enable(s)
    return s


@pytest.fixture(params=ZONES)
def zone(request, tz_spark):
    """`tz_spark` in a zone for one test (restored after)."""
    key = "spark.sql.session.timeZone"
    before = tz_spark.conf.get(key)
    tz_spark.conf.set(key, request.param)
    yield request.param
    tz_spark.conf.set(key, before)


def _rows(ids=(1, 2, 3, 4)) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()),
                     "ts": pa.array([INSTANTS[i] for i in ids], pa.timestamp("us", tz="UTC"))})


def _table(path: str, kind: str, **props) -> str:
    """`plain`: unpartitioned, one row per file (min/max stats prune); `part`: partitioned by ts,
    values as tahoe writes them (UTC, ISO with Z); `zoneless`: partitioned by ts, the values
    rewritten in the spec's zone-less form (as delta-spark < 3.3 wrote them: wall-clock time,
    which every reader reads in its session zone)."""
    tahoe.write_table(path, _rows(), partition_by=["ts"] if kind != "plain" else None, target_file_rows=1,
                      properties={k: str(v) for k, v in props.items()} or None)
    if kind == "zoneless":
        f = Path(path) / "_delta_log" / f"{0:020d}.json"
        lines = []
        for line in f.read_text().splitlines():
            a = json.loads(line)
            if "add" in a:
                v = a["add"]["partitionValues"]["ts"]
                assert v.endswith(".000000Z"), v
                a["add"]["partitionValues"]["ts"] = v[:-len(".000000Z")].replace("T", " ")
            lines.append(json.dumps(a))
        f.write_text("\n".join(lines) + "\n")
        for crc in (Path(path) / "_delta_log").glob("*.crc"):
            crc.unlink()
    return path


def _ids(df) -> set[int]:
    return {r[0] for r in df.select("id").collect()}


def _at_noon(kind: str, zone: str) -> int:
    """The row `ts = NOON` selects: the row at NOON's instant in the zone — on the zone-less
    table the row whose wall-clock value is NOON (row 1) in every zone."""
    return 1 if kind == "zoneless" else AT_NOON[zone]


def _before_noon(kind: str, zone: str) -> set[int]:
    return {3} if kind == "zoneless" else BEFORE_NOON[zone]


# --- DML: files pruned in the session zone -------------------------------------------------------

def test_dml_prunes_files_in_the_session_zone(tz_spark, zone, tmp_path):
    """The issue's repro: DELETE / UPDATE / MERGE with a zone-less timestamp literal act on the
    row Spark's evaluation selects (the planner used to prune files in UTC and miss it) — on
    min/max stats (`plain`), on partition values written with a Z (`part`) and zone-less
    (`zoneless`)."""
    from tahoe.spark import DeltaTable

    everything = {1, 2, 3, 4}
    for kind in ("plain", "part", "zoneless"):
        target = _at_noon(kind, zone)
        p = _table(str(tmp_path / f"del_{kind}"), kind)
        r = tz_spark.sql(f"DELETE FROM delta.`{p}` WHERE ts = timestamp'{NOON}'").collect()
        assert r[0][0] == 1, kind
        assert _ids(tz_spark.read.format("delta").load(p)) == everything - {target}, kind

    p = _table(str(tmp_path / "upd"), "plain")
    DeltaTable.forPath(tz_spark, p).update(f"ts < timestamp'{NOON}'", {"id": "id + 100"})
    before = _before_noon("plain", zone)
    assert _ids(DeltaTable.forPath(tz_spark, p).toDF()) == (everything - before) | {i + 100 for i in before}

    p = _table(str(tmp_path / "merge"), "part")
    src = tz_spark.createDataFrame([(i,) for i in everything], "id long")
    m = DeltaTable.forPath(tz_spark, p).alias("t").merge(src.alias("s"), f"t.id = s.id AND t.ts = timestamp'{NOON}'") \
        .whenMatchedDelete().execute().collect()
    assert m[0]["num_deleted_rows"] == 1
    assert _ids(tz_spark.read.format("delta").load(p)) == everything - {AT_NOON[zone]}


def test_spark_free_dml_reads_zone_less_timestamps_in_utc(tmp_path):
    """Without Spark the documented default is UTC: the literal is 12:00Z (row 1)."""
    p = _table(str(tmp_path / "t"), "plain")
    tahoe.delete(p, f"ts = timestamp'{NOON}'")
    assert sorted(tahoe.Table(p).to_arrow().column("id").to_pylist()) == [2, 3, 4]


# --- reads: skipping in the session zone ------------------------------------------------------------

@pytest.mark.parametrize("kind", ["plain", "part", "zoneless"])
def test_read_skipping_in_the_session_zone(tz_spark, zone, kind, tmp_path):
    """read_delta filters, the data source's pushed filters and SQL WHERE skipping keep the file
    of the row Spark selects; partition values of both forms read as the same instants Spark
    shows (a zone-less value is wall-clock time in the session zone)."""
    from tahoe.spark import read_delta
    from tahoe.spark.calls import NATIVE_READ_CONF

    p = _table(str(tmp_path / "t"), kind)
    cond = f"ts = timestamp'{NOON}'"
    want = {_at_noon(kind, zone)}
    assert _ids(read_delta(tz_spark, p, filters=[cond])) == want
    assert _ids(read_delta(tz_spark, p, filters=[f"ts < timestamp'{NOON}'"])) == _before_noon(kind, zone)
    assert _ids(tz_spark.sql(f"SELECT id FROM delta.`{p}` WHERE {cond}")) == want
    assert _ids(tz_spark.read.format("delta").load(p).filter(cond)) == want
    tz_spark.conf.set(NATIVE_READ_CONF, "false")
    try:   # the Python data source: Spark's pushed filters (instants) against the log
        assert _ids(tz_spark.read.format("delta").load(p).filter(cond)) == want
        shown = tz_spark.read.format("delta").load(p).filter("id = 1").selectExpr("CAST(ts AS STRING)").collect()
    finally:
        tz_spark.conf.unset(NATIVE_READ_CONF)
    native = tz_spark.read.format("delta").load(p).filter("id = 1").selectExpr("CAST(ts AS STRING)").collect()
    # row 1 as Spark shows it in the zone: its instant, or — zone-less — its wall-clock value
    local = INSTANTS[1].astimezone(__import__("zoneinfo").ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S")
    assert shown[0][0] == native[0][0] == (NOON if kind == "zoneless" else local)


# --- time travel, change feed and streams: option strings in the session zone ------------------------

# commit times of versions 0..3 (set on the commit files): NOON is 12:00Z in UTC (-> v1),
# 20:00Z in Los Angeles (-> v2), 06:30Z in Kolkata (-> v0)
COMMITS = [dt.datetime(2024, 1, 1, 0, tzinfo=UTC), dt.datetime(2024, 1, 1, 10, tzinfo=UTC),
           dt.datetime(2024, 1, 1, 15, tzinfo=UTC), dt.datetime(2024, 1, 2, 0, tzinfo=UTC)]
AS_OF = {"UTC": 1, "America/Los_Angeles": 2, "Asia/Kolkata": 0}          # newest version <= NOON
STARTING = {"UTC": 2, "America/Los_Angeles": 3, "Asia/Kolkata": 1}       # first version >= NOON


def _versioned(path: str) -> str:
    """Versions 0..3, version v adding the row 10 + v, committed at COMMITS[v]; change data on."""
    for v in range(4):
        tahoe.write_table(path, pa.table({"id": pa.array([10 + v], pa.int64())}), mode="append",
                          properties={"delta.enableChangeDataFeed": "true"} if v == 0 else None)
    for v, at in enumerate(COMMITS):
        t = at.timestamp()
        os.utime(Path(path) / "_delta_log" / f"{v:020d}.json", (t, t))
    assert [ts for _, ts in DeltaLog.for_table(path).commit_timestamps()] == \
        [int(c.timestamp() * 1000) for c in COMMITS]
    return path


def test_time_travel_options_in_the_session_zone(tz_spark, zone, tmp_path):
    from tahoe.spark import read_delta
    from tahoe.spark.calls import NATIVE_READ_CONF

    p = _versioned(str(tmp_path / "t"))
    want = {10 + v for v in range(AS_OF[zone] + 1)}
    assert _ids(tz_spark.read.format("delta").option("timestampAsOf", NOON).load(p)) == want
    tz_spark.conf.set(NATIVE_READ_CONF, "false")
    try:
        assert _ids(tz_spark.read.format("delta").option("timestampAsOf", NOON).load(p)) == want
    finally:
        tz_spark.conf.unset(NATIVE_READ_CONF)
    assert _ids(read_delta(tz_spark, p, timestamp=NOON)) == want
    assert _ids(tz_spark.sql(f"SELECT id FROM delta.`{p}` TIMESTAMP AS OF '{NOON}'")) == want
    # a string with its own zone is that instant in every session zone: 12:00Z -> version 1
    assert _ids(tz_spark.read.format("delta").option("timestampAsOf", "2024-01-01T12:00:00Z").load(p)) == {10, 11}


def test_change_feed_timestamps_in_the_session_zone(tz_spark, zone, tmp_path):
    """startingTimestamp 05:00 and endingTimestamp NOON (zone-less): the versions committed between
    those instants in the zone — UTC 05:00Z..12:00Z holds version 1 (10:00Z), Los Angeles
    13:00Z..20:00Z version 2 (15:00Z), Kolkata 23:30Z the day before..06:30Z version 0."""
    p = _versioned(str(tmp_path / "t"))
    rows = tz_spark.read.format("delta").option("readChangeFeed", "true") \
        .option("startingTimestamp", "2024-01-01 05:00:00").option("endingTimestamp", NOON).load(p) \
        .select("id", "_commit_version").collect()
    v = {"UTC": 1, "America/Los_Angeles": 2, "Asia/Kolkata": 0}[zone]
    assert sorted((r[0], r[1]) for r in rows) == [(10 + v, v)]


def test_stream_starting_timestamp_in_the_session_zone(tz_spark, zone, tmp_path):
    """The issue's repro: a stream started at a zone-less startingTimestamp begins at the first
    version committed at or after that instant in the session zone (it re-emitted older versions
    in a zone behind UTC and would skip versions in one ahead)."""
    from pyspark.errors import StreamingQueryException

    p = _versioned(str(tmp_path / "t"))
    name = f"tz_stream_{zone.replace('/', '_').lower()}"
    q = tz_spark.readStream.format("delta").option("startingTimestamp", NOON).load(p) \
        .writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    try:
        q.awaitTermination()
    except StreamingQueryException:
        pass
    assert q.exception() is None
    assert sorted(r[0] for r in tz_spark.table(name).collect()) == [10 + v for v in range(STARTING[zone], 4)]
    tz_spark.catalog.dropTempView(name)


# --- OPTIMIZE and replaceWhere on a timestamp partition --------------------------------------------------

def test_optimize_where_and_replace_where_in_the_session_zone(tz_spark, zone, tmp_path):
    """OPTIMIZE ... WHERE ts = NOON compacts the partition of the instant NOON names in the zone;
    a replaceWhere on it replaces that partition only (its rows must match it, read in the zone)."""
    from tahoe.spark import DeltaTable

    p = str(tmp_path / "opt")
    for _ in range(2):   # two files per partition
        tahoe.write_table(p, _rows(), mode="append", partition_by=["ts"], target_file_rows=1)
    m = tz_spark.sql(f"OPTIMIZE delta.`{p}` WHERE ts = timestamp'{NOON}'").collect()[0]["metrics"]
    assert (m["numFilesRemoved"], m["numFilesAdded"]) == (2, 1)
    snap = DeltaLog.for_table(p).snapshot()
    per_ts = {}
    for pv in snap.files_table(["partitionValues"]).column("partitionValues").to_pylist():
        per_ts[dict(pv)["ts"]] = per_ts.get(dict(pv)["ts"], 0) + 1
    compacted = INSTANTS[AT_NOON[zone]].strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    assert per_ts == {INSTANTS[i].strftime("%Y-%m-%dT%H:%M:%S.000000Z"): (1 if INSTANTS[i].strftime(
        "%Y-%m-%dT%H:%M:%S.000000Z") == compacted else 2) for i in INSTANTS}

    q = _table(str(tmp_path / "rw"), "part")
    new = tz_spark.createDataFrame([(99, INSTANTS[AT_NOON[zone]])], "id long, ts timestamp")
    new.write.format("delta").mode("overwrite").option("replaceWhere", f"ts = timestamp'{NOON}'").save(q)
    assert _ids(DeltaTable.forPath(tz_spark, q).toDF()) == ({1, 2, 3, 4} - {AT_NOON[zone]}) | {99}


# --- a DML differential: tahoe on Spark in a non-UTC zone vs delta-rs with its conditions in UTC ---------

@pytest.mark.parametrize("zone_name", ["America/Los_Angeles", "Asia/Kolkata"])
def test_dml_differential_against_delta_rs_in_a_non_utc_zone(tz_spark, zone_name, tmp_path):
    """The same DELETE / UPDATE / MERGE sequence with timestamp conditions: tahoe on Spark in the
    session zone (conditions zone-less, in the zone's wall-clock time) and delta-rs on its own
    copy (the same instants written in UTC, `...Z`) end with the same rows. One row per file, so
    a file pruned in the wrong zone shows."""
    import shutil
    import zoneinfo

    import pyarrow.parquet as pq

    from tests.fixtures.deltars import run_deltars, sorted_rows, source_file
    from tests.spark.test_dml import run_spark

    hours = (2, 8, 12, 16, 20, 23)
    ts = [dt.datetime(2024, 1, 1, h, tzinfo=UTC) for h in hours]
    mine, theirs = str(tmp_path / "tahoe"), str(tmp_path / "rs")
    tahoe.write_table(mine, pa.table({"id": pa.array(range(6), pa.int64()), "v": pa.array([0] * 6, pa.int64()),
                                      "ts": pa.array(ts, pa.timestamp("us", tz="UTC"))}), target_file_rows=1)
    shutil.copytree(mine, theirs)
    source = pa.table({"id": pa.array([1, 4, 9], pa.int64()), "v": pa.array([7, 7, 7], pa.int64()),
                       "ts": pa.array([ts[0], ts[4], ts[5]], pa.timestamp("us", tz="UTC"))})
    src = source_file(source, tmp_path / "work", "source")
    local = zoneinfo.ZoneInfo(zone_name)

    def ops(fmt):
        """The sequence, each instant written by `fmt` (UTC text for delta-rs, zone-less local
        wall-clock text for tahoe in the session zone)."""
        at = lambda h: fmt(dt.datetime(2024, 1, 1, h, tzinfo=UTC))  # noqa: E731
        return [{"op": "delete", "predicate": f"ts < {at(4)}"},
                {"op": "update", "updates": {"v": "v + 1"}, "predicate": f"ts = {at(12)}"},
                {"op": "update", "updates": {"v": "v + 10"}, "predicate": f"ts >= {at(16)}"},
                {"op": "merge", "source": src, "predicate": f"t.id = s.id AND t.ts > {at(10)}", "source_alias": "s",
                 "target_alias": "t", "clauses": [["when_matched_update", {"updates": {"v": "s.v"}}],
                                                  ["when_not_matched_insert_all", {}]]}]

    rs_ops = ops(lambda d: "'" + d.strftime("%Y-%m-%dT%H:%M:%SZ") + "'")
    spark_ops = ops(lambda d: "timestamp'" + d.astimezone(local).strftime("%Y-%m-%d %H:%M:%S") + "'")
    assert spark_ops[0]["predicate"] != rs_ops[0]["predicate"]
    rs = run_deltars([{"path": theirs, "ops": rs_ops}], tmp_path / "work")[0]
    assert rs["error"] is None, rs["error"]
    key = "spark.sql.session.timeZone"
    before = tz_spark.conf.get(key)
    tz_spark.conf.set(key, zone_name)
    try:
        run_spark(tz_spark, mine, spark_ops, tz_spark.createDataFrame(pq.read_table(src).to_pandas()))
    finally:
        tz_spark.conf.set(key, before)
    got = tahoe.Table(mine).to_arrow()
    assert sorted_rows(got, ["id", "v", "ts"]) == sorted_rows(rs["rows"], ["id", "v", "ts"])
    # and by hand: 02:00 deleted; 12:00 +1; 16:00, 20:00, 23:00 +10; MERGE: 4 (20:00 > 10:00) takes
    # v 7, 1 (08:00 is not > 10:00) and 9 are inserted
    assert sorted_rows(got, ["id", "v"]) == [(1, 0), (1, 7), (2, 1), (3, 10), (4, 7), (5, 10), (9, 7)]


# --- the conformance tables read in sessions outside UTC ----------------------------------------------

def _timeish(t: pa.DataType) -> bool:
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return True
    if pa.types.is_struct(t):
        return any(_timeish(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _timeish(t.value_type)
    if pa.types.is_map(t):
        return _timeish(t.key_type) or _timeish(t.item_type)
    return False


def _time_tables() -> list:
    """The conformance tables with expected rows holding a date or timestamp anywhere."""
    from tests.conftest import MANIFEST, conformance_params, read_expected

    entries = [e for e in MANIFEST if e["expect"] == "rows"
               and any(_timeish(f.type) for f in read_expected(e).schema)]
    return conformance_params(entries, [e["name"] for e in entries])


def _log_json(table: Path) -> list[dict]:
    return [json.loads(line) for p in sorted((table / "_delta_log").glob("*.json"))
            for line in p.read_text().splitlines() if line.strip()]


def _in_zone(expected: pa.Table, table: Path, zone: str) -> pa.Table:
    """The rows a session in `zone` reads, from the reference's rows (read in UTC): a timestamp
    partition column whose log values are zone-less (`2021-09-08 11:11:11`) holds wall-clock
    times of the session's zone — delta-spark casts them with the session zone —, so each of
    its instants moves to the same wall clock in `zone` (stdlib zoneinfo). Everything else,
    timestamp_ntz partitions included, reads the same in every zone."""
    import re
    from zoneinfo import ZoneInfo

    actions = _log_json(table)
    meta = [a["metaData"] for a in actions if "metaData" in a][-1]
    fields = {f["name"]: f for f in json.loads(meta["schemaString"])["fields"]}
    shifted = [c for c in meta["partitionColumns"] if fields[c]["type"] == "timestamp"]
    if not shifted:
        return expected
    raw = [v for a in actions if "add" in a for v in (a["add"].get("partitionValues") or {}).values()
           if v is not None]
    zone_less = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?$")
    ts_like = [v for v in raw if re.match(r"^\d{4}-\d\d-\d\d[ T]\d\d:", v)]
    assert ts_like and all(zone_less.match(v) for v in ts_like), f"{table}: partition values {ts_like}"
    tz = ZoneInfo(zone)
    for c in shifted:
        col = expected.column(c)
        moved = [None if v is None else v.replace(tzinfo=None).replace(tzinfo=tz).astimezone(UTC)
                 for v in col.to_pylist()]
        expected = expected.set_column(expected.schema.get_field_index(c), c, pa.array(moved, col.type))
    return expected


@pytest.mark.parametrize("entry", _time_tables())
def test_conformance_tables_with_dates_and_timestamps_read_outside_utc(tz_spark, entry):
    """Every conformance table holding a date or timestamp, read on Spark in Los Angeles and
    Kolkata sessions (the native scan in both, the Python data source in Kolkata): the
    reference's rows, with only zone-less timestamp partition values moved to the session's
    wall clock (`_in_zone`). A timestamp_ntz partition value read in a non-UTC session came out
    shifted by the zone's offset before (a naive datetime made a TIMESTAMP literal)."""
    from tahoe.spark.calls import NATIVE_READ_CONF
    from tests.conftest import GOLDEN, assert_rows_equal, read_expected

    table = GOLDEN / entry["table"]
    expected = read_expected(entry)
    key = "spark.sql.session.timeZone"
    before = tz_spark.conf.get(key)
    try:
        for zone, native in (("America/Los_Angeles", True), ("Asia/Kolkata", True), ("Asia/Kolkata", False)):
            tz_spark.conf.set(key, zone)
            tz_spark.conf.set(NATIVE_READ_CONF, str(native).lower())
            got = tz_spark.read.format("delta").load(str(table)).toArrow()
            assert_rows_equal(got, _in_zone(expected, table, zone), f"{entry['name']} in {zone} (native {native})")
    finally:
        tz_spark.conf.set(key, before)
        tz_spark.conf.unset(NATIVE_READ_CONF)
