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
