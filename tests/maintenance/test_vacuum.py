"""VACUUM (tahoe.maintenance.vacuum, `Table.vacuum`): which files go and which stay, the versions
inside the retention window reading the same rows afterwards (tahoe and delta-rs), the retention
check, lite mode, the VACUUM START / END commits, and S3 (moto).

Oracles: the set of deleted files is derived by hand from how the table was built (which commit
removed which file, when; which files are hidden or orphaned); the rows of each version are the
rows written; delta-rs reads the vacuumed table; the files left on disk / in the bucket are
listed with os.walk / boto3."""

from __future__ import annotations

import json
import os
import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tahoe
from tahoe.errors import DataFilesMissingError, RetentionTooShortError
from tahoe.maintenance.vacuum import vacuum
from tahoe.write import delete_rows
from tests.fixtures.moto import TEST_CREDENTIALS, start_moto_server
from tests.maintenance.helpers import delta_rs_read, rows, tree

DAY_MS = 86_400_000


def _old(path: str, days: float = 30) -> None:
    t = time.time() - days * 86400
    os.utime(path, (t, t))


def _put(path: str, data: bytes = b"x", days: float | None = 30) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    if days is not None:
        _old(path, days)
    return path


def _commit_files(*versions: int) -> set[str]:
    """The `_delta_log` files each commit leaves: its JSON and its version checksum (`.crc`, which
    delta-spark — and tahoe — write after every commit)."""
    return {f"_delta_log/{v:020d}.{ext}" for v in versions for ext in ("json", "crc")}


def _build(root: str):
    """A table whose history has old tombstones (a data file and the deletion vector it carried,
    removed at v3), young ones (v4), a deletion vector still referenced (v1's, on p=a), a
    change-data file, orphans and hidden files. Returns (cutoff ms, rows per version, the files
    each commit added to the directory — `tree` differences, so derived without tahoe)."""
    props = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}
    new_files = {}
    seen = set()

    def added(v):
        nonlocal seen
        now = {p for p in tree(root) if not p.startswith("_delta_log/")}
        new_files[v], seen = now - seen, now

    tahoe.write_table(root, pa.table({"id": [0, 1, 2, 3, 4, 5], "p": ["a", "a", "a", "b", "b", "b"]}),
                      partition_by=["p"], properties=props)                                     # v0
    added(0)
    a_file = next(p for p in new_files[0] if p.startswith("p=a/"))
    delete_rows(root, {a_file: [0]})                                                            # v1: DV on p=a
    added(1)
    tahoe.delete(root, "id = 5")                                                                # v2: DV on p=b, cdc file
    added(2)
    tahoe.write_table(root, pa.table({"id": [3, 4], "p": ["b", "b"]}), mode="overwrite",
                      predicate="p = 'b'")                                                      # v3: p=b replaced
    added(3)
    expected = {
        0: [(0, "a"), (1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "b")],
        1: [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "b")],
        2: [(1, "a"), (2, "a"), (3, "b"), (4, "b")],
        3: [(1, "a"), (2, "a"), (3, "b"), (4, "b")],
    }
    time.sleep(0.05)
    cutoff = int(time.time() * 1000)
    time.sleep(0.05)
    tahoe.write_table(root, pa.table({"id": [9], "p": ["c"]}), mode="overwrite")               # v4 (young tombstones)
    added(4)
    expected[4] = [(9, "c")]
    return cutoff, expected, new_files


