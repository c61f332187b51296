"""Multi-part checkpoints written twice: whatever mix of two writers' parts ends up in the log, the
checkpoint is the table — every active file exactly once.

Oracles: the part assignment of checkpoints delta-spark wrote (the conformance tables), and the
files each test committed itself (known by construction)."""

from __future__ import annotations

import itertools
import os
import shutil
import threading
import time
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from tahoe.log import DeltaLog
from tahoe.log.checkpoints import write_checkpoint
from tahoe.protocol.actions import AddFile, RemoveFile
from tahoe.txn import Transaction, create_table
from tests.conftest import GOLDEN, MANIFEST, conformance
from tests.storage.conftest import moto_server, s3_bucket, s3_env  # noqa: F401 - fixtures

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
# a clock at which half the tombstones of `_make_table` (deleted 1..24 hours ago) are past the
# default retention of 7 days
HALF_EXPIRED = 7 * DAY_MS - 12 * HOUR_MS - HOUR_MS // 2
PARTS = 3


def _paths_by_kind(table) -> list[tuple[str, str]]:
    """(kind, path or action name) of each row of a checkpoint part."""
    out = []
    for r in table.to_pylist():
        if r.get("add"):
            out.append(("add", r["add"]["path"]))
        elif r.get("remove"):
            out.append(("remove", r["remove"]["path"]))
        else:
            out.append(("other", next(k for k, v in r.items() if v is not None)))
    return sorted(out)


# --- the same parts as delta-spark ----------------------------------------------------------

@conformance
def test_parts_are_the_ones_delta_spark_writes(tmp_path):
    """Rewriting the conformance table's 2-part checkpoint puts every action in the part
    delta-spark put it in (so a set mixing delta-spark's and tahoe's parts is consistent too)."""
    entry = next(e for e in MANIFEST if e["name"] == "multi-part-checkpoint")
    src = GOLDEN / entry["table"]
    dst = tmp_path / "t"
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    for d, _, _ in os.walk(dst):
        os.chmod(d, 0o755)
    log_dir = dst / "_delta_log"
    names = sorted(p.name for p in log_dir.glob("00000000000000000001.checkpoint.*.parquet"))
    assert len(names) == 2
    theirs = [_paths_by_kind(pq.read_table(log_dir / n)) for n in names]
    for p in log_dir.iterdir():
        if ".checkpoint." in p.name or p.name in ("_last_checkpoint", "._last_checkpoint.crc"):
            p.unlink()

    write_checkpoint(DeltaLog.for_table(str(dst)), version=1, parts=2)
    ours = [_paths_by_kind(pq.read_table(log_dir / n)) for n in names]
    assert ours == theirs


# --- two writers, different clocks -----------------------------------------------------------

def _make_table(uri: str, n_files: int = 24) -> tuple[set[str], set[str]]:
    """A table whose latest version holds `n_files` active files and as many tombstones, deleted
    one hour apart (1..n hours before now), their paths interleaved: two checkpointers whose
    clocks differ by days keep different tombstones. Returns (active paths, tombstone paths)."""
    create_table(uri, "id BIGINT", [])
    log = DeltaLog.for_table(uri)
    gone = [f"f-{i:03d}-gone.parquet" for i in range(n_files)]
    live = [f"f-{i:03d}-live.parquet" for i in range(n_files)]
    txn = Transaction(log, "WRITE", {"mode": "Append"})
    txn.add_files(AddFile(p, {}, 100, 1, True, '{"numRecords":1}') for p in gone + live)
    txn.commit()
    now = int(time.time() * 1000)
    txn = Transaction(log, "DELETE", {"predicate": "[]"})
    txn.read_whole_table()
    txn.remove_files(RemoveFile(p, now - (i + 1) * HOUR_MS, True, True, {}, 100) for i, p in enumerate(gone))
    txn.commit()
    return set(live), set(gone)


def _check_reads_as(uri: str, version: int, live: set[str], gone: set[str]) -> None:
    snap = DeltaLog.for_table(uri).snapshot()
    assert snap.version == version and snap.segment.checkpoint_version == version
    assert len(snap.segment.checkpoint.files) == PARTS
    paths = snap.files_table(["path"]).column("path").to_pylist()
    assert sorted(paths) == sorted(live), "active files duplicated or missing"
    tomb = snap.tombstones_table(["path"]).column("path").to_pylist()
    assert len(tomb) == len(set(tomb)) and set(tomb) <= gone


