"""Log compaction files (`x.y.compacted.json`, spec "Log Compaction Files"): what tahoe writes
(the spec's own example, hand-derived), that replay substitutes them for the commits they cover
(the same state at every version as the plain commits; a compaction written by delta-rs), which
ones it picks, and the errors of `compact_log` / `tahoe compact-log`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import tahoe
from tahoe.errors import VersionNotFoundError
from tahoe.log import DeltaLog
from tahoe.log.compaction import compact_log
from tahoe.log.segment import LogFile, with_compactions
from tahoe.protocol.filenames import parse_log_file_name
from tahoe.storage.base import FileStatus

SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]})
PROTOCOL = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
META = {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}}, "schemaString": SCHEMA,
                     "partitionColumns": [], "configuration": {}, "createdTime": 1}}


def _add(p, size=10):
    return {"add": {"path": p, "partitionValues": {}, "size": size, "modificationTime": 1, "dataChange": True}}


def _remove(p):
    return {"remove": {"path": p, "deletionTimestamp": 5, "dataChange": True, "extendedFileMetadata": True,
                       "partitionValues": {}, "size": 10}}


def _write(root: Path, version: int, *actions) -> None:
    d = root / "_delta_log"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


def _state(snap) -> dict:
    return {
        "files": sorted(snap.files_table(["path", "size"]).to_pylist(), key=lambda r: r["path"]),
        "tombstones": sorted(snap.tombstones_table(["path"]).column("path").to_pylist()),
        "txns": {k: t.version for k, t in snap.set_transactions.items()},
        "domains": {k: d.configuration for k, d in snap.domain_metadata.items()},
        "metadata": snap.metadata.to_dict(), "protocol": snap.protocol.to_dict(),
    }


def test_the_spec_example_and_replay_substitution(tmp_path):
    """Commits 4-6 of the spec's example compact to exactly the spec's five actions; a reader
    uses the compaction (a compaction that claims something else is what the reader returns) and
    every version reads the same as from the commits alone, time travel inside the range too."""
    root = tmp_path / "t"
    _write(root, 0, {"commitInfo": {"operation": "CREATE"}}, PROTOCOL, META, _add("f1"),
           {"domainMetadata": {"domain": "app.x", "configuration": "{}", "removed": False}})
    for v in (1, 2, 3):
        _write(root, v, {"commitInfo": {}}, _add(f"g{v}"))
    _write(root, 4, {"commitInfo": {}}, _add("f2"), _remove("f1"))
    _write(root, 5, {"commitInfo": {}}, _add("f3"), _add("f4"),
           {"txn": {"appId": "3ae45b72-24e1-865a-a211-34987ae02f2a", "version": 4389}})
    _write(root, 6, {"commitInfo": {}}, _remove("f3"),
           {"txn": {"appId": "3ae45b72-24e1-865a-a211-34987ae02f2a", "version": 4390}},
           {"domainMetadata": {"domain": "app.x", "configuration": "{}", "removed": True}})
    _write(root, 7, {"commitInfo": {"operation": "WRITE"}}, _add("h"))
    log = DeltaLog.for_table(str(root))
    plain = {v: _state(log.snapshot(version=v)) for v in range(8)}

    r = compact_log(log, 4, 6)
    assert (r.start_version, r.end_version, r.created) == (4, 6, True)
    name = "00000000000000000004.00000000000000000006.compacted.json"
    lines = [json.loads(x) for x in (root / "_delta_log" / name).read_text().splitlines()]
    # the spec's content, plus the domain tombstone that cancels app.x set before version 4
    assert sorted(map(json.dumps, lines)) == sorted(map(json.dumps, [
        _add("f2"), _add("f4"), _remove("f1"), _remove("f3"),
        {"txn": {"appId": "3ae45b72-24e1-865a-a211-34987ae02f2a", "version": 4390}},
        {"domainMetadata": {"domain": "app.x", "configuration": "{}", "removed": True}}]))
    assert not any("commitInfo" in a for a in lines)
    compact_log(log, 1, 3)
    for v in range(8):
        assert _state(DeltaLog.for_table(str(root)).snapshot(version=v)) == plain[v], v
    seg = DeltaLog.for_table(str(root)).snapshot().segment
    assert [f.name.name for f in seg.deltas] == [
        "00000000000000000000.json", "00000000000000000001.00000000000000000003.compacted.json", name,
        "00000000000000000007.json"]
    snap = DeltaLog.for_table(str(root)).snapshot()
    assert snap.timestamp == os.stat(root / "_delta_log" / f"{7:020d}.json").st_mtime_ns // 1_000_000
    # a second writer of the same range keeps the first one's file
    assert compact_log(log, 4, 6).created is False
    # the compaction, not the commits, is what replay reads
    (root / "_delta_log" / name).write_text(json.dumps(_add("only-in-compaction")) + "\n")
    assert [r["path"] for r in _state(DeltaLog.for_table(str(root)).snapshot())["files"]] == \
        ["f1", "g1", "g2", "g3", "h", "only-in-compaction"]   # no remove of f1 any more
    assert [r["path"] for r in _state(DeltaLog.for_table(str(root)).snapshot(version=5))["files"]] == \
        ["f2", "f3", "f4", "g1", "g2", "g3"]   # version 5 lies inside the range: the commits


def _lf(name: str) -> LogFile:
    return LogFile(FileStatus(f"/l/{name}", 1, 1), parse_log_file_name(name))


def test_which_compactions_replay_picks():
    """Fewest files, no overlap, only compactions wholly inside the commits after the checkpoint
    (expectations derived by hand)."""
    commits = tuple(_lf(f"{v:020d}.json") for v in range(1, 11))
    c = lambda x, y: _lf(f"{x:020d}.{y:020d}.compacted.json")  # noqa: E731
    names = lambda fs: [f.name.name.split(".")[0].lstrip("0") + ("-" + str(f.name.end_version) if f.name.end_version else "")  # noqa: E731
                        for f in fs]
    assert names(with_compactions(commits, [c(1, 3), c(2, 10)])) == ["1", "2-10"]
    # a tie (two files either way): the widest compaction at the earliest start
    assert names(with_compactions(commits, [c(1, 3), c(4, 10), c(1, 9)])) == ["1-9", "10"]
    assert names(with_compactions(commits, [c(1, 3), c(4, 10), c(2, 9)])) == ["1-3", "4-10"]
    assert names(with_compactions(commits, [c(5, 12), c(0, 3)])) == [str(v) for v in range(1, 11)]
    assert names(with_compactions(commits, [c(3, 4)])) == ["1", "2", "3-4", "5", "6", "7", "8", "9", "10"]


def test_compaction_written_by_delta_rs_and_tahoe_compaction_read_by_delta_rs(tmp_path):
    """delta-rs's `compact_logs` output is replayed by tahoe to delta-rs's own file list; a table
    compacted by tahoe reads the same rows in delta-rs."""
    path = str(tmp_path / "rs")
    script = r"""