def test_vacuum_deletes_exactly_what_no_retained_version_needs(tmp_path):
    root = str(tmp_path / "t")
    cutoff, expected, new_files = _build(root)
    # by hand: v0 wrote one file per partition; v1 a DV file (p=a's, referenced up to v3); v2 a DV
    # file for p=b and a change-data file; v3 removed p=b's file (and so its DV) before the cutoff
    (b_original,) = [p for p in new_files[0] if p.startswith("p=b/")]
    (dv_kept,) = new_files[1]
    assert dv_kept.endswith(".bin")
    cdc = [p for p in new_files[2] if p.startswith("_change_data/")]
    (dv_gone,) = [p for p in new_files[2] if p.endswith(".bin")]
    assert len(cdc) == 1 and len(new_files[2]) == 2
    # files nobody references, old enough — and ones VACUUM must never touch
    orphans = ["orphan.parquet", "p=a/part-99999-failed-task.snappy.parquet"]
    for o in orphans:
        _put(os.path.join(root, o))
    hidden = ["_hidden/x.parquet", ".staging/y.parquet", "p=a/_SUCCESS", "p=a/.part-0.parquet.crc",
              "p=a/_sub/z.parquet"]
    for h in hidden:
        _put(os.path.join(root, h))
    os.makedirs(os.path.join(root, "emptydir"))
    _old(os.path.join(root, "emptydir"))
    _put(os.path.join(root, "young-orphan.parquet"), days=None)   # written after the cutoff: kept
    before = tree(root)
    sizes = {p: os.path.getsize(os.path.join(root, p)) for p in before}
    want_gone = {b_original, dv_gone, *cdc, *orphans}
    now = cutoff + 7 * DAY_MS   # the default retention (7 days) before "now" is the cutoff

    dry = vacuum(root, dry_run=True, now_ms=now)
    assert set(dry.paths) == want_gone | {"emptydir"}
    assert tree(root) == before and tahoe.Table(root).version == 4       # a dry run changes nothing

    r = vacuum(root, dry_run=False, now_ms=now)
    assert tree(root) == (before - want_gone) | _commit_files(5, 6)
    assert not os.path.exists(os.path.join(root, "emptydir"))
    assert r.num_deleted == len(want_gone) + 1
    for h in hidden + ["young-orphan.parquet", dv_kept]:
        assert h in tree(root)
    # the commits delta-spark writes around the deletes
    start, end = tahoe.Table(root).history(2)[::-1]
    assert start["operation"] == "VACUUM START" and end["operation"] == "VACUUM END"
    assert start["operationParameters"] == {"retentionCheckEnabled": "true", "defaultRetentionMillis": str(7 * DAY_MS)}
    assert start["operationMetrics"] == {"numFilesToDelete": str(len(want_gone) + 1),
                                         "sizeOfDataToDelete": str(sum(sizes[p] for p in want_gone))}
    assert end["operationParameters"] == {"status": "COMPLETED"}
    assert end["operationMetrics"]["numDeletedFiles"] == str(len(want_gone) + 1)

    # versions inside the window read as before, in tahoe and in delta-rs (v3 through the kept DV);
    # the ones outside it fail clearly
    for v in (3, 4):
        assert rows(tahoe.Table(root, version=v).to_arrow(), ["id", "p"]) == sorted(expected[v], key=repr)
    theirs = delta_rs_read([(root, 3), (root, 4), (root, 6), (root, 0)], tmp_path)
    assert rows(theirs[0], ["id", "p"]) == sorted(expected[3], key=repr)
    assert rows(theirs[1], ["id", "p"]) == rows(theirs[2], ["id", "p"]) == sorted(expected[4], key=repr)
    assert isinstance(theirs[3], str)   # delta-rs cannot read v0 either
    for v in (0, 2):
        with pytest.raises(DataFilesMissingError, match="does not exist"):
            tahoe.Table(root, version=v).to_arrow()


def test_retention_check_refuses_and_changes_nothing_lite_mode_only_tombstones(tmp_path):
    root = str(tmp_path / "t")
    tahoe.write_table(root, pa.table({"id": [1, 2]}))
    tahoe.write_table(root, pa.table({"id": [3]}), mode="overwrite")
    removed = next(iter(tahoe.DeltaLog.for_table(root).snapshot(version=0).files_table(["path"])
                        .column("path").to_pylist()))
    _put(os.path.join(root, "orphan.parquet"))
    before = tree(root)
    for hours in (0, 1, 167.4):
        with pytest.raises(RetentionTooShortError, match="168 hours"):
            vacuum(root, hours, dry_run=False)
    with pytest.raises(ValueError, match="less than 0"):
        vacuum(root, -1, dry_run=False, enforce_retention_duration=False)
    assert tree(root) == before and tahoe.Table(root).version == 1      # nothing deleted, nothing committed

    t = tahoe.Table(root)
    time.sleep(0.01)
    assert t.vacuum(0, enforce_retention_duration=False) == [removed]             # delta-rs's default: lite, dry run
    assert t.vacuum(0, dry_run=False, enforce_retention_duration=False) == [removed]
    vacuum_commits = _commit_files(2, 3)
    assert tree(root) == (before - {removed}) | vacuum_commits                     # the orphan stays in lite mode
    assert t.vacuum(0, enforce_retention_duration=False, full=True) == ["orphan.parquet"]
    assert rows(t.to_arrow()) == [(3,)]


