"""Writing checkpoints and cleaning up the log: state round trips (single and multi-part, DVs,
column mapping, v2 tables), the parquet schema delta-spark writes, typed stats/partition values,
tombstone retention, `_last_checkpoint`, crash safety, the post-commit hook, log retention, and
delta-rs reading our checkpoints."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.parquet as pq
import pytest

import tahoe
from tahoe import DeltaLog, Table
from tahoe.errors import InvalidTableOperationError, VersionNotFoundError
from tahoe.protocol.intervals import parse_interval_ms
from tahoe.log.checkpoint_schema import checkpoint_schema
from tahoe.log.checkpoint_policy import checkpoint_if_needed
from tahoe.log.checkpoints import write_checkpoint
from tahoe.log.metadata_cleanup import cleanup_expired_logs
from tahoe.log.last_checkpoint import read_last_checkpoint
from tahoe.protocol import last_checkpoint_checksum as checksum
from tests.conftest import GOLDEN, assert_rows_equal, manifest_entry, read_expected

DAY_MS = 86_400_000
NOW_MS = int(time.time() * 1000)


# --- helpers -----------------------------------------------------------------------------------

def copy_table(name: str, dst: Path) -> str:
    """A writable copy of a conformance table (the originals are read-only)."""
    src = GOLDEN / manifest_entry(name)["table"]
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    for d, dirs, _ in os.walk(dst):
        os.chmod(d, 0o755)
    return str(dst)


def _schema(*fields):
    return json.dumps({"type": "struct", "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": md or {}} for n, t, md in fields]})


def _meta(schema, partition_columns=(), conf=None):
    return {"metaData": {"id": "tid", "format": {"provider": "parquet", "options": {}},
                         "schemaString": schema, "partitionColumns": list(partition_columns),
                         "configuration": conf or {}, "createdTime": 1}}


def _add(path, pv=None, stats=None, dv=None, size=10, tags=None):
    a = {"path": path, "partitionValues": pv or {}, "size": size, "modificationTime": 7, "dataChange": True}
    if stats is not None:
        a["stats"] = stats
    if dv is not None:
        a["deletionVector"] = dv
    if tags is not None:
        a["tags"] = tags
    return {"add": a}


def _remove(path, ts, pv=None, dv=None):
    r = {"path": path, "deletionTimestamp": ts, "dataChange": True, "extendedFileMetadata": True,
         "partitionValues": pv or {}, "size": 10}
    if dv is not None:
        r["deletionVector"] = dv
    return {"remove": r}


def commit(root, version, *actions, mtime_ms=None):
    p = Path(root) / "_delta_log" / f"{version:020d}.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    if mtime_ms is not None:
        os.utime(p, (mtime_ms / 1000, mtime_ms / 1000))
    return p


def set_properties(root: str, props: dict) -> int:
    """Commit a metaData change adding `props`; returns the new version."""
    snap = DeltaLog.for_table(root).snapshot()
    md = snap.metadata.to_dict()
    md["configuration"] = {**md["configuration"], **props}
    commit(root, snap.version + 1, {"metaData": md})
    return snap.version + 1


def file_state(snap):
    cols = ["path", "partitionValues", "size", "stats", "tags", "deletionVector", "baseRowId",
            "defaultRowCommitVersion"]
    return sorted(map(repr, snap.files_table(cols).to_pylist()))


def protocol_key(p):
    return (p.min_reader_version, p.min_writer_version, sorted(p.reader_features or []),
            sorted(p.writer_features or []))


def capture(snap, now_ms=None):
    """Everything a checkpoint must preserve, materialized (snapshots read files lazily). With
    `now_ms`, only the tombstones within the table's retention at that time."""
    tomb = snap.tombstones_table(["path", "deletionTimestamp", "partitionValues", "size", "deletionVector"])
    if now_ms is not None:
        keep_ms = parse_interval_ms(snap.configuration.get("delta.deletedFileRetentionDuration", "interval 1 week"))
        tomb = tomb.filter(pa.compute.greater_equal(tomb.column("deletionTimestamp"), now_ms - keep_ms))
    return {
        "version": snap.version, "protocol": protocol_key(snap.protocol), "metadata": snap.metadata,
        "txns": snap.set_transactions, "domains": snap.domain_metadata, "files": file_state(snap),
        "tombstones": sorted(map(repr, tomb.to_pylist())),
    }


def assert_same_state(before, after, now_ms=None):
    """`after` (read from a checkpoint) holds the state of `before` (a snapshot or a `capture`)."""
    expected = before if isinstance(before, dict) else capture(before, now_ms)
    got = capture(after)
    for key in expected:
        assert got[key] == expected[key], key


def delta_rs(paths: list[str], rows: bool = False) -> dict[str, dict]:
    """Open tables with delta-rs in a subprocess (it can abort at exit): version, file count and
    optionally the row count, per path."""
    script = r"""
import json, os, sys
from deltalake import DeltaTable
rows = sys.argv[1] == "1"
for p in sys.argv[2:]:
    try:
        t = DeltaTable(p)
        out = {"version": t.version(), "files": len(t.file_uris())}
        if rows:
            out["rows"] = t.to_pyarrow_table().num_rows
    except Exception as e:
        out = {"error": str(e)[:300]}
    print(json.dumps([p, out]), flush=True)
os._exit(0)
"""
    res = subprocess.run([sys.executable, "-c", script, "1" if rows else "0", *paths],
                         capture_output=True, text=True, timeout=120)
    out = dict(json.loads(line) for line in res.stdout.splitlines() if line.startswith("["))
    assert set(out) == set(paths), res.stderr[-2000:]
    return out


