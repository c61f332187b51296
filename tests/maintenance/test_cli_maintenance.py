"""`tahoe vacuum / restore / clone / convert`: what each prints (--json and the summary table),
what it changes on disk, and the clear one-line error (exit 1, nothing changed) on bad input.

Oracles: the files on disk (os.walk) against the set derived by hand from how the table was
built, the sizes of the add/remove actions in the commits' JSON, the rows written, and delta-rs
reading the restored, cloned and converted tables."""

from __future__ import annotations

import datetime
import json
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

import tahoe
from tahoe.cli import app
from tests.maintenance.helpers import delta_rs_read, rows, tree

runner = CliRunner()


def _run(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def _adds(root: str, v: int) -> list[dict]:
    with open(os.path.join(root, "_delta_log", f"{v:020d}.json")) as f:
        return [a["add"] for a in map(json.loads, filter(str.strip, f)) if "add" in a]


def test_vacuum_restore_clone_convert_from_the_command_line(tmp_path):
    root = str(tmp_path / "t")
    tahoe.write_table(root, pa.table({"id": [1, 2]}))                     # v0
    tahoe.write_table(root, pa.table({"id": [3]}), mode="overwrite")     # v1 removes v0's file
    v0, v1 = _adds(root, 0), _adds(root, 1)
    with open(os.path.join(root, "orphan.parquet"), "wb") as f:          # a failed task's file
        f.write(b"12345")
    time.sleep(0.01)

    # RESTORE to v0: metrics from the log's sizes, one commit
    r = _run("restore", root, "--version", 0, "--json")
    assert r.exit_code == 0, r.output
    m = json.loads(r.stdout)
    assert (m["version"], m["restoredVersion"], m["numRestoredFiles"], m["restoredFilesSize"],
            m["numRemovedFiles"], m["removedFilesSize"]) == (2, 0, len(v0), sum(a["size"] for a in v0),
                                                             len(v1), sum(a["size"] for a in v1))
    r = _run("restore", root, "--version", 9)
    assert r.exit_code == 1 and "VersionNotFoundError" in r.output and tahoe.Table(root).version == 2

    # VACUUM: refused under the retention; dry run lists v1's file and the orphan; then deletes them
    before = tree(root)
    r = _run("vacuum", root, "--retain-hours", 0)
    assert r.exit_code == 1 and "RetentionTooShortError" in r.output and tree(root) == before
    r = _run("vacuum", root, "--retain-hours", 0, "--no-retention-check", "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    want_gone = {v1[0]["path"], "orphan.parquet"}
    assert set(json.loads(r.stdout)["files"]) == want_gone and tree(root) == before
    r = _run("vacuum", root, "--retain-hours", 0, "--no-retention-check", "--quiet")
    assert r.exit_code == 0, r.output
    assert "removed" in r.stdout and "kept (active files)" in r.stdout       # the summary table
    assert tree(root) == (before - want_gone) | {f"_delta_log/{v:020d}.{x}" for v in (3, 4) for x in ("json", "crc")}
    r = _run("restore", root, "--version", 1)                                 # its file was vacuumed
    assert r.exit_code == 1 and "DataFilesMissingError" in r.output and tahoe.Table(root).version == 4

    # CLONE: deep and shallow, read by delta-rs
    r = _run("clone", root, tmp_path / "deep", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["numCopiedFiles"] == len(v0)
    r = _run("clone", root, tmp_path / "shallow", "--shallow", "--version", 2, "--property", "delta.appendOnly=true")
    assert r.exit_code == 0, r.output
    assert tahoe.Table(str(tmp_path / "shallow")).metadata.configuration["delta.appendOnly"] == "true"
    r = _run("clone", root, tmp_path / "deep")
    assert r.exit_code == 1 and "TableAlreadyExistsError" in r.output

    # CONVERT: a Hive-partitioned directory; a second time is refused
    raw = tmp_path / "raw"
    (raw / "day=2024-01-02").mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([7, 8], pa.int64())}), raw / "day=2024-01-02" / "a.parquet")
    r = _run("convert", raw, "--partition-schema", "day DATE", "--json")
    assert r.exit_code == 0, r.output
    assert (json.loads(r.stdout)["numConvertedFiles"], json.loads(r.stdout)["partitionColumns"]) == (1, ["day"])
    r = _run("convert", raw, "--partition-schema", "day DATE")
    assert r.exit_code == 1 and "already a Delta table" in r.output

    theirs = delta_rs_read([(root, None), (str(tmp_path / "deep"), None), (str(tmp_path / "shallow"), None),
                            (str(raw), None)], tmp_path)
    assert rows(theirs[0]) == rows(theirs[1]) == rows(theirs[2]) == [(1,), (2,)]
    assert rows(theirs[3], ["id", "day"]) == [(7, datetime.date(2024, 1, 2)), (8, datetime.date(2024, 1, 2))]