@pytest.fixture(scope="module")
def moto():
    endpoint, stop = start_moto_server()
    yield endpoint
    stop()


def test_vacuum_on_s3_deletes_in_batches(moto, tmp_path):
    import boto3

    bucket = f"vac-{uuid.uuid4().hex[:12]}"
    s3 = boto3.client("s3", endpoint_url=moto, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket=bucket)
    opts = {**TEST_CREDENTIALS, "endpoint_url": moto, "allow_http": "true"}
    root = f"s3://{bucket}/t"
    tahoe.write_table(root, pa.table({"id": list(range(6)), "p": ["a", "b", "c"] * 2}), partition_by=["p"],
                      storage_options=opts, target_file_rows=1)
    tahoe.write_table(root, pa.table({"id": [7], "p": ["a"]}), mode="overwrite", storage_options=opts)
    for key in ("t/orphan.parquet", "t/_keep/x", "t/p=a/_SUCCESS"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")

    def keys():
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="t/")
        return {o["Key"][2:] for page in pages for o in page.get("Contents", [])}

    before = keys()
    old = {p for p in tahoe.Table(root, version=0, storage_options=opts).files()["path"].to_pylist()}
    time.sleep(0.01)
    t = tahoe.Table(root, storage_options=opts)
    gone = t.vacuum(0, dry_run=False, enforce_retention_duration=False, full=True)
    assert set(gone) == old | {"orphan.parquet"}
    assert keys() == (before - old - {"orphan.parquet"}) | _commit_files(2, 3)
    assert rows(t.to_arrow()) == [(7, "a")]
    assert [h["operation"] for h in t.history(2)] == ["VACUUM END", "VACUUM START"]
    theirs = delta_rs_read([(root, None)], tmp_path, {
        "AWS_ENDPOINT_URL": moto, "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"})
    assert rows(theirs[0]) == [(7, "a")]