@pytest.fixture
def simple(tmp_path):
    """Partitioned log-only table: 12 adds over 3 partitions, 2 of them removed, txns, a domain."""
    root = str(tmp_path / "simple")
    schema = _schema(("id", "long", None), ("p", "string", None))
    commit(root, 0, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["domainMetadata"]}},
           _meta(schema, ["p"]))
    for v in range(1, 5):
        commit(root, v, *[_add(f"p={k}/f{v}-{k}.parquet", {"p": str(k)},
                              stats=json.dumps({"numRecords": v, "minValues": {"id": v}, "maxValues": {"id": v * 10},
                                                "nullCount": {"id": 0}})) for k in range(3)],
               {"txn": {"appId": f"app{v % 2}", "version": v, "lastUpdated": 5}})
    commit(root, 5, _remove("p=0/f1-0.parquet", NOW_MS - DAY_MS, {"p": "0"}),
           _remove("p=1/f1-1.parquet", NOW_MS - 30 * DAY_MS, {"p": "1"}),
           {"domainMetadata": {"domain": "user.x", "configuration": '{"a":1}', "removed": False}})
    return root


# --- round trips -------------------------------------------------------------------------------

ROUND_TRIP_TABLES = [
    "125-iterator-bug", "basic-with-inserts-deletes-checkpoint", "dv-partitioned-with-checkpoint",
    "dv-with-columnmapping", "log-replay-dv-key-cases", "multi-part-checkpoint", "only-checkpoint-files",
    "data-reader-partition-values", "data-reader-timestamp_ntz-id-mode", "table-with-columnmapping-mode-name",
    "data-skipping-basic-stats-all-types-columnmapping-id", "basic-decimal-table", "data-reader-escaped-chars",
]


@pytest.mark.conformance
@pytest.mark.parametrize("name", ROUND_TRIP_TABLES)
def test_conformance_table_round_trip(tmp_path, name):
    root = copy_table(name, tmp_path / "t")
    log = DeltaLog.for_table(root)
    before = log.snapshot()
    lc = write_checkpoint(log, now_ms=0)     # clock at 0: every tombstone is within retention
    assert lc.version == before.version and lc.parts is None
    assert lc.num_of_add_files == before.num_files
    after = DeltaLog.for_table(root).snapshot()
    assert after.segment.checkpoint_version == before.version and not after.segment.commits
    assert_same_state(before, after)
    entry = manifest_entry(name)
    if entry["expect"] == "rows":
        assert_rows_equal(Table(root).to_arrow(), read_expected(entry), name)


@pytest.mark.conformance
def test_checkpoint_schema_matches_delta_spark(tmp_path):
    """Same columns, field names and types as the checkpoint delta-spark wrote for this table."""
    root = copy_table("dv-partitioned-with-checkpoint", tmp_path / "t")
    ref = pq.ParquetFile(Path(root) / "_delta_log" / "00000000000000000010.checkpoint.parquet").schema_arrow
    lc = write_checkpoint(DeltaLog.for_table(root), version=10)   # exists: kept as it is
    assert lc.version == 10
    log = DeltaLog.for_table(root)
    write_checkpoint(log)  # version 15
    ours = pq.ParquetFile(Path(root) / "_delta_log" / "00000000000000000015.checkpoint.parquet").schema_arrow

    def shape(t):
        if pa.types.is_struct(t):
            return [(t.field(i).name, shape(t.field(i).type)) for i in range(t.num_fields)]
        if pa.types.is_map(t):
            return ("map", shape(t.key_type), shape(t.item_type))
        if pa.types.is_list(t):
            return ("list", shape(t.value_type))
        return str(t)

    assert ours.names == ref.names
    for name in ref.names:
        assert shape(ours.field(name).type) == shape(ref.field(name).type), name
    rows = pq.read_table(Path(root) / "_delta_log" / "00000000000000000015.checkpoint.parquet").to_pylist()
    adds = [r["add"] for r in rows if r["add"]]
    assert adds and all(a["dataChange"] is False for a in adds)
    assert all(a["partitionValues_parsed"]["part"] == int(dict(a["partitionValues"])["part"]) for a in adds)
    assert all(r["remove"]["dataChange"] is False for r in rows if r["remove"])


def test_version_must_exist(simple):
    log = DeltaLog.for_table(simple)
    with pytest.raises(VersionNotFoundError):
        write_checkpoint(log, version=6)
    with pytest.raises(VersionNotFoundError):
        write_checkpoint(log, version=-1)


def test_older_version_and_last_checkpoint_never_goes_back(simple):
    log = DeltaLog.for_table(simple)
    write_checkpoint(log, version=4)
    assert read_last_checkpoint(log.store, log.log_dir).version == 4
    write_checkpoint(log, version=2)
    assert read_last_checkpoint(log.store, log.log_dir).version == 4
    for v in (2, 4, 5):
        before = DeltaLog.for_table(simple)
        assert_same_state(_without_checkpoints(simple, v), before.snapshot(version=v))


def _without_checkpoints(root, version):
    """The snapshot at `version` replayed from JSON only (checkpoints hidden in a copy)."""
    dst = Path(root).parent / f"json-only-{version}-{time.monotonic_ns()}"
    shutil.copytree(root, dst)
    for f in (dst / "_delta_log").iterdir():
        if "checkpoint" in f.name:
            f.unlink()
    return DeltaLog.for_table(str(dst)).snapshot(version=version)


# --- multi-part --------------------------------------------------------------------------------