import json, os, sys
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
p = sys.argv[1]
write_deltalake(p, pa.table({"id": [0]}))
for i in range(1, 6):
    write_deltalake(p, pa.table({"id": [i]}), mode="append")
DeltaTable(p).delete("id = 2")
dt = DeltaTable(p)
dt.compact_logs(1, 6)
dt = DeltaTable(p)
print(json.dumps({"files": sorted(os.path.basename(u) for u in dt.file_uris()), "version": dt.version()}))
sys.stdout.flush()
os._exit(0)
"""
    out = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True, timeout=120)
    rs = json.loads(out.stdout.strip().splitlines()[-1])
    assert any(n.endswith(".compacted.json") for n in os.listdir(Path(path) / "_delta_log"))
    snap = DeltaLog.for_table(path).snapshot()
    assert any(f.name.kind.value == "compaction" for f in snap.segment.deltas)
    assert snap.version == rs["version"]
    assert sorted(os.path.basename(p) for p in snap.files_table(["path"]).column("path").to_pylist()) == rs["files"]
    assert sorted(tahoe.Table(path).to_arrow().column("id").to_pylist()) == [0, 1, 3, 4, 5]

    mine = str(tmp_path / "mine")
    tahoe.write_table(mine, pa.table({"id": [0]}))
    for i in range(1, 5):
        tahoe.write_table(mine, pa.table({"id": [i]}), mode="append")
    tahoe.delete(mine, "id = 3")
    compact_log(DeltaLog.for_table(mine))          # 0..5: no checkpoint
    read = r"""
