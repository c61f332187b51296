"""Version checksum files (`<v>.crc`, spec "Version Checksum File") written by tahoe's commits:
their content against independent oracles (delta-rs's file list and sizes, the raw commit JSON,
the rows a DV deletes), that each is derived from the previous one (a tampered `.crc` propagates
— and is caught), what happens without a previous one, `detail()` from the `.crc` alone, and the
errors a `.crc` that disagrees with the log raises."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import tahoe
from tahoe.errors import VersionChecksumMismatchError
from tahoe.log import DeltaLog, Snapshot
from tahoe.protocol.actions import DomainMetadata
from tahoe.txn import Transaction, set_properties
from tahoe.write import delete_rows
from tests.txn._helpers import fake_add

_RS_FILES = r"""
import json, os, sys
from deltalake import DeltaTable
t = DeltaTable(sys.argv[1])
a = t.get_add_actions(flatten=True)
print(json.dumps({"version": t.version(), "sizes": a.column("size_bytes").to_pylist()}))
sys.stdout.flush()
os._exit(0)
"""


def delta_rs_sizes(path: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _RS_FILES, path], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip(), out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def crc(path: str, version: int) -> dict:
    return json.loads((Path(path) / "_delta_log" / f"{version:020d}.crc").read_text())


def commit_lines(path: str, version: int) -> list[dict]:
    return [json.loads(x) for x in (Path(path) / "_delta_log" / f"{version:020d}.json").read_text().splitlines() if x]


def latest(path: str, kind: str, upto: int) -> dict:
    """The newest `kind` action (metaData, protocol) in the raw commits 0..upto."""
    found = None
    for v in range(upto + 1):
        for a in commit_lines(path, v):
            if kind in a:
                found = a[kind]
    assert found is not None
    return found


def test_checksums_agree_with_independent_oracles(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": list(range(6)), "d": ["a", "b", "a", "b", "a", "b"]}), partition_by=["d"],
                      properties={"delta.enableDeletionVectors": "true", "delta.enableInCommitTimestamps": "true"})
    tahoe.write_table(path, pa.table({"id": [10, 11], "d": ["c", "c"]}), mode="append", txn_app_id="etl", txn_version=7)
    set_properties(path, {"delta.feature.domainMetadata": "supported"})
    t = Transaction(DeltaLog.for_table(path), "MANUAL")
    t.set_domain_metadata(DomainMetadata("com.example", '{"k":1}'))
    t.commit()                                                         # version 3
    a_file = next(p for p in tahoe.Table(path).files()["path"].to_pylist() if "d=a" in p)
    delete_rows(path, {a_file: [0, 2]})                                # version 4: a DV of 2 rows
    tahoe.delete(path, "id = 11")                                      # version 5: copy-on-write
    for v in range(6):
        c = crc(path, v)
        rs = delta_rs_sizes_at(path, v)
        assert c["numFiles"] == len(rs), v
        assert c["tableSizeBytes"] == sum(rs), v
        assert c["numMetadata"] == c["numProtocol"] == 1
        assert c["metadata"] == latest(path, "metaData", v)
        assert c["protocol"] == latest(path, "protocol", v)
        ci = commit_lines(path, v)[0]["commitInfo"]
        assert c["inCommitTimestampOpt"] == ci["inCommitTimestamp"] and c["txnId"] == ci["txnId"]
        h = c["fileSizeHistogram"]
        assert h["sortedBinBoundaries"][:3] == [0, 8192, 16384] and len(h["sortedBinBoundaries"]) == 95
        assert h["fileCounts"][0] == len(rs) and h["totalBytes"][0] == sum(rs)   # every file < 8 KB
        assert sum(h["fileCounts"]) == len(rs)
    assert crc(path, 0)["setTransactions"] == [] and crc(path, 0)["domainMetadata"] == []
    assert [(x["appId"], x["version"]) for x in crc(path, 5)["setTransactions"]] == [("etl", 7)]
    assert crc(path, 5)["domainMetadata"] == [{"domain": "com.example", "configuration": '{"k":1}', "removed": False}]
    assert (crc(path, 3)["numDeletionVectorsOpt"], crc(path, 3)["numDeletedRecordsOpt"]) == (0, 0)
    c4 = crc(path, 4)
    assert (c4["numDeletionVectorsOpt"], c4["numDeletedRecordsOpt"]) == (1, 2)
    assert c4["deletedRecordCountsHistogramOpt"]["deletedRecordCounts"] == [c4["numFiles"] - 1, 1] + [0] * 8
    # what deltalake reads is unaffected by the .crc files beside the commits
    assert delta_rs_sizes(path)["version"] == 5


def delta_rs_sizes_at(path: str, version: int) -> list[int]:
    script = _RS_FILES.replace("t = DeltaTable(sys.argv[1])", "t = DeltaTable(sys.argv[1], version=int(sys.argv[2]))")
    out = subprocess.run([sys.executable, "-c", script, path, str(version)], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip(), out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])["sizes"]


def test_each_checksum_is_derived_from_the_previous_one(tmp_path, monkeypatch, caplog):
    """Tampering with version 1's `.crc` shows in version 2's (derived, not replayed); strict
    validation names the disagreement and a write on top of it commits nothing; warn mode logs it."""
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": [1]}))
    tahoe.write_table(path, pa.table({"id": [2]}), mode="append")
    c1 = crc(path, 1)
    c1["numFiles"] += 100
    c1["tableSizeBytes"] += 1000
    (Path(path) / "_delta_log" / f"{1:020d}.crc").write_text(json.dumps(c1))
    monkeypatch.setenv("TAHOE_VALIDATE_CHECKSUMS", "off")
    tahoe.write_table(path, pa.table({"id": [3]}), mode="append")
    assert crc(path, 2)["numFiles"] == 103 and tahoe.Table(path).detail()["numFiles"] == 103

    monkeypatch.setenv("TAHOE_VALIDATE_CHECKSUMS", "strict")
    before = sorted(os.listdir(path)), sorted(os.listdir(Path(path) / "_delta_log"))
    with pytest.raises(VersionChecksumMismatchError,
                       match=r"(?s)failed integrity checks\. Failed verification at version 2 .*Number of files - Expected: 103 Computed: 3"):
        tahoe.write_table(path, pa.table({"id": [4]}), mode="append")
    assert (sorted(os.listdir(path)), sorted(os.listdir(Path(path) / "_delta_log"))) == before
    monkeypatch.setenv("TAHOE_VALIDATE_CHECKSUMS", "warn")
    with caplog.at_level(logging.WARNING, logger="tahoe.log.crc"):
        snap = DeltaLog.for_table(path).snapshot()
    assert "Table size (bytes) - Expected" in caplog.text
    assert set(snap.validate_checksum(strict=False)) == {"numFiles", "tableSizeBytes"}
    (Path(path) / "_delta_log" / f"{2:020d}.crc").write_text("{not json")
    assert snap.validate_checksum(strict=False) == {}       # unreadable: logged, as if absent
    with pytest.raises(VersionChecksumMismatchError, match="is not valid JSON"):
        snap.validate_checksum(strict=True)


def test_without_a_previous_checksum(tmp_path):
    """A missing `.crc` is recomputed from the read snapshot when it is the previous version; a
    commit rebased over another writer's (which left no `.crc`) whose changes need the previous
    file list gets none — and the next commit from a fresh snapshot has one again."""
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": [1]}))
    logdir = Path(path) / "_delta_log"
    (logdir / f"{0:020d}.crc").unlink()
    tahoe.write_table(path, pa.table({"id": [2]}), mode="append")
    assert crc(path, 1)["numFiles"] == 2
    log = DeltaLog.for_table(path)
    snap = log.snapshot()
    t1 = Transaction(log, "WRITE", snapshot=snap)
    t1.add_files([fake_add("x.parquet")])
    t2 = Transaction(log, "OPTIMIZE", snapshot=snap)
    t2.add_files([fake_add("y.parquet", data_change=False)])
    assert t1.commit() == 2
    (logdir / f"{2:020d}.crc").unlink()                 # as if another engine wrote version 2
    assert t2.commit() == 3
    assert not (logdir / f"{3:020d}.crc").exists()
    t3 = Transaction(log, "WRITE")
    t3.add_files([fake_add("z.parquet")])
    assert t3.commit() == 4
    assert crc(path, 4)["numFiles"] == 5


def test_detail_and_describe_from_the_checksum(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": [1, 2]}))
    tahoe.write_table(path, pa.table({"id": [3]}), mode="append")
    sizes = delta_rs_sizes(path)["sizes"]

    def no_file_list(self, columns=None):
        raise AssertionError("the file list was read")

    monkeypatch.setenv("TAHOE_VALIDATE_CHECKSUMS", "off")   # validation reads the file list
    monkeypatch.setattr(Snapshot, "files_table", no_file_list)
    d = tahoe.Table(path).detail()
    assert (d["numFiles"], d["sizeInBytes"], d["version"]) == (2, sum(sizes), 1)
    tahoe_cli = str(Path(sys.executable).with_name("tahoe"))
    monkeypatch.undo()
    out = subprocess.run([tahoe_cli, "describe", path, "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert (json.loads(out.stdout)["numFiles"], json.loads(out.stdout)["sizeInBytes"]) == (2, sum(sizes))