def test_multi_part_round_trip_and_layout(simple):
    log = DeltaLog.for_table(simple)
    before = log.snapshot()
    lc = write_checkpoint(log, parts=3, now_ms=NOW_MS)
    assert lc.parts == 3 and lc.size == 2 + 2 + 1 + 10 + 1   # protocol, metaData, 2 txns, domain, adds, 1 tombstone
    names = sorted(p.name for p in (Path(simple) / "_delta_log").glob("*.checkpoint.*.parquet"))
    assert names == [f"00000000000000000005.checkpoint.{i:010d}.0000000003.parquet" for i in (1, 2, 3)]
    parts = [pq.read_table(Path(simple) / "_delta_log" / n) for n in names]
    assert len({p.schema for p in parts}) == 1
    first = parts[0].to_pylist()
    assert first[0]["protocol"] and first[1]["metaData"]
    for p in parts[1:]:
        assert all(r["add"] or r["remove"] for r in p.to_pylist())
    # clustered by path (each path in one part), sorted by path within a part
    part_of_path = {}
    for i, p in enumerate(parts):
        seq = [r["add"]["path"] if r["add"] else r["remove"]["path"]
               for r in p.to_pylist() if r["add"] or r["remove"]]
        assert seq == sorted(seq)
        for path in seq:
            assert part_of_path.setdefault(path, i) == i
    sizes = [p.num_rows for p in parts]
    assert sum(sizes) == lc.size
    after = DeltaLog.for_table(simple).snapshot()
    assert len(after.segment.checkpoint.files) == 3
    assert_same_state(before, after, now_ms=NOW_MS)


def test_multi_part_is_deterministic(simple, tmp_path):
    other = tmp_path / "copy"
    shutil.copytree(simple, other)
    write_checkpoint(DeltaLog.for_table(simple), parts=2, now_ms=NOW_MS)
    write_checkpoint(DeltaLog.for_table(str(other)), parts=2, now_ms=NOW_MS)
    for i in (1, 2):
        n = f"00000000000000000005.checkpoint.{i:010d}.0000000002.parquet"
        a = pq.read_table(Path(simple) / "_delta_log" / n).to_pylist()
        b = pq.read_table(other / "_delta_log" / n).to_pylist()
        assert a == b


def test_part_size_property(simple):
    v = set_properties(simple, {"delta.checkpoint.partSize": "5"})
    lc = write_checkpoint(DeltaLog.for_table(simple), now_ms=NOW_MS)
    assert lc.version == v and lc.parts == 3  # 10 adds + 1 tombstone = 11 file actions / 5
    assert read_last_checkpoint(*_store(simple)).parts == 3


def _store(root):
    log = DeltaLog.for_table(root)
    return log.store, log.log_dir


# --- typed columns -----------------------------------------------------------------------------

def test_stats_parsed_and_partition_values_parsed_typed(tmp_path):
    root = str(tmp_path / "typed")
    schema = _schema(("i", "integer", None), ("l", "long", None), ("d", "double", None), ("s", "string", None),
                     ("dec", "decimal(10,2)", None), ("dt", "date", None), ("ts", "timestamp", None),
                     ("ntz", "timestamp_ntz", None), ("b", "boolean", None),
                     ("st", {"type": "struct", "fields": [{"name": "x", "type": "short", "nullable": True, "metadata": {}},
                                                          {"name": "arr", "type": {"type": "array", "elementType": "long", "containsNull": True},
                                                           "nullable": True, "metadata": {}}]}, None),
                     ("pi", "integer", None), ("pd", "date", None), ("pts", "timestamp", None), ("ps", "string", None))
    commit(root, 0, {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["timestampNtz"],
                                  "writerFeatures": ["timestampNtz"]}},
           _meta(schema, ["pi", "pd", "pts", "ps"], {"delta.checkpoint.writeStatsAsStruct": "true"}))
    stats = {"numRecords": 4,
             "minValues": {"i": -1, "l": 5, "d": 1.5, "s": "a", "dec": 12.34, "dt": "2021-01-02",
                           "ts": "2021-09-08T11:11:11.123Z", "ntz": "2021-09-08T11:11:11.123", "st": {"x": 3}},
             "maxValues": {"i": 9, "l": 50, "d": 2.5, "s": "z", "dec": 99.99, "dt": "2021-12-31",
                           "ts": "2021-09-09T00:00:00.000Z", "ntz": "2022-01-01T00:00:00.000", "st": {"x": 4}},
             "nullCount": {"i": 0, "l": 1, "d": 0, "s": 0, "dec": 0, "dt": 0, "ts": 0, "ntz": 0, "b": 2,
                           "st": {"x": 0, "arr": 1}}}
    pv = {"pi": "7", "pd": "2020-02-29", "pts": "2021-09-08 11:11:11", "ps": "a b"}
    pv_null = {"pi": None, "pd": None, "pts": None, "ps": None}
    commit(root, 1, _add("f1.parquet", pv, json.dumps(stats)), _add("f2.parquet", pv_null, None),
           _add("f3.parquet", pv, json.dumps({"numRecords": 1, "minValues": {"d": "NaN"}, "maxValues": {"d": "Infinity"}})))
    reordered = {"ps": "z", "pts": "", "pi": "-3", "pd": "1999-12-31"}   # keys in another order
    commit(root, 2, _add("f4.parquet", reordered, None))
    log = DeltaLog.for_table(root)
    before = log.snapshot()
    write_checkpoint(log)
    t = pq.read_table(Path(root) / "_delta_log" / "00000000000000000002.checkpoint.parquet")
    add_t = t.schema.field("add").type
    sp = add_t.field("stats_parsed").type
    assert [sp.field(i).name for i in range(sp.num_fields)] == ["numRecords", "minValues", "maxValues", "nullCount"]
    mv = sp.field("minValues").type
    assert mv.field("dec").type == pa.decimal128(10, 2) and mv.field("dt").type == pa.date32()
    assert mv.field("ts").type == pa.timestamp("us", tz="UTC") and mv.field("ntz").type == pa.timestamp("us")
    assert mv.get_field_index("b") < 0 and mv.field("st").type == pa.struct([("x", pa.int16())])
    nc = sp.field("nullCount").type
    assert nc.field("b").type == pa.int64() and nc.field("st").type.field("arr").type == pa.int64()
    assert mv.get_field_index("pi") < 0   # partition columns have no stats
    adds = {r["add"]["path"]: r["add"] for r in t.to_pylist() if r["add"]}
    s1 = adds["f1.parquet"]["stats_parsed"]
    assert s1["numRecords"] == 4 and s1["minValues"]["dec"] == Decimal("12.34")
    assert s1["minValues"]["dt"] == dt.date(2021, 1, 2)
    assert s1["minValues"]["ts"] == dt.datetime(2021, 9, 8, 11, 11, 11, 123000, tzinfo=dt.timezone.utc)
    assert s1["maxValues"]["ntz"] == dt.datetime(2022, 1, 1)
    assert s1["nullCount"]["st"] == {"x": 0, "arr": 1} and s1["nullCount"]["b"] == 2
    assert adds["f2.parquet"]["stats_parsed"] is None
    import math
    assert math.isnan(adds["f3.parquet"]["stats_parsed"]["minValues"]["d"])  # the Python fallback
    assert adds["f3.parquet"]["stats_parsed"]["maxValues"]["d"] == math.inf
    pvp = adds["f1.parquet"]["partitionValues_parsed"]
    assert pvp == {"pi": 7, "pd": dt.date(2020, 2, 29),
                   "pts": dt.datetime(2021, 9, 8, 11, 11, 11, tzinfo=dt.timezone.utc), "ps": "a b"}
    assert adds["f2.parquet"]["partitionValues_parsed"] == {"pi": None, "pd": None, "pts": None, "ps": None}
    assert adds["f4.parquet"]["partitionValues_parsed"] == {"pi": -3, "pd": dt.date(1999, 12, 31), "pts": None, "ps": "z"}
    assert_same_state(before, DeltaLog.for_table(root).snapshot())