import json, os, sys
from deltalake import DeltaTable
t = DeltaTable(sys.argv[1])
print(json.dumps(sorted(t.to_pyarrow_table().column("id").to_pylist())))
sys.stdout.flush()
os._exit(0)
"""
    out = subprocess.run([sys.executable, "-c", read, mine], capture_output=True, text=True, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [0, 1, 2, 4]


def test_compact_log_errors_and_cli(tmp_path):
    root = tmp_path / "t"
    _write(root, 0, PROTOCOL, META, _add("a"))
    _write(root, 1, _add("b"))
    _write(root, 2, _add("c"))
    log = DeltaLog.for_table(str(root))
    with pytest.raises(VersionNotFoundError, match="at least two commits"):
        compact_log(log, 2, 2)
    with pytest.raises(VersionNotFoundError, match="latest version is 2"):
        compact_log(log, 1, 3)
    shutil.move(root / "_delta_log" / f"{1:020d}.json", tmp_path / "moved.json")
    with pytest.raises(VersionNotFoundError, match="commit 1 is not in the log"):
        compact_log(log, 0, 2)
    shutil.move(tmp_path / "moved.json", root / "_delta_log" / f"{1:020d}.json")
    assert not list((root / "_delta_log").glob("*.compacted.json"))   # nothing half-written
    tahoe_cli = str(Path(sys.executable).with_name("tahoe"))
    ok = subprocess.run([tahoe_cli, "compact-log", str(root), "--json"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == {
        "startVersion": 0, "endVersion": 2, "numActions": 5, "created": True,
        "path": str(root / "_delta_log" / "00000000000000000000.00000000000000000002.compacted.json"),
        "sizeInBytes": os.path.getsize(root / "_delta_log" / "00000000000000000000.00000000000000000002.compacted.json")}
    bad = subprocess.run([tahoe_cli, "compact-log", str(root), "--from", "2", "--to", "2"], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.startswith("error: VersionNotFoundError") and not bad.stdout


# --- overlapping compactions on a table with deletion vectors and change data (issue 35) -------------

def _dv_cdf_table(path: str) -> None:
    """35 rows in 7 files of 5 (v0), then 15 commits: deletes of a few rows per file (deletion
    vectors), updates (a DV on the old file, the new rows in a new one, change data files) and
    appends — the shape of delta-kernel-rs's compaction test tables."""
    tahoe.write_table(path, pa.table({"id": pa.array(range(35), pa.int64())}), target_file_rows=5,
                      properties={"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true",
                                  "delta.checkpointInterval": "100"})
    for i in range(1, 16):
        if i % 3 == 1:
            tahoe.delete(path, f"id % 7 = {i % 7}")
        elif i % 3 == 2:
            tahoe.update(path, {"id": "id + 1000"}, predicate=f"id % 5 = {i % 5}")
        else:
            tahoe.write_table(path, pa.table({"id": pa.array([2000 + i, 3000 + i], pa.int64())}), mode="append")
    assert DeltaLog.for_table(path).snapshot().version == 15


def _ids_at(path: str, v: int) -> list[int]:
    return sorted(tahoe.Table(path, version=v).to_arrow().column("id").to_pylist())


_RS_EVERY_VERSION = r"""
import json, os, sys
import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder
p, n = sys.argv[1], int(sys.argv[2])
out = {}
for v in range(n):
    dt = DeltaTable(p, version=v)
    t = pa.table(QueryBuilder().register("t", dt).execute("select id from t").read_all())
    out[v] = sorted(t.column("id").to_pylist())
print(json.dumps(out))
sys.stdout.flush()
os._exit(0)
"""


