"""Data skipping: a file is kept iff it may hold a matching row. Hand-written stats and
partition values with hand-derived answers, and tables whose contents the test knows (every file
holding a match must be kept — checked against the rows, evaluated in plain Python — and the
files the bounds rule out are dropped)."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

import tahoe
from tahoe.expressions import file_mask, parse
from tahoe.read import ArrowFileReader
from tahoe.log import DeltaLog
from tahoe.protocol.schema import (
    DATE, DOUBLE, LONG, STRING, TIMESTAMP, StructField, StructType,
)

SCHEMA = StructType([
    StructField("p", STRING), StructField("day", DATE), StructField("x", LONG), StructField("s", STRING),
    StructField("f", DOUBLE), StructField("ts", TIMESTAMP),
    StructField("st", StructType([StructField("k", LONG)])),
])
PARTS = ["p", "day"]


def stats(n, mins=None, maxs=None, nulls=None, tight=None):
    d = {"numRecords": n, "minValues": mins or {}, "maxValues": maxs or {}, "nullCount": nulls or {}}
    if tight is not None:
        d["tightBounds"] = tight
    return json.dumps(d)


# name → (partition values, stats)
FILES = {
    "a": ({"p": "a", "day": "2024-01-01"}, stats(10, {"x": 1, "s": "apple", "f": 0.5, "ts": "2024-01-01T10:00:00.000Z",
                                                     "st": {"k": 1}},
                                                 {"x": 10, "s": "banana", "f": 2.5, "ts": "2024-01-01T12:00:00.000Z",
                                                  "st": {"k": 5}},
                                                 {"x": 0, "s": 2, "f": 0, "ts": 0, "st": {"k": 0}})),
    "b": ({"p": "b", "day": "2024-01-02"}, stats(5, {"x": 11, "s": "cherry", "f": -1.0}, {"x": 20, "s": "cherry", "f": "NaN"},
                                                 {"x": 5 - 5, "s": 0, "f": 0})),
    "c": ({"p": None, "day": "2024-01-02"}, stats(4, {}, {}, {"x": 4, "s": 4})),            # x, s all null
    "d": ({"p": "a", "day": "2024-01-03"}, None),                                          # no stats
    "e": ({"p": "b", "day": "2024-01-03"}, stats(6, {"x": 15}, {"x": 30}, {"x": 3}, tight=False)),   # wide, some nulls
    "f": ({"p": "c", "day": "2024-01-04"}, stats(0)),                                      # empty file
}


def files_table():
    names = list(FILES)
    pvs = [list(FILES[n][0].items()) for n in names]
    return names, pa.table({"path": names, "partitionValues": pa.array(pvs, pa.map_(pa.string(), pa.string())),
                            "stats": [FILES[n][1] for n in names]})


def kept(sql, time_zone="UTC"):
    names, t = files_table()
    mask = file_mask(parse(sql), t, SCHEMA, PARTS, time_zone=time_zone)
    return "".join(n for n, m in zip(names, mask) if m)


@pytest.mark.parametrize("sql, expected", [
    # partition columns: exact
    ("p = 'a'", "ad"), ("p <> 'a'", "bef"), ("p IS NULL", "c"), ("p IN ('b', 'c')", "bef"), ("p > 'a'", "bef"),
    ("day = '2024-01-02'", "bc"), ("day >= DATE '2024-01-03'", "def"), ("day < '2024-01-02' OR p = 'c'", "af"),
    ("upper(p) = 'B'", "be"), ("year(day) = 2024 AND day(day) = 4", "f"), ("coalesce(p, 'z') = 'z'", "c"),
    # data columns, stats bounds; an all-null column matches no comparison; an empty file nothing
    ("x = 10", "ad"), ("x = 11", "bd"), ("x > 20", "de"), ("x >= 20", "bde"), ("x < 1", "d"), ("x <= 1", "ad"),
    ("x BETWEEN 12 AND 14", "bd"), ("x IN (0, 21)", "de"), ("x IN (5, NULL)", "ad"), ("NOT (x < 11)", "bde"),
    ("x <> 7", "abde"),
    ("x IS NULL", "cde"), ("x IS NOT NULL", "abde"), ("s IS NULL", "acde"), ("s IS NOT NULL", "abde"),
    ("x <=> NULL", "cde"), ("x <=> 25", "de"),
    # strings: bounds are prefixes, so "all equal" is never proven (e has no stats for s)
    ("s = 'cherry'", "bde"), ("s <> 'cherry'", "abde"), ("s > 'c'", "bde"), ("s LIKE 'ba%'", "ade"),
    ("s LIKE 'ch_rry'", "bde"), ("startswith(s, 'z')", "de"), ("s LIKE '%rry'", "abde"),
    # floats: no max is a bound (NaN is above everything, and writers that leave NaN out of min/max
    # — delta-rs, Arrow — give a finite max for a file holding NaN); the min still is (c, d, e: no f stats)
    ("f > 100", "abcde"), ("f < -0.5", "bcde"), ("f < -2", "cde"), ("f = 0.5", "abcde"),
    # timestamps: bounds widened by a millisecond; strings read in the session time zone
    ("ts > '2024-01-01 12:00:00'", "abcde"), ("ts > '2024-01-01 12:00:01'", "bcde"),
    ("ts < '2024-01-01 10:00:00'", "abcde"), ("ts < '2024-01-01 09:59:59'", "bcde"),
    ("ts > '2024-01-01 12:30:00'", "bcde"), ("ts > '2024-01-01 13:30:00'", "bcde"),
    ("ts BETWEEN '2024-01-01 12:30:00' AND '2024-01-02 00:00:00' OR p = 'a'", "abcde"),
    # nested field stats
    ("st.k > 5", "bcde"), ("st.k = 3", "abcde"),
    # logic, constants, unknowns
    ("p = 'a' AND x > 5", "ad"), ("p = 'a' OR x > 25", "ade"), ("NOT (p = 'a' OR x > 5)", ""),
    ("NOT (p = 'a' OR x > 15)", "be"),
    ("TRUE", "abcdef"), ("FALSE", ""), ("NULL", ""), ("x > NULL", ""), ("1 = 1 AND p = 'c'", "f"),
    ("nope = 1", "abcdef"), ("x + 1 > 100", "abcdef"), ("soundex(s) = 'A'", "abcdef"),
])
def test_hand_computed(sql, expected):
    assert kept(sql) == expected


def test_session_time_zone_moves_timestamp_literals():
    # file a's ts ends at 12:00 UTC (+1 ms): 13:00 in Paris is 12:00 UTC
    assert kept("ts > '2024-01-01 13:00:00'") == "bcde"
    assert kept("ts > '2024-01-01 13:00:00'", time_zone="Europe/Paris") == "abcde"
    assert kept("ts > '2024-01-01 13:00:01'", time_zone="Europe/Paris") == "bcde"


def test_column_mapping_reads_physical_names():
    schema = StructType([
        StructField("part", STRING, metadata={"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-p"}),
        StructField("v", LONG, metadata={"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "col-v"}),
    ])
    t = pa.table({"partitionValues": pa.array([[("col-p", "x")], [("col-p", "y")]], pa.map_(pa.string(), pa.string())),
                  "stats": [stats(3, {"col-v": 1}, {"col-v": 3}), stats(3, {"col-v": 7}, {"col-v": 9})]})
    assert list(file_mask(parse("v > 5"), t, schema, ["part"], "name")) == [False, True]
    assert list(file_mask(parse("PART = 'x'"), t, schema, ["part"], "name")) == [True, False]


# --- tables whose contents the test knows ----------------------------------------------------

ROWS = [{"id": i, "grp": "even" if i % 20 < 10 else "odd", "v": None if i % 7 == 0 else float(i) / 2,
         "name": f"n{i:03d}", "day": dt.date(2024, 1, 1 + i // 25)} for i in range(100)]

PREDICATES = [
    ("id >= 42 AND id < 47", lambda r: 42 <= r["id"] < 47),
    ("id = 99", lambda r: r["id"] == 99),
    ("id < 0", lambda r: False),
    ("grp = 'odd' AND id < 30", lambda r: r["grp"] == "odd" and r["id"] < 30),
    ("v IS NULL AND id > 90", lambda r: r["v"] is None and r["id"] > 90),
    ("v > 45", lambda r: r["v"] is not None and r["v"] > 45),
    ("name LIKE 'n05%'", lambda r: r["name"].startswith("n05")),
    ("day = '2024-01-03' OR id IN (1, 2)", lambda r: r["day"] == dt.date(2024, 1, 3) or r["id"] in (1, 2)),
    ("NOT (id BETWEEN 10 AND 89)", lambda r: not 10 <= r["id"] <= 89),
]


@pytest.fixture(scope="module")
def known_table(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("skip") / "t")
    data = pa.Table.from_pylist(ROWS, pa.schema([("id", pa.int64()), ("grp", pa.string()), ("v", pa.float64()),
                                                 ("name", pa.string()), ("day", pa.date32())]))
    tahoe.write_table(path, data, partition_by=["grp"], target_file_rows=10)
    snap = DeltaLog.for_table(path).snapshot()
    files = snap.files_table(["path", "partitionValues", "stats"])
    reader = ArrowFileReader(snap.store, snap.table_root, snap.schema, snap.partition_columns)
    contents = {p: reader.read_file(p, dict(pv)).to_pylist()
                for p, pv in zip(files.column("path").to_pylist(), files.column("partitionValues").to_pylist())}
    return snap, files, contents


@pytest.mark.parametrize("sql, match", PREDICATES, ids=[p[0] for p in PREDICATES])
def test_every_file_with_a_match_is_kept_and_ranges_prune(known_table, sql, match):
    snap, files, contents = known_table
    assert len(contents) == 10 and sum(len(r) for r in contents.values()) == 100
    mask = file_mask(parse(sql), files, snap.schema, snap.partition_columns, snap.column_mapping_mode)
    kept = {p for p, m in zip(files.column("path").to_pylist(), mask) if m}
    with_match = {p for p, rows in contents.items() if any(match(r) for r in rows)}
    assert with_match <= kept, sql
    if sql == "v > 45":
        # a double's max is no bound (a NaN above it may hide in a file whose writer left NaN out of
        # min/max, as delta-rs does): every file with a non-null v stays — all ten here
        assert len(kept) == 10, sql
        return
    # each file holds ten consecutive ids of one group (ids 10k..10k+9), so every predicate above
    # bounding id, name or day (both sorted with id) prunes to exactly those files
    assert kept == with_match, sql


def test_nan_hides_behind_a_finite_max(tmp_path):
    """delta-rs (like Arrow and parquet-rs) leaves NaN out of a float column's min/max: a file
    holding 0.1, NaN and 2.5 gets max 2.5. Spark SQL puts NaN above every value, so `x > 1000` and
    `x = NaN` match the NaN row: the file must stay. The min still bounds (`x < 0`: dropped, no
    comparison with a number below the min is true for NaN), and the max bounds the numbers:
    `x = 1000` and `x IN (7, 1000.5)` are false for NaN too, so the file goes. Oracle: delta-rs's
    own stats (read from the log it wrote), Spark SQL's NaN ordering, and Spark itself (the
    rows `spark.sql` gives for each predicate, tests/spark/test_dml_fuzz.py's NaN test)."""
    from tests.fixtures.deltars import run_deltars, source_file

    path = str(tmp_path / "t")
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "x": pa.array([0.1, float("nan"), 2.5])})
    (w,) = run_deltars([{"path": path, "ops": [{"op": "write", "source": source_file(rows, tmp_path / "src", "r")}],
                         "read": False}], tmp_path / "rs")
    assert w["error"] is None
    snap = DeltaLog.for_table(path).snapshot()
    files = snap.files_table(["path", "partitionValues", "stats"])
    (st,) = files.column("stats").to_pylist()
    assert json.loads(st)["maxValues"]["x"] == 2.5          # NaN left out by the writer
    for sql, keep in [("x > 1000", True), ("x = CAST('NaN' AS DOUBLE)", True), ("x >= 2.6", True), ("x < 0", False),
                      ("x = -1", False),
                      # the max still bounds the numbers: NaN = 1000, NaN IN (...) and NaN < 1000 are false
                      ("x = 1000", False), ("x IN (7, 1000.5)", False), ("x IN (7, 2.5)", True),
                      ("1000 = x", False), ("1000 < x", True), ("1000 > x", True), ("NOT (x <= 1000)", True),
                      ("x BETWEEN 5 AND 10", True), ("x <> 2.5", True), ("x = '1000'", False),
                      ("CAST(x AS FLOAT) = 1000", False), ("CAST(x AS INT) < 0", True), ("x + 0 > 1000", True),
                      # ±Infinity: NaN is above Infinity too
                      ("x >= CAST('Infinity' AS DOUBLE)", True), ("x = CAST('Infinity' AS DOUBLE)", False)]:
        assert list(file_mask(parse(sql), files, snap.schema, snap.partition_columns)) == [keep], sql