@pytest.mark.conformance
def test_column_mapping_uses_physical_names(tmp_path):
    root = copy_table("dv-with-columnmapping", tmp_path / "t")
    set_properties(root, {"delta.checkpoint.writeStatsAsStruct": "true"})
    log = DeltaLog.for_table(root)
    before = log.snapshot()
    schema = checkpoint_schema(before)
    add_t = schema.field("add").type
    phys = {f.name: f.metadata["delta.columnMapping.physicalName"] for f in before.schema.fields}
    assert [add_t.field("partitionValues_parsed").type.field(0).name] == [phys["part"]]
    mv = add_t.field("stats_parsed").type.field("minValues").type
    assert {mv.field(i).name for i in range(mv.num_fields)} == {phys["col1"], phys["col2"]}
    assert add_t.field("stats_parsed").type.get_field_index("tightBounds") >= 0   # DV table
    write_checkpoint(log, now_ms=NOW_MS)
    rows = pq.read_table(Path(root) / "_delta_log" / f"{before.version:020d}.checkpoint.parquet").to_pylist()
    parsed = [r["add"]["stats_parsed"] for r in rows if r["add"] and r["add"]["stats"]]
    assert parsed and all(p["numRecords"] is not None and p["minValues"][phys["col1"]] is not None for p in parsed)
    assert_same_state(before, DeltaLog.for_table(root).snapshot(), now_ms=NOW_MS)


def test_write_stats_as_json_false_omits_stats(simple):
    set_properties(simple, {"delta.checkpoint.writeStatsAsJson": "false", "delta.checkpoint.writeStatsAsStruct": "false"})
    write_checkpoint(DeltaLog.for_table(simple), now_ms=NOW_MS)
    add_t = pq.ParquetFile(Path(simple) / "_delta_log" / "00000000000000000006.checkpoint.parquet").schema_arrow.field("add").type
    names = {add_t.field(i).name for i in range(add_t.num_fields)}
    assert "stats" not in names and "partitionValues_parsed" not in names and "stats_parsed" not in names
    snap = DeltaLog.for_table(simple).snapshot()
    assert snap.num_files == 10 and set(snap.files_table(["path", "stats"]).column("stats").to_pylist()) == {None}


