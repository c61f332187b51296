"""V2 checkpoints written by tahoe (spec "V2 Spec", "UUID-named checkpoint", "Sidecar Files",
"Metadata Cleanup"): `delta.checkpointPolicy=v2` tables read back from their UUID-named
checkpoint alone — JSON and parquet top-level files, one or several sidecars — in tahoe and in
delta-rs (the rows written are the oracle); a checkpoint that fails half-way leaves nothing a
reader sees; a missing sidecar is a clear error; unreferenced sidecars are cleaned up only past
retention; delta-rs's V2-spec checkpoints read in tahoe."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

import tahoe
from tahoe.errors import CorruptLogError
from tahoe.log import DeltaLog
from tahoe.log.checkpoints import write_checkpoint
from tahoe.log.metadata_cleanup import cleanup_unreferenced_sidecars
from tahoe.protocol.filenames import LogFileKind, parse_log_file_name

DAY_MS = 24 * 3600 * 1000

_RS_READ = r"""
import json, os, sys
from deltalake import DeltaTable, QueryBuilder
t = DeltaTable(sys.argv[1])
rows = QueryBuilder().register("t", t).execute("select id, d from t").read_all()
print(json.dumps({"version": t.version(), "rows": sorted(zip(rows.column("id").to_pylist(), rows.column("d").to_pylist()))}))
sys.stdout.flush()
os._exit(0)
"""


def delta_rs_rows(path: str) -> dict:
    """delta-rs's reading (its SQL path: its pyarrow path refuses the v2Checkpoint reader feature)."""
    out = subprocess.run([sys.executable, "-c", _RS_READ, path], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip(), out.stderr[-2000:]
    d = json.loads(out.stdout.strip().splitlines()[-1])
    return {"version": d["version"], "rows": [tuple(r) for r in d["rows"]]}


def tahoe_rows(path: str) -> dict:
    t = tahoe.Table(path)
    a = t.to_arrow(columns=["id", "d"])
    return {"version": t.version, "rows": sorted(zip(a.column("id").to_pylist(), a.column("d").to_pylist()))}


def only_checkpoint(src: Path, dst: Path, keep_after: int) -> str:
    """A copy of the table whose log holds the checkpoints and only the commits after `keep_after`
    (so a reader must use the checkpoint)."""
    shutil.copytree(src, dst)
    for f in (dst / "_delta_log").glob("*.json"):
        if ".checkpoint." not in f.name and int(f.name.split(".")[0]) <= keep_after:
            f.unlink()
    for f in (dst / "_delta_log").glob("*.crc"):
        f.unlink()
    return str(dst)


def test_v2_checkpoints_round_trip_in_tahoe_and_delta_rs(tmp_path):
    root = tmp_path / "t"
    path = str(root)
    tahoe.write_table(path, pa.table({"id": [0, 1], "d": ["a", "b"]}), partition_by=["d"],
                      properties={"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "5"})
    p = DeltaLog.for_table(path).snapshot().protocol
    assert "v2Checkpoint" in p.reader_features and "v2Checkpoint" in p.writer_features
    for i in range(2, 8):
        tahoe.write_table(path, pa.table({"id": [i], "d": ["c" if i % 2 else "a"]}), mode="append")
    tahoe.delete(path, "id = 3")                                       # version 7
    expected = [(0, "a"), (1, "b"), (2, "a"), (4, "a"), (5, "c"), (6, "a"), (7, "c")]
    logdir = root / "_delta_log"
    # version 5: the automatic checkpoint — UUID-named JSON, one sidecar, _last_checkpoint on it
    [cp5] = list(logdir.glob(f"{5:020d}.checkpoint.*.json"))
    lines = [json.loads(x) for x in cp5.read_text().splitlines()]
    kinds = [next(iter(x)) for x in lines]
    assert kinds[0] == "checkpointMetadata" and {"protocol", "metaData", "sidecar"} <= set(kinds)
    assert "add" not in kinds and "remove" not in kinds
    tags = lines[0]["checkpointMetadata"]["tags"]
    assert tags["numOfAddFiles"] == "7" and tags["sidecarNumActions"] == "7"   # ids 0-6, no removes yet
    [sidecar] = [x["sidecar"] for x in lines if "sidecar" in x]
    assert (logdir / "_sidecars" / sidecar["path"]).stat().st_size == sidecar["sizeInBytes"] == int(tags["sidecarSizeInBytes"])
    kinds_listed = {parse_log_file_name(f.name).kind for f in logdir.glob("*.checkpoint.*")}
    assert kinds_listed == {LogFileKind.V2_CHECKPOINT}   # no classic nor multi-part checkpoint
    last = json.loads((logdir / "_last_checkpoint").read_text())
    assert last["version"] == 5 and last["v2Checkpoint"]["path"] == cp5.name
    assert last["v2Checkpoint"]["sidecarFiles"] == [sidecar]
    # the JSON checkpoint and the commits after it, only
    a = only_checkpoint(root, tmp_path / "a", keep_after=5)
    want6 = expected + [(3, "c")]
    assert tahoe_rows(a) == delta_rs_rows(a)
    assert tahoe_rows(a) == {"version": 7, "rows": sorted(expected)}
    assert DeltaLog.for_table(a).snapshot().segment.checkpoint.files[0].name.name == cp5.name
    assert tahoe_rows(str(root)) == {"version": 7, "rows": sorted(expected)}
    # version 7, by hand: a parquet top-level file over two sidecars
    lc = write_checkpoint(DeltaLog.for_table(path), parts=2, v2_format="parquet")
    assert lc.v2_checkpoint_file.endswith(".parquet") and len(lc.v2_checkpoint["sidecarFiles"]) == 2
    b = only_checkpoint(root, tmp_path / "b", keep_after=7)
    for f in (Path(b) / "_delta_log").glob(f"{5:020d}.checkpoint.*"):
        f.unlink()
    assert tahoe_rows(b) == delta_rs_rows(b) == {"version": 7, "rows": sorted(expected)}
    assert DeltaLog.for_table(b).snapshot().segment.checkpoint.files[0].name.name == lc.v2_checkpoint_file
    assert sorted(tahoe.Table(path, version=6).to_arrow(columns=["id"]).column("id").to_pylist()) == \
        sorted(i for i, _ in want6)


def test_a_failed_v2_checkpoint_leaves_nothing_visible_and_cleanup(tmp_path, monkeypatch):
    root = tmp_path / "t"
    path = str(root)
    tahoe.write_table(path, pa.table({"id": [0], "d": ["a"]}), properties={"delta.checkpointPolicy": "v2"})
    tahoe.write_table(path, pa.table({"id": [1], "d": ["b"]}), mode="append")
    logdir = root / "_delta_log"
    log = DeltaLog.for_table(path)
    real_write = log.store.write

    def failing_write(p, data, overwrite=False):
        if ".checkpoint." in p and "_sidecars" not in p:
            raise OSError("disk full")
        return real_write(p, data, overwrite=overwrite)

    monkeypatch.setattr(log.store, "write", failing_write)
    with pytest.raises(OSError, match="disk full"):
        write_checkpoint(log, parts=1)
    monkeypatch.undo()
    orphans = sorted(os.listdir(logdir / "_sidecars"))
    assert len(orphans) == 1
    assert not list(logdir.glob("*.checkpoint.*")) and not (logdir / "_last_checkpoint").exists()
    assert tahoe_rows(path)["rows"] == [(0, "a"), (1, "b")]

    lc = write_checkpoint(DeltaLog.for_table(path))
    [used] = [s["path"] for s in lc.v2_checkpoint["sidecarFiles"]]
    now = int(time.time() * 1000)
    young = logdir / "_sidecars" / "00000000000000000001.checkpoint.0000000001.0000000001.young.parquet"
    young.write_bytes(b"x")
    old = (now - 40 * DAY_MS) / 1000
    for name in orphans + [used]:
        os.utime(logdir / "_sidecars" / name, (old, old))
    # within the 30-day retention nothing goes; past it, only the unreferenced old orphan
    assert cleanup_unreferenced_sidecars(DeltaLog.for_table(path), now_ms=now - 20 * DAY_MS) == []
    deleted = cleanup_unreferenced_sidecars(DeltaLog.for_table(path), now_ms=now)
    assert [os.path.basename(p) for p in deleted] == orphans
    assert sorted(os.listdir(logdir / "_sidecars")) == sorted([used, young.name])
    assert tahoe_rows(only_checkpoint(root, tmp_path / "c", keep_after=1))["rows"] == [(0, "a"), (1, "b")]


def test_a_missing_sidecar_is_a_clear_error(tmp_path):
    root = tmp_path / "t"
    path = str(root)
    tahoe.write_table(path, pa.table({"id": [0], "d": ["a"]}), properties={"delta.checkpointPolicy": "v2"})
    tahoe.write_table(path, pa.table({"id": [1], "d": ["b"]}), mode="append")
    lc = write_checkpoint(DeltaLog.for_table(path), parts=1)
    [name] = [s["path"] for s in lc.v2_checkpoint["sidecarFiles"]]
    (root / "_delta_log" / "_sidecars" / name).unlink()
    with pytest.raises(CorruptLogError, match=rf"sidecar file .*{name} referenced by checkpoint .*{lc.v2_checkpoint_file} is missing"):
        tahoe.Table(path)
    assert tahoe_rows_at(path, 0) == [(0, "a")]     # versions before the checkpoint still read


def tahoe_rows_at(path: str, version: int) -> list:
    a = tahoe.Table(path, version=version).to_arrow(columns=["id", "d"])
    return sorted(zip(a.column("id").to_pylist(), a.column("d").to_pylist()))


def test_delta_rs_v2_spec_checkpoint_read_by_tahoe(tmp_path):
    """delta-rs writes classic-named checkpoints that follow the V2 spec (checkpointMetadata
    inline) on tables with the v2Checkpoint feature; tahoe reads them to delta-rs's rows."""
    path = str(tmp_path / "rs")
    script = r"""
import os, sys
import pyarrow as pa
from deltalake import DeltaTable, TableFeatures, write_deltalake
p = sys.argv[1]
write_deltalake(p, pa.table({"id": [0, 1], "d": ["a", "b"]}))
DeltaTable(p).alter.add_feature([TableFeatures.V2Checkpoint], allow_protocol_versions_increase=True)
write_deltalake(p, pa.table({"id": [2], "d": ["c"]}), mode="append")
DeltaTable(p).create_checkpoint()
print("ok")
sys.stdout.flush()
os._exit(0)
"""
    out = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]
    src = Path(path)
    copy = only_checkpoint(src, tmp_path / "cp", keep_after=2)
    snap = DeltaLog.for_table(copy).snapshot()
    assert snap.segment.checkpoint is not None and snap.supports_feature("v2Checkpoint")
    assert tahoe_rows(copy) == delta_rs_rows(path) == {"version": 2, "rows": [(0, "a"), (1, "b"), (2, "c")]}