def test_vacuum_protocol_check_and_unknown_features(tmp_path):
    """`vacuumProtocolCheck`: VACUUM checks the reader protocol as well as the writer one (tahoe
    always checks both). A table with the feature vacuums normally; one whose protocol names a
    feature tahoe does not know is refused before anything is deleted or committed."""
    import json

    from tahoe.errors import UnsupportedFeatureError

    root = str(tmp_path / "t")
    tahoe.write_table(root, pa.table({"id": [1, 2]}))
    tahoe.write_table(root, pa.table({"id": [3]}), mode="overwrite")
    removed = next(iter(tahoe.DeltaLog.for_table(root).snapshot(version=0).files_table(["path"])
                        .column("path").to_pylist()))
    tahoe.Table(root).add_feature("vacuumProtocolCheck")                                   # v2
    with open(os.path.join(root, "_delta_log", f"{2:020d}.json")) as f:
        (proto,) = [a["protocol"] for a in map(json.loads, f) if "protocol" in a]
    assert proto["minReaderVersion"] == 3 and proto["readerFeatures"] == ["vacuumProtocolCheck"]
    time.sleep(0.01)
    assert vacuum(root, 0, dry_run=False, enforce_retention_duration=False).paths == [removed]
    assert removed not in tree(root)
    # delta-rs 1.6 refuses to read a table with vacuumProtocolCheck; the file commit 1 added, read
    # with pyarrow, holds the rows
    with open(os.path.join(root, "_delta_log", f"{1:020d}.json")) as f:
        (active,) = [a["add"]["path"] for a in map(json.loads, f) if "add" in a]
    assert rows(pq.read_table(os.path.join(root, active))) == [(3,)]

    # a later reader-writer feature tahoe does not know: refused, nothing deleted or committed
    future = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                           "readerFeatures": ["vacuumProtocolCheck", "someFutureFeature"],
                           "writerFeatures": ["vacuumProtocolCheck", "someFutureFeature"]}}
    version = tahoe.Table(root).version
    with open(os.path.join(root, "_delta_log", f"{version + 1:020d}.json"), "w") as f:
        f.write(json.dumps({"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "SET TBLPROPERTIES"}})
                + "\n" + json.dumps(future) + "\n")
    _put(os.path.join(root, "orphan.parquet"))
    before = tree(root)
    with pytest.raises(UnsupportedFeatureError, match="someFutureFeature"):
        vacuum(root, 0, dry_run=False, enforce_retention_duration=False)
    assert tree(root) == before


def test_lite_mode_with_many_tombstones_in_one_directory(tmp_path):
    """Past 1000 tombstoned files in one directory, lite mode learns which still exist by listing
    the directory once: files already gone (deleted by hand here) are neither listed nor counted,
    the active file and the others outside the plan stay. Oracle: the files written (os.walk
    before and after), the ones removed by hand."""
    root = str(tmp_path / "t")
    tahoe.write_table(root, pa.table({"id": list(range(1200))}), target_file_rows=1)   # 1200 files
    removed = sorted(p for p in tree(root) if p.endswith(".parquet"))
    assert len(removed) == 1200
    tahoe.write_table(root, pa.table({"id": [-1]}), mode="overwrite")                  # v1: all tombstoned
    gone_by_hand = removed[:7]
    for p in gone_by_hand:
        os.remove(os.path.join(root, p))
    _put(os.path.join(root, "orphan.parquet"))                 # not a tombstone: lite leaves it
    time.sleep(0.01)
    want = set(removed) - set(gone_by_hand)
    dry = vacuum(root, 0, dry_run=True, enforce_retention_duration=False, full=False)
    assert set(dry.paths) == want and dry.num_files == len(want)
    before = tree(root)
    r = vacuum(root, 0, dry_run=False, enforce_retention_duration=False, full=False)
    assert r.num_deleted == len(want)
    assert tree(root) == (before - want) | _commit_files(2, 3)
    assert rows(tahoe.Table(root).to_arrow()) == [(-1,)]


def test_infinite_and_huge_retentions(tmp_path):
    """`vacuum(float("inf"))` is an InvalidOptionError naming the value (it was a bare
    OverflowError); a huge finite retention saturates as delta-spark's Long arithmetic does
    (math.round(hours) then HOURS.toMillis, capped at Long.MaxValue ms): nothing is old enough to
    go, the commit records Long.MaxValue."""
    import math

    from tahoe.errors import InvalidOptionError
    from tahoe.maintenance.vacuum import vacuum

    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": [1, 2]}))
    tahoe.write_table(path, pa.table({"id": [3]}), mode="overwrite")
    for bad in (float("inf"), math.inf):
        with pytest.raises(InvalidOptionError, match="finite"):
            vacuum(path, bad, dry_run=False)
    with pytest.raises(InvalidOptionError, match="number"):
        vacuum(path, float("nan"), dry_run=False)
    before = sorted(os.listdir(path))
    vacuum(path, 1e30, dry_run=False)
    assert sorted(os.listdir(path)) == before
    ci = [json.loads(line)["commitInfo"] for f in sorted(os.listdir(os.path.join(path, "_delta_log")))
          if f.endswith(".json") for line in open(os.path.join(path, "_delta_log", f)) if "commitInfo" in line]
    start = [c for c in ci if c["operation"] == "VACUUM START"][-1]
    assert json.loads(start["operationParameters"]["specifiedRetentionMillis"]) == (1 << 63) - 1