@pytest.mark.conformance
def test_v2_checkpoint_policy_tables_get_uuid_named_checkpoints_with_sidecars(tmp_path):
    """delta-spark's table (delta.checkpointPolicy=v2): tahoe's checkpoint is a UUID-named JSON
    file whose file actions live in the sidecars asked for; with the policy set back to classic
    it is one classic-named file following the V2 spec (checkpointMetadata inline), never
    multi-part. Oracle: the state delta-spark's own checkpoint + commits replay to."""
    root = copy_table("v2-checkpoint-parquet", tmp_path / "t")
    log = DeltaLog.for_table(root)
    before = log.snapshot()
    expected = capture(before, NOW_MS)
    lc = write_checkpoint(log, parts=3, now_ms=NOW_MS)
    assert lc.parts is None and lc.v2_checkpoint_file.endswith(".json")
    logdir = Path(root) / "_delta_log"
    lines = [json.loads(x) for x in (logdir / lc.v2_checkpoint_file).read_text().splitlines()]
    assert list(lines[0]) == ["checkpointMetadata"] and lines[0]["checkpointMetadata"]["version"] == before.version
    sidecars = [x["sidecar"]["path"] for x in lines if "sidecar" in x]
    assert len(sidecars) == 3 and all((logdir / "_sidecars" / name).exists() for name in sidecars)
    assert json.loads((logdir / "_last_checkpoint").read_text())["v2Checkpoint"]["path"] == lc.v2_checkpoint_file
    for f in logdir.glob("*.checkpoint.*-*.*"):   # hide delta-spark's UUID-named checkpoint
        if f.name != lc.v2_checkpoint_file:
            f.unlink()
    after = DeltaLog.for_table(root).snapshot()
    assert after.segment.checkpoint.files[0].path.endswith(lc.v2_checkpoint_file)
    assert_same_state(expected, after)

    v = set_properties(root, {"delta.checkpointPolicy": "classic"})
    snap = DeltaLog.for_table(root).snapshot()
    expected = capture(snap, NOW_MS)
    lc = write_checkpoint(DeltaLog.for_table(root), parts=3, now_ms=NOW_MS)
    assert lc.parts is None and lc.v2_checkpoint is None
    t = pq.read_table(logdir / f"{v:020d}.checkpoint.parquet")
    assert "checkpointMetadata" in t.column_names and "sidecar" in t.column_names
    assert [r for r in t.column("checkpointMetadata").to_pylist() if r] == [{"version": v, "tags": None}]
    assert not list(logdir.glob(f"{v:020d}.checkpoint.0*"))
    assert_same_state(expected, DeltaLog.for_table(root).snapshot())


# --- tombstones and _last_checkpoint -----------------------------------------------------------

def test_tombstone_retention(simple, tmp_path):
    def tombstones_after_checkpoint(root):
        write_checkpoint(DeltaLog.for_table(root), now_ms=NOW_MS)
        return sorted(DeltaLog.for_table(root).snapshot().tombstones_table(["path"]).column(0).to_pylist())

    other = str(tmp_path / "other")
    shutil.copytree(simple, other)
    # default 1 week: the 1-day-old remove stays, the 30-day-old one expires
    assert tombstones_after_checkpoint(simple) == ["p=0/f1-0.parquet"]
    set_properties(simple, {"delta.deletedFileRetentionDuration": "interval 1 hour"})
    assert tombstones_after_checkpoint(simple) == []
    set_properties(other, {"delta.deletedFileRetentionDuration": "interval 60 days"})
    assert tombstones_after_checkpoint(other) == ["p=0/f1-0.parquet", "p=1/f1-1.parquet"]


def test_last_checkpoint_file(simple):
    log = DeltaLog.for_table(simple)
    lc = write_checkpoint(log, now_ms=NOW_MS)
    text = (Path(simple) / "_delta_log" / "_last_checkpoint").read_text()
    obj = json.loads(text)
    assert checksum.verify(text) and obj["checksum"] == checksum.checksum_of(text)
    size = (Path(simple) / "_delta_log" / "00000000000000000005.checkpoint.parquet").stat().st_size
    assert obj == {"version": 5, "size": 16, "sizeInBytes": size, "numOfAddFiles": 10, "checksum": obj["checksum"]}
    assert read_last_checkpoint(log.store, log.log_dir) == lc




# --- crash safety ------------------------------------------------------------------------------

def test_leftover_temp_file_and_incomplete_multi_part_are_ignored(simple):
    log_dir = Path(simple) / "_delta_log"
    before = DeltaLog.for_table(simple).snapshot()
    # a crashed writer's temp file (the local store writes `.<name>.<uuid>.tmp` and links it)
    (log_dir / ".00000000000000000005.checkpoint.parquet.0123abcd.tmp").write_bytes(b"PAR1 truncated")
    write_checkpoint(DeltaLog.for_table(simple), parts=3, now_ms=NOW_MS)
    (log_dir / "00000000000000000005.checkpoint.0000000002.0000000003.parquet").unlink()
    after = DeltaLog.for_table(simple).snapshot()     # _last_checkpoint names the broken set
    assert after.segment.checkpoint is None and len(after.segment.commits) == 6
    assert_same_state(before, after)
    # an earlier complete checkpoint is used instead of the incomplete newer one
    write_checkpoint(DeltaLog.for_table(simple), version=3, now_ms=NOW_MS)
    after = DeltaLog.for_table(simple).snapshot()
    assert after.segment.checkpoint_version == 3
    assert_same_state(before, after)   # the removes are in commit 5, after the checkpoint
    # a retry completes the set: existing parts are kept, the missing one written
    write_checkpoint(DeltaLog.for_table(simple), parts=3, now_ms=NOW_MS)
    assert DeltaLog.for_table(simple).snapshot().segment.checkpoint_version == 5


def test_existing_checkpoint_is_kept(simple):
    log = DeltaLog.for_table(simple)
    write_checkpoint(log, now_ms=NOW_MS)
    p = Path(simple) / "_delta_log" / "00000000000000000005.checkpoint.parquet"
    data, mtime = p.read_bytes(), p.stat().st_mtime_ns
    lc = write_checkpoint(log, now_ms=0)   # would keep a different set of tombstones
    assert p.read_bytes() == data and p.stat().st_mtime_ns == mtime
    assert lc.size_in_bytes == len(data)


# --- post-commit hook --------------------------------------------------------------------------

def test_checkpoint_if_needed(simple, caplog):
    log = DeltaLog.for_table(simple)
    assert checkpoint_if_needed(log, 5) is None              # default interval 10
    v = set_properties(simple, {"delta.checkpointInterval": "3"})
    assert v == 6
    lc = checkpoint_if_needed(log, 6)
    assert lc is not None and lc.version == 6
    assert (Path(simple) / "_delta_log" / "00000000000000000006.checkpoint.parquet").exists()
    assert checkpoint_if_needed(log, 0) is None
    # never raises: a version that does not exist only logs a warning
    assert checkpoint_if_needed(log, 9, configuration={"delta.checkpointInterval": "3"}) is None
    assert "failed" in caplog.text