def test_every_mix_of_two_checkpointers_parts_reads_as_the_table(tmp_path):
    """Writer A keeps every tombstone, writer B (its clock almost 7 days later) drops half:
    each of the 2^3 ways their parts can end up side by side in the log reads as the table."""
    root = tmp_path / "t"
    live, gone = _make_table(str(root))
    version = DeltaLog.for_table(str(root)).snapshot().version
    now = int(time.time() * 1000)
    written = {}
    for writer, clock in (("a", now), ("b", now + HALF_EXPIRED)):
        copy = tmp_path / writer
        shutil.copytree(root, copy)
        write_checkpoint(DeltaLog.for_table(str(copy)), parts=PARTS, now_ms=clock)
        written[writer] = sorted((copy / "_delta_log").glob("*.checkpoint.*.parquet"))
        assert len(written[writer]) == PARTS
    # the two writers really wrote different parts (B's hold fewer tombstones)
    rows = {w: sum(pq.read_metadata(p).num_rows for p in ps) for w, ps in written.items()}
    assert rows["b"] < rows["a"]

    for mix in itertools.product("ab", repeat=PARTS):
        target = tmp_path / ("mix-" + "".join(mix))
        shutil.copytree(root, target)
        for i, w in enumerate(mix):
            shutil.copyfile(written[w][i], target / "_delta_log" / written[w][i].name)
        _check_reads_as(str(target), version, live, gone)


def _race(uri: str, version: int, clocks: list[int]) -> list[BaseException]:
    """Run one checkpointer per clock at once (threads released together)."""
    barrier = threading.Barrier(len(clocks))
    errors: list[BaseException] = []

    def run(clock: int) -> None:
        try:
            log = DeltaLog.for_table(uri)
            barrier.wait()
            write_checkpoint(log, version=version, parts=PARTS, now_ms=clock)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=run, args=(c,)) for c in clocks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return errors


def _append_one(uri: str, path: str) -> int:
    txn = Transaction(DeltaLog.for_table(uri), "WRITE", {"mode": "Append"})
    txn.add_files([AddFile(path, {}, 100, 1, True, '{"numRecords":1}')])
    return txn.commit()


def _racing_checkpointers(uri: str, rounds: int) -> None:
    live, gone = _make_table(uri)
    now = int(time.time() * 1000)
    for r in range(rounds):
        version = _append_one(uri, f"f-round-{r}.parquet")
        live.add(f"f-round-{r}.parquet")
        errors = _race(uri, version, [now, now + HALF_EXPIRED, now + 30 * DAY_MS])
        assert errors == []
        _check_reads_as(uri, version, live, gone)


def test_racing_checkpointers_local(tmp_path):
    _racing_checkpointers(str(tmp_path / "t"), rounds=4)


def test_racing_checkpointers_s3(s3_bucket):
    _racing_checkpointers(f"s3://{s3_bucket}/t", rounds=2)


def test_part_count_follows_delta_spark_rule(tmp_path):
    """`delta.checkpoint.partSize` counts file actions (adds + kept tombstones), as delta-spark's
    partSize does: 24 adds + 24 tombstones at 12 per part → 4 parts (not counting protocol and
    metaData)."""
    root = str(tmp_path / "t")
    _make_table(root)
    from tahoe.txn import set_properties

    set_properties(root, {"delta.checkpoint.partSize": "12"})
    lc = write_checkpoint(DeltaLog.for_table(root), now_ms=int(time.time() * 1000))
    assert lc.parts == 4
    got = DeltaLog.for_table(root).snapshot()
    assert got.segment.checkpoint_version == lc.version and len(got.segment.checkpoint.files) == 4
    assert pc.count(got.files_table(["path"]).column("path")).as_py() == 24


def test_overlapping_and_incomplete_part_sets(tmp_path):
    """Spec "Checkpoints": readers use only a complete set. Two sets of one version (2 and 3
    parts, as two writers with different part sizes leave them) and an incomplete one (4 parts,
    one missing): the table reads from a complete set, every active file once."""
    root = str(tmp_path / "t")
    live, gone = _make_table(root)
    log_dir = Path(root) / "_delta_log"
    now = int(time.time() * 1000)
    for n in (4, 3, 2):
        write_checkpoint(DeltaLog.for_table(root), parts=n, now_ms=now)
    version = DeltaLog.for_table(root).snapshot().version
    (log_dir / f"{version:020d}.checkpoint.0000000002.0000000004.parquet").unlink()
    snap = DeltaLog.for_table(root).snapshot()
    assert snap.segment.checkpoint_version == version
    assert len(snap.segment.checkpoint.files) in (2, 3)
    assert sorted(snap.files_table(["path"]).column("path").to_pylist()) == sorted(live)
    # the 2-part set gone too: the 3-part one is used
    for p in log_dir.glob(f"{version:020d}.checkpoint.*.0000000002.parquet"):
        p.unlink()
    snap = DeltaLog.for_table(root).snapshot()
    assert len(snap.segment.checkpoint.files) == 3
    assert sorted(snap.files_table(["path"]).column("path").to_pylist()) == sorted(live)