def test_overlapping_compactions_with_dvs_and_cdf_read_like_the_commits_and_like_delta_rs(tmp_path):
    """Compactions 0..5, 6..10 and 6..15 (overlapping: alternatives for 6..10), written by tahoe
    and — on a copy — by delta-rs: every version reads the rows of the same table without the
    compaction files, and the rows delta-rs reads at that version; the replay uses 0..5 + 6..15 at
    version 15 and 0..5 + 6..10 + commits after it inside (never two overlapping files); the
    change data feed (read from the commits) is the same."""
    plain = str(tmp_path / "plain")
    _dv_cdf_table(plain)
    assert any(a.deletion_vector is not None for a in DeltaLog.for_table(plain).snapshot().add_files())
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    shutil.copytree(plain, ours)
    shutil.copytree(plain, theirs)
    for a, b in ((0, 5), (6, 10), (6, 15)):
        compact_log(DeltaLog.for_table(ours), a, b)
    script = r"""
import os, sys
from deltalake import DeltaTable
for a, b in ((0, 5), (6, 10), (6, 15)):
    DeltaTable(sys.argv[1]).compact_logs(a, b)
sys.stdout.flush()
os._exit(0)
"""
    subprocess.run([sys.executable, "-c", script, theirs], capture_output=True, text=True, timeout=120)
    for t in (ours, theirs):
        names = sorted(f for f in os.listdir(Path(t) / "_delta_log") if f.endswith(".compacted.json"))
        assert names == [f"{a:020d}.{b:020d}.compacted.json" for a, b in ((0, 5), (6, 10), (6, 15))], t
    seg = DeltaLog.for_table(ours).snapshot().segment
    assert [(f.version, f.name.end_version) for f in seg.deltas] == [(0, 5), (6, 15)]
    seg = DeltaLog.for_table(ours).snapshot(version=12).segment
    assert [(f.version, f.name.end_version) for f in seg.deltas] == [(0, 5), (6, 10), (11, None), (12, None)]
    want = {v: _ids_at(plain, v) for v in range(16)}
    assert len(want[0]) == 35 and want[15] != want[0]
    for t in (ours, theirs):
        assert {v: _ids_at(t, v) for v in range(16)} == want, t
        out = subprocess.run([sys.executable, "-c", _RS_EVERY_VERSION, t, "16"], capture_output=True, text=True,
                             timeout=300)
        rs = {int(k): v for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}
        assert rs == want, t
    assert tahoe.Table(ours).changes(0, 15).sort_by([("_commit_version", "ascending"), ("id", "ascending")]) \
        .select(["id", "_change_type", "_commit_version"]) == \
        tahoe.Table(plain).changes(0, 15).sort_by([("_commit_version", "ascending"), ("id", "ascending")]) \
        .select(["id", "_change_type", "_commit_version"])


def test_an_empty_or_truncated_compaction_file_is_not_read_in_place_of_the_commits(tmp_path):
    """A compaction a crashed writer left empty (0 bytes, as on an object store) or cut off
    mid-line: the reader takes the commits it would stand for (delta-kernel-rs skips empty ones
    the same way). Reading the empty 6..15 in place of its commits gave version 5's rows at
    version 15."""
    plain = str(tmp_path / "plain")
    _dv_cdf_table(plain)
    want = _ids_at(plain, 15)
    for damage in ("empty", "truncated"):
        t = str(tmp_path / damage)
        shutil.copytree(plain, t)
        for a, b in ((0, 5), (6, 10), (6, 15)):
            compact_log(DeltaLog.for_table(t), a, b)
        f = Path(t) / "_delta_log" / f"{6:020d}.{15:020d}.compacted.json"
        f.write_bytes(b"" if damage == "empty" else f.read_bytes()[:-40])
        assert _ids_at(t, 15) == want, damage
        if damage == "empty":   # never listed as a candidate
            assert [(x.version, x.name.end_version) for x in DeltaLog.for_table(t).snapshot().segment.deltas][:2] == \
                [(0, 5), (6, 10)]
        assert {v: _ids_at(t, v) for v in (5, 10, 12)} == {v: _ids_at(plain, v) for v in (5, 10, 12)}