def test_checkpoint_if_needed_every_tenth_commit(tmp_path):
    root = str(tmp_path / "t")
    commit(root, 0, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, _meta(_schema(("id", "long", None))))
    log = DeltaLog.for_table(root)
    written = []
    for v in range(1, 22):
        commit(root, v, _add(f"f{v}.parquet"))
        if checkpoint_if_needed(log, v) is not None:
            written.append(v)
    assert written == [10, 20]
    snap = DeltaLog.for_table(root).snapshot()
    assert snap.segment.checkpoint_version == 20 and snap.num_files == 21


def test_checkpoint_after_json_size_threshold_hook(tmp_path):
    """tahoe.checkpoint.jsonSizeThreshold: the hook checkpoints once the JSON commits since the
    newest checkpoint reach the threshold (the oracle: the commit files' sizes on disk)."""
    root = str(tmp_path / "t")
    conf = {"tahoe.checkpoint.jsonSizeThreshold": "4kb"}
    commit(root, 0, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
           _meta(_schema(("id", "long", None)), conf=conf))
    log = DeltaLog.for_table(root)
    written, expected, since = [], [], os.path.getsize(Path(root) / "_delta_log" / f"{0:020d}.json")
    for v in range(1, 9):
        # a commit of ~1.3 kB: 20 adds with long paths
        p = commit(root, v, *[_add(f"part-{v:03d}-{i:03d}-{'x' * 20}.parquet") for i in range(20)])
        since += os.path.getsize(p)
        if since >= 4096:
            expected.append(v)
            since = 0
        if checkpoint_if_needed(log, v) is not None:   # tail bytes from a listing of the log
            written.append(v)
    assert written == expected and len(expected) >= 2
    snap = DeltaLog.for_table(root).snapshot()
    assert snap.segment.checkpoint_version == expected[-1] and snap.num_files == 8 * 20


def test_checkpoint_after_json_size_threshold_on_write(tmp_path):
    """The same rule after real writes (the transaction passes the tail size it knows), and 0
    turns it off; an unknown tahoe.* property and a bad size are refused by name."""
    root = tmp_path / "t"
    rows = lambda i: pa.table({"id": pa.array(range(i * 50, i * 50 + 50), pa.int64()),  # noqa: E731
                               "p": pa.array([f"part{j % 25}" for j in range(50)])})
    tahoe.write_table(str(root), rows(0), partition_by=["p"],
                      properties={"tahoe.checkpoint.jsonSizeThreshold": "30kb"})
    log_dir = root / "_delta_log"
    expected, since = [], (log_dir / f"{0:020d}.json").stat().st_size
    for i in range(1, 7):
        v = tahoe.write_table(str(root), rows(i))
        since += (log_dir / f"{v:020d}.json").stat().st_size
        if since >= 30 * 1024:
            expected.append(v)
            since = 0
    written = sorted(int(f.name.split(".")[0]) for f in log_dir.glob("*.checkpoint.parquet"))
    assert written == expected and expected
    assert Table(str(root)).to_arrow().num_rows == 7 * 50
    tahoe.Table(str(root)).set_properties({"tahoe.checkpoint.jsonSizeThreshold": "0"})
    before = set(log_dir.glob("*.checkpoint.parquet"))
    for i in range(7, 12):
        tahoe.write_table(str(root), rows(i))
    after = {f for f in log_dir.glob("*.checkpoint.parquet")} - before
    assert all(int(f.name.split(".")[0]) % 10 == 0 for f in after)    # only delta.checkpointInterval's
    with pytest.raises(InvalidTableOperationError, match="tahoe.checkpoint.jsonSizeTreshold"):
        tahoe.Table(str(root)).set_properties({"tahoe.checkpoint.jsonSizeTreshold": "1mb"})
    with pytest.raises(InvalidTableOperationError, match="tahoe.checkpoint.jsonSizeThreshold"):
        tahoe.Table(str(root)).set_properties({"tahoe.checkpoint.jsonSizeThreshold": "lots"})


# --- log cleanup -------------------------------------------------------------------------------

def _aged_table(root, n=25, old=15, now=NOW_MS):
    """n commits: the first `old` 40 days old, the rest 1 day old; checkpoints at 10 and 20."""
    commit(root, 0, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
           _meta(_schema(("id", "long", None))), mtime_ms=now - 40 * DAY_MS)
    for v in range(1, n):
        age = 40 if v < old else 1
        commit(root, v, _add(f"f{v}.parquet"), mtime_ms=now - age * DAY_MS + v)
        if v in (10, 20):
            write_checkpoint(DeltaLog.for_table(root), now_ms=now)
            cp = Path(root) / "_delta_log" / f"{v:020d}.checkpoint.parquet"
            os.utime(cp, ((now - age * DAY_MS + v) / 1000,) * 2)
    (Path(root) / "_delta_log" / "00000000000000000003.crc").write_text("{}")
    os.utime(Path(root) / "_delta_log" / "00000000000000000003.crc", ((now - 40 * DAY_MS) / 1000,) * 2)


