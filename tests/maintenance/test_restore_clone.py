"""RESTORE and CLONE (tahoe.maintenance.restore / clone, `Table.restore` / `Table.clone`).

Oracles: the rows written at each version (hand-derived), delta-rs reading the restored table
and the clones, the files on disk (os.walk), the log JSON of the commits, metrics computed from
the file sizes the log lists."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import time

import pyarrow as pa
import pytest

import tahoe
from tahoe.errors import DataFilesMissingError, TableAlreadyExistsError, VersionNotFoundError
from tahoe.maintenance.clone import clone
from tahoe.maintenance.restore import restore
from tahoe.maintenance.vacuum import vacuum
from tahoe.write import delete_rows
from tests.maintenance.helpers import delta_rs_read, rows, tree


def _commit(root: str, v: int) -> list[dict]:
    with open(os.path.join(root, "_delta_log", f"{v:020d}.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


def _table(root: str) -> dict[int, list]:
    """v0 create (DVs, column mapping), v1 a DV, v2 overwrite of partition a, v3 append."""
    props = {"delta.enableDeletionVectors": "true", "delta.columnMapping.mode": "name"}
    tahoe.write_table(root, pa.table({"id": [1, 2, 3, 4], "p": ["a", "a", "b", "b"]}), partition_by=["p"],
                      properties=props)
    files = tahoe.Table(root).files(["path", "partitionValues"]).to_pylist()
    a_file = next(f["path"] for f in files if "a" in dict(f["partitionValues"]).values())
    delete_rows(root, {a_file: [0]})
    tahoe.write_table(root, pa.table({"id": [5], "p": ["a"]}), mode="overwrite", predicate="p = 'a'")
    tahoe.write_table(root, pa.table({"id": [6], "p": ["c"]}), mode="append")
    return {0: [(1, "a"), (2, "a"), (3, "b"), (4, "b")], 1: [(2, "a"), (3, "b"), (4, "b")],
            2: [(3, "b"), (4, "b"), (5, "a")], 3: [(3, "b"), (4, "b"), (5, "a"), (6, "c")]}


def test_restore_one_commit_dvs_kept_metrics_and_refusals(tmp_path):
    root = str(tmp_path / "t")
    expected = _table(root)
    log = tahoe.DeltaLog.for_table(root)
    v1 = log.snapshot(version=1).files_table(["path", "size", "deletionVector"])
    v3 = log.snapshot(version=3).files_table(["path", "size"])
    common = set(v1["path"].to_pylist()) & set(v3["path"].to_pylist())
    t = tahoe.Table(root)
    m = t.restore(1)
    assert t.version == 4 and rows(t.to_arrow(), ["id", "p"]) == sorted(expected[1], key=repr)
    added = [a["add"] for a in _commit(root, 4) if "add" in a]
    removed = [a["remove"] for a in _commit(root, 4) if "remove" in a]
    assert {a["path"] for a in added} == set(v1["path"].to_pylist()) - common
    assert {r["path"] for r in removed} == set(v3["path"].to_pylist()) - common
    dv_add = [a for a in added if a.get("deletionVector")]
    v1_dv = {k: v for k, v in [d for d in v1["deletionVector"].to_pylist() if d][0].items() if v is not None}
    assert len(dv_add) == 1 and dv_add[0]["deletionVector"] == v1_dv       # the DV as it was at version 1
    sizes1 = dict(zip(v1["path"].to_pylist(), v1["size"].to_pylist()))
    sizes3 = dict(zip(v3["path"].to_pylist(), v3["size"].to_pylist()))
    assert {k: m[k] for k in ("numRestoredFiles", "numRemovedFiles", "numOfFilesAfterRestore",
                              "tableSizeAfterRestore", "restoredFilesSize", "removedFilesSize")} == {
        "numRestoredFiles": len(sizes1) - len(common), "numRemovedFiles": len(sizes3) - len(common),
        "numOfFilesAfterRestore": len(sizes1), "tableSizeAfterRestore": sum(sizes1.values()),
        "restoredFilesSize": sum(s for p, s in sizes1.items() if p not in common),
        "removedFilesSize": sum(s for p, s in sizes3.items() if p not in common)}
    ci = _commit(root, 4)[0]["commitInfo"]
    assert ci["operation"] == "RESTORE" and ci["operationParameters"] == {"version": "1"}
    assert set(ci["operationMetrics"]) == {"tableSizeAfterRestore", "numOfFilesAfterRestore", "numRemovedFiles",
                                           "numRestoredFiles", "removedFilesSize", "restoredFilesSize"}
    # by timestamp: back to v3's state
    ts = tahoe.Table(root, version=3).snapshot.timestamp
    t.restore(datetime.datetime.fromtimestamp(ts / 1000, tz=datetime.timezone.utc))
    assert rows(t.to_arrow(), ["id", "p"]) == sorted(expected[3], key=repr)
    theirs = delta_rs_read([(root, 4), (root, 5)], tmp_path)
    assert rows(theirs[0], ["id", "p"]) == sorted(expected[1], key=repr)
    assert rows(theirs[1], ["id", "p"]) == sorted(expected[3], key=repr)

    # refusals: nothing committed
    for bad in (5, 6, 99, -1):
        with pytest.raises(VersionNotFoundError):
            t.restore(bad)
    time.sleep(0.01)
    vacuum(root, 0, dry_run=False, enforce_retention_duration=False, full=True)
    before_version, before_files = tahoe.Table(root).version, tree(root)
    with pytest.raises(DataFilesMissingError, match="version 0"):
        restore(root, version=0)
    assert tahoe.Table(root).version == before_version and tree(root) == before_files


def test_clone_shallow_and_deep_at_a_version(tmp_path):
    src = str(tmp_path / "src")
    expected = _table(src)
    shallow, deep = str(tmp_path / "shallow"), str(tmp_path / "deep")
    c = tahoe.Table(src, version=1).clone(shallow, shallow=True, properties={"owner": "qa"})
    assert c.version == 0 and rows(c.to_arrow(), ["id", "p"]) == sorted(expected[1], key=repr)
    m = clone(src, deep, version=2)
    v2 = tahoe.DeltaLog.for_table(src).snapshot(version=2).files_table(["path", "size"])
    assert m["numCopiedFiles"] == m["sourceNumOfFiles"] == v2.num_rows
    assert m["copiedFilesSize"] == m["sourceTableSize"] == sum(v2["size"].to_pylist())
    # shallow: absolute URIs into the source, the relative DV made absolute; nothing copied
    commit = _commit(shallow, 0)
    ci, md = commit[0]["commitInfo"], next(a["metaData"] for a in commit if "metaData" in a)
    assert ci["operation"] == "CLONE" and ci["operationParameters"] == {"source": f"delta.`{src}`", "sourceVersion": "1"}
    assert md["configuration"]["owner"] == "qa" and md["configuration"]["delta.columnMapping.mode"] == "name"
    src_md = tahoe.Table(src).metadata
    assert md["schemaString"] == src_md.schema_string and md["id"] != src_md.id
    adds = [a["add"] for a in commit if "add" in a]
    assert all(a["path"].startswith("file://" + src + "/") for a in adds)
    dvs = [a["deletionVector"] for a in adds if a.get("deletionVector")]
    assert len(dvs) == 1 and dvs[0]["storageType"] == "p" and dvs[0]["pathOrInlineDv"].startswith("file://" + src)
    assert tree(shallow) == {"_delta_log/00000000000000000000.json", "_delta_log/00000000000000000000.crc"}
    # deep: independent of the source
    assert rows(tahoe.Table(deep).to_arrow(), ["id", "p"]) == sorted(expected[2], key=repr)
    theirs = delta_rs_read([(shallow, None), (deep, None)], tmp_path)
    assert rows(theirs[0], ["id", "p"]) == sorted(expected[1], key=repr)
    assert rows(theirs[1], ["id", "p"]) == sorted(expected[2], key=repr)
    with pytest.raises(TableAlreadyExistsError):
        clone(src, deep)
    m = clone(src, deep, replace=True)      # the latest version over the deep clone
    assert m["numRemovedFiles"] == v2.num_rows
    assert rows(tahoe.Table(deep).to_arrow(), ["id", "p"]) == sorted(expected[3], key=repr)
    shutil.rmtree(src)
    assert rows(tahoe.Table(deep).to_arrow(), ["id", "p"]) == sorted(expected[3], key=repr)
    assert rows(tahoe.Table(deep, version=0).to_arrow(), ["id", "p"]) == sorted(expected[2], key=repr)


def _rewrite_paths(table: str, old: str, new: str) -> None:
    """Rewrite the prefix `old` of every add path (and DV path) in the table's log to `new` (the
    form another engine wrote), dropping the version checksums that would disagree."""
    log = os.path.join(table, "_delta_log")
    for name in os.listdir(log):
        if name.endswith(".crc"):
            os.remove(os.path.join(log, name))
        if not name.endswith(".json"):
            continue
        out = []
        for a in _commit(table, int(name.split(".")[0])):
            if "add" in a:
                a["add"]["path"] = a["add"]["path"].replace(old, new, 1)
                dv = a["add"].get("deletionVector")
                if dv and dv.get("storageType") == "p":
                    dv["pathOrInlineDv"] = dv["pathOrInlineDv"].replace(old, new, 1)
            out.append(json.dumps(a))
        with open(os.path.join(log, name), "w") as f:
            f.write("\n".join(out) + "\n")


def test_shallow_clone_paths_are_file_uris_every_reader_resolves(tmp_path):
    """A shallow clone names its source's files `file:///abs/path` — also when the source names
    them `file:/abs/path` (Hadoop's form, as delta-spark writes a clone) or
    `file://localhost/abs/path`, which tahoe used to copy as they were and delta-rs then looked
    for under the clone's root. tahoe reads clones written in every form; delta-rs reads tahoe's."""
    src = str(tmp_path / "src")
    tahoe.write_table(src, pa.table({"id": [1, 2, 3], "p": ["a", "b", "b"]}), partition_by=["p"])
    want = [(1, "a"), (2, "b"), (3, "b")]
    first = str(tmp_path / "first")
    clone(src, first, shallow=True)
    assert all(a["add"]["path"].startswith(f"file://{src}/") for a in _commit(first, 0) if "add" in a)
    forms = {}
    for name, prefix in (("hadoop", f"file:{src}/"), ("localhost", f"file://localhost{src}/")):
        t = str(tmp_path / name)
        shutil.copytree(first, t)
        _rewrite_paths(t, f"file://{src}/", prefix)
        assert all(a["add"]["path"].startswith(prefix) for a in _commit(t, 0) if "add" in a)
        assert rows(tahoe.Table(t).to_arrow(), ["id", "p"]) == want, name   # read in either form
        forms[name] = t
    again = {}
    for name, t in forms.items():   # a clone of a clone written in the other forms
        again[name] = str(tmp_path / f"again_{name}")
        clone(t, again[name], shallow=True)
        paths = [a["add"]["path"] for a in _commit(again[name], 0) if "add" in a]
        assert paths and all(p.startswith(f"file://{src}/") for p in paths), paths
        assert rows(tahoe.Table(again[name]).to_arrow(), ["id", "p"]) == want
    theirs = delta_rs_read([(first, None), (again["hadoop"], None), (again["localhost"], None)], tmp_path)
    assert [rows(t, ["id", "p"]) if not isinstance(t, str) else t for t in theirs] == [want] * 3