def test_cleanup_keeps_time_travel_within_retention(tmp_path):
    root = str(tmp_path / "t")
    _aged_table(root)
    deleted = cleanup_expired_logs(DeltaLog.for_table(root), now_ms=NOW_MS)
    names = sorted(os.path.basename(p) for p in deleted)
    # the first version within 30 days is 15; its state is rebuilt from checkpoint 10 on
    assert names == sorted([f"{v:020d}.json" for v in range(10)] + ["00000000000000000003.crc"])
    log = DeltaLog.for_table(root)
    for v in range(10, 25):
        assert log.snapshot(version=v).num_files == v
    with pytest.raises(VersionNotFoundError):
        log.snapshot(version=9)
    assert cleanup_expired_logs(log, now_ms=NOW_MS) == []


def test_cleanup_everything_old_keeps_latest_checkpoint(tmp_path):
    root = str(tmp_path / "t")
    _aged_table(root, old=25)
    deleted = cleanup_expired_logs(DeltaLog.for_table(root), now_ms=NOW_MS)
    remaining = sorted(f.name for f in (Path(root) / "_delta_log").iterdir())
    assert "00000000000000000020.checkpoint.parquet" in remaining
    assert "00000000000000000010.checkpoint.parquet" not in remaining
    assert [n for n in remaining if n.endswith(".json")] == [f"{v:020d}.json" for v in range(20, 25)]
    assert len(deleted) == 20 + 1 + 1   # commits 0-19, checkpoint 10, the crc
    assert DeltaLog.for_table(root).snapshot().num_files == 24


def test_cleanup_without_old_checkpoint_deletes_nothing(tmp_path):
    root = str(tmp_path / "t")
    commit(root, 0, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
           _meta(_schema(("id", "long", None))), mtime_ms=NOW_MS - 40 * DAY_MS)
    for v in range(1, 5):
        commit(root, v, _add(f"f{v}.parquet"), mtime_ms=NOW_MS - 40 * DAY_MS)
    assert cleanup_expired_logs(DeltaLog.for_table(root), now_ms=NOW_MS) == []


def test_checkpoint_hook_runs_cleanup(tmp_path):
    root = str(tmp_path / "t")
    _aged_table(root, n=20, old=20)
    commit(root, 20, _add("f20.parquet"))
    log = DeltaLog.for_table(root)
    assert checkpoint_if_needed(log, 20) is not None
    assert not (Path(root) / "_delta_log" / "00000000000000000005.json").exists()
    assert DeltaLog.for_table(root).snapshot().num_files == 20
    set_properties(root, {"delta.enableExpiredLogCleanup": "false", "delta.checkpointInterval": "1"})
    os.utime(Path(root) / "_delta_log" / "00000000000000000020.json", ((NOW_MS - 40 * DAY_MS) / 1000,) * 2)
    checkpoint_if_needed(log, 21)
    assert (Path(root) / "_delta_log" / "00000000000000000020.json").exists()


def _protected_table(root, protect_before: int | None, old: int, n: int, checkpoints: set[int],
                     feature: bool = True) -> None:
    """delta-spark's CheckpointProtectionTestUtilsMixin table: n commits, the first `old` 40 days
    old, the rest 1 day old, checkpoints (with their commit's age) at `checkpoints`; the protocol
    lists the checkpointProtection writer feature, the table sets
    `delta.requireCheckpointProtectionBeforeVersion` = protect_before."""
    conf = {} if protect_before is None else {"delta.requireCheckpointProtectionBeforeVersion": str(protect_before)}
    protocol = {"minReaderVersion": 1, "minWriterVersion": 7,
                "writerFeatures": ["checkpointProtection"] if feature else ["appendOnly"]}
    commit(root, 0, {"protocol": protocol}, _meta(_schema(("id", "long", None)), conf=conf),
           mtime_ms=NOW_MS - 40 * DAY_MS)
    for v in range(1, n):
        age = 40 if v < old else 1
        commit(root, v, _add(f"f{v}.parquet"), mtime_ms=NOW_MS - age * DAY_MS + v)
    for v in sorted(checkpoints):
        write_checkpoint(DeltaLog.for_table(root), version=v, now_ms=NOW_MS)
        age = 40 if v < old else 1
        os.utime(Path(root) / "_delta_log" / f"{v:020d}.checkpoint.parquet", ((NOW_MS - age * DAY_MS + v) / 1000,) * 2)


def _log_versions(root) -> tuple[list[int], list[int]]:
    names = [f.name for f in (Path(root) / "_delta_log").iterdir()]
    return (sorted(int(n[:20]) for n in names if n.endswith(".json")),
            sorted(int(n[:20]) for n in names if n.endswith(".checkpoint.parquet")))


@pytest.mark.parametrize("protect_before, old, n, checkpoints, commits_left, checkpoints_left", [
    # the cases of delta-spark's "Metadata cleanup respects requireCheckpointProtectionBeforeVersion"
    # (commits 0-7 outside the retention, 8-15 inside; cleanup truncates at checkpoint 8)
    (2, 8, 16, {6, 8}, range(8, 16), [8]),
    (6, 8, 16, {6, 8}, range(8, 16), [8]),
    (7, 8, 16, {6, 8}, range(8, 16), [8]),
    (8, 8, 16, {6, 8}, range(8, 16), [8]),           # everything before 8 goes in one go
    (9, 8, 16, {6, 8}, range(0, 16), [6, 8]),        # it cannot reach 9: nothing is deleted
    (20, 8, 16, {6, 8}, range(0, 16), [6, 8]),
    (9, 10, 20, {6, 8, 10}, range(10, 20), [10]),    # commits 0-9 outside: truncated at 10 >= 9
    (0, 8, 16, {6, 8}, range(8, 16), [8]),
    (None, 8, 16, {6, 8}, range(8, 16), [8]),        # the property unset
])
def test_cleanup_under_checkpoint_protection(tmp_path, protect_before, old, n, checkpoints, commits_left,
                                             checkpoints_left):
    """Spec, Checkpoint Protection: with the feature in the protocol, metadata cleanup may proceed
    only if it cleans up to `delta.requireCheckpointProtectionBeforeVersion` in one go."""
    root = str(tmp_path / "t")
    _protected_table(root, protect_before, old, n, checkpoints)
    cleanup_expired_logs(DeltaLog.for_table(root), now_ms=NOW_MS)
    assert _log_versions(root) == (list(commits_left), checkpoints_left)
    assert DeltaLog.for_table(root).snapshot().num_files == n - 1


def test_checkpoint_protection_property_without_the_feature_is_no_barrier(tmp_path):
    root = str(tmp_path / "t")
    _protected_table(root, 20, 8, 16, {6, 8}, feature=False)
    cleanup_expired_logs(DeltaLog.for_table(root), now_ms=NOW_MS)
    assert _log_versions(root) == (list(range(8, 16)), [8])


# --- delta-rs ----------------------------------------------------------------------------------

@pytest.mark.conformance
def test_delta_rs_reads_our_checkpoints(tmp_path, simple):
    """delta-rs opens tables whose log starts at one of our checkpoints (single, multi-part,
    with stats_parsed, DVs, column mapping) and sees the same version and files."""
    cases = {}
    for name in ["dv-partitioned-with-checkpoint", "dv-with-columnmapping", "data-reader-partition-values",
                 "multi-part-checkpoint", "basic-decimal-table", "table-with-columnmapping-mode-id"]:
        root = copy_table(name, tmp_path / name)
        if name == "data-reader-partition-values":
            set_properties(root, {"delta.checkpoint.writeStatsAsStruct": "true"})
        cases[root] = write_checkpoint(DeltaLog.for_table(root), parts=2 if name == "multi-part-checkpoint" else None)
    cases[simple] = write_checkpoint(DeltaLog.for_table(simple), parts=3, now_ms=NOW_MS)
    expected = {}
    for root, lc in cases.items():
        snap = DeltaLog.for_table(root).snapshot()
        expected[root] = (snap.version, snap.num_files)
        for f in (Path(root) / "_delta_log").iterdir():   # delta-rs must start from our checkpoint
            if f.name.endswith(".json") and int(f.name[:20]) <= lc.version:
                f.unlink()
            elif "checkpoint" in f.name and f.name[0].isdigit() and int(f.name[:20]) < lc.version:
                f.unlink()
    got = delta_rs(list(cases))
    for root, (version, files) in expected.items():
        assert got[root] == {"version": version, "files": files}, root


# --- CLI ---------------------------------------------------------------------------------------

def test_cli_checkpoint(simple):
    from typer.testing import CliRunner

    from tahoe.cli import app

    res = CliRunner().invoke(app, ["checkpoint", simple, "--version", "4", "--parts", "2", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["parts"] == 2
    assert DeltaLog.for_table(simple).snapshot(version=4).segment.checkpoint_version == 4
    res = CliRunner().invoke(app, ["checkpoint", simple])
    assert res.exit_code == 0 and "version 5" in res.stdout
    res = CliRunner().invoke(app, ["checkpoint", simple, "--version", "99"])
    assert res.exit_code == 1


def _commit_mtime_ms(root, version: int) -> int:
    return os.stat(os.path.join(root, "_delta_log", f"{version:020d}.json")).st_mtime_ns // 1_000_000


def test_last_modified_after_a_checkpoint_is_the_commits_time(tmp_path):
    """describe / detail()['lastModified'] after `tahoe checkpoint`: the latest commit's time (the
    commit file's mtime, read here with os.stat), not when the checkpoint was written."""
    from typer.testing import CliRunner

    from tahoe.cli import app
    from tahoe.write import write_table

    root = str(tmp_path / "t")
    write_table(root, pa.table({"id": [1]}))
    write_table(root, pa.table({"id": [2]}), mode="append")
    commit = _commit_mtime_ms(root, 1) - 60_000   # commits a minute back: checkpoint time != commit time
    for v, ms in ((0, commit - 60_000), (1, commit)):
        os.utime(os.path.join(root, "_delta_log", f"{v:020d}.json"), ns=(ms * 1_000_000,) * 2)
    r = CliRunner().invoke(app, ["checkpoint", root])
    assert r.exit_code == 0, r.output
    cp = os.stat(os.path.join(root, "_delta_log", f"{1:020d}.checkpoint.parquet")).st_mtime_ns // 1_000_000
    assert cp > commit
    t = Table(root)
    assert t.snapshot.segment.checkpoint is not None and not t.snapshot.segment.commits
    assert t.detail()["lastModified"] == commit
    assert t.history()[0]["timestamp"] == commit
    r = CliRunner().invoke(app, ["describe", root, "--json"])
    expected = dt.datetime.fromtimestamp(commit / 1000, tz=dt.timezone.utc).isoformat(timespec="milliseconds")
    assert json.loads(r.stdout)["timestamp"] == expected


def test_last_modified_after_a_checkpoint_with_in_commit_timestamps(tmp_path):
    from tahoe.write import write_table

    root = str(tmp_path / "t")
    write_table(root, pa.table({"id": [1]}), properties={"delta.enableInCommitTimestamps": "true"})
    write_table(root, pa.table({"id": [2]}), mode="append")
    with open(os.path.join(root, "_delta_log", f"{1:020d}.json")) as f:
        ict = next(json.loads(line)["commitInfo"]["inCommitTimestamp"] for line in f if '"commitInfo"' in line)
    write_checkpoint(DeltaLog.for_table(root))
    assert Table(root).detail()["lastModified"] == ict
