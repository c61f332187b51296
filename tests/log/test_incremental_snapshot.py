"""The snapshot of a version derived from the previous one and the commit (`Snapshot.after_commit`,
what a writer keeps after committing and `tahoe.log.snapshot_cache` hands back) against two
oracles, on many random logs: a full replay of the log from disk (the same state, row for row,
in the same order), and a model of the log kept in plain dicts by this test (which files are
active, which are tombstones, the latest txn per app and the live domains)."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pyarrow as pa
import pytest

import tahoe
from tahoe import DeltaLog
from tahoe.log import snapshot_cache
from tahoe.log.checkpoints import write_checkpoint
from tahoe.log.replay import replay
from tahoe.log.segment import LogFile, LogSegment
from tahoe.log.snapshot import Snapshot
from tahoe.protocol.actions import AddFile, DomainMetadata, RemoveFile
from tahoe.protocol.filenames import commit_file_name, parse_log_file_name
from tahoe.txn import Transaction

SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "part", "type": "string", "nullable": True, "metadata": {}}]})
NOW = int(time.time() * 1000)   # tombstones younger than the retention: a checkpoint keeps them
PROTOCOL = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                         "writerFeatures": ["deletionVectors", "domainMetadata"]}}


def _metadata(conf: dict) -> dict:
    return {"metaData": {"id": "inc", "format": {"provider": "parquet", "options": {}}, "schemaString": SCHEMA,
                         "partitionColumns": ["part"], "configuration": conf, "createdTime": 1}}


def _dv(n: int) -> dict:
    return {"storageType": "u", "pathOrInlineDv": f"{n:020d}", "offset": n % 7 + 1,
            "sizeInBytes": 34, "cardinality": n % 5 + 1}


def _key(path: str, dv: dict | None) -> tuple:
    return (path, None if dv is None else (dv["pathOrInlineDv"], dv["offset"]))


class RandomLog:
    """Writes random commits to `root` as raw JSON and keeps its own model of the state."""

    def __init__(self, root: Path, rng: random.Random):
        self.root, self.rng = root, rng
        self.log_dir = root / "_delta_log"
        self.log_dir.mkdir(parents=True)
        self.version = -1
        self.active: dict[tuple, dict] = {}      # model: key → add
        self.tombs: dict[tuple, dict] = {}       # model: key → remove
        self.txns: dict[str, int] = {}
        self.domains: dict[str, str] = {}
        self.n = 0
        self.commit([{"commitInfo": {"operation": "CREATE"}}, PROTOCOL, _metadata({})])

    def _spell(self, rel: str) -> str:
        """A relative path, or the same file spelled absolute (plain or file: URI)."""
        r = self.rng.random()
        if r < 0.1:
            return f"{self.root}/{rel}"
        if r < 0.15:
            return f"file://{self.root}/{rel}"
        return rel

    def random_actions(self) -> list[dict]:
        rng = self.rng
        out: list[dict] = [{"commitInfo": {"operation": "TEST", "v": self.version + 1}}]
        used: set[tuple] = set()
        for _ in range(rng.randint(0, 6)):
            r = rng.random()
            if r < 0.45 or not self.active:            # a new file
                self.n += 1
                rel = f"part={rng.choice('abc')}/f-{self.n}.parquet"
                dv = _dv(self.n) if rng.random() < 0.2 else None
                add = {"path": self._spell(rel), "partitionValues": {"part": rel[5]}, "size": rng.randint(1, 10**6),
                       "modificationTime": 1000 + self.n, "dataChange": True,
                       "stats": json.dumps({"numRecords": rng.randint(1, 99)})}
                if dv:
                    add["deletionVector"] = dv
                k = _key(rel, dv)
                if k in used:
                    continue
                used.add(k)
                out.append({"add": add})
            elif r < 0.7:                                # remove an active file
                k, add = rng.choice(sorted(self.active.items(), key=lambda kv: str(kv[0])))
                if k in used:
                    continue
                used.add(k)
                rem = {"path": self._spell(k[0]), "deletionTimestamp": NOW + self.version, "dataChange": True,
                       "extendedFileMetadata": True, "partitionValues": add["partitionValues"], "size": add["size"]}
                if "deletionVector" in add:
                    rem["deletionVector"] = add["deletionVector"]
                out.append({"remove": rem})
            elif r < 0.8:                                # a new deletion vector on an active file
                k, add = rng.choice(sorted(self.active.items(), key=lambda kv: str(kv[0])))
                self.n += 1
                new_dv = _dv(self.n)
                nk = _key(k[0], new_dv)
                if k in used or nk in used:
                    continue
                used |= {k, nk}
                rem = {"path": k[0], "deletionTimestamp": NOW + 1 + self.version, "dataChange": True,
                       "partitionValues": add["partitionValues"], "size": add["size"]}
                if "deletionVector" in add:
                    rem["deletionVector"] = add["deletionVector"]
                out.append({"remove": rem})
                out.append({"add": dict(add, path=k[0], deletionVector=new_dv, dataChange=True)})
            elif r < 0.85 and self.tombs:                # a tombstone's file added back (dataChange=false)
                k, rem = rng.choice(sorted(self.tombs.items(), key=lambda kv: str(kv[0])))
                if k in used or rem.get("size") is None:
                    continue
                used.add(k)
                add = {"path": k[0], "partitionValues": rem.get("partitionValues") or {"part": "a"},
                       "size": rem["size"], "modificationTime": 1, "dataChange": False}
                if k[1] is not None:
                    add["deletionVector"] = rem["deletionVector"]
                out.append({"add": add})
            elif r < 0.92:
                app = rng.choice(["app-1", "app-2", "app-3"])
                out.append({"txn": {"appId": app, "version": rng.randint(0, 100), "lastUpdated": 7}})
            elif r < 0.97:
                dom = rng.choice(["d1", "d2"])
                out.append({"domainMetadata": {"domain": dom, "configuration": f"c{self.version}",
                                               "removed": dom in self.domains and rng.random() < 0.5}})
            else:
                out.append(_metadata({"user.k": str(self.version)}))
        return out

    def commit(self, actions: list[dict]) -> LogFile:
        self.version += 1
        path = self.log_dir / commit_file_name(self.version)
        path.write_text("".join(json.dumps(a) + "\n" for a in actions))
        for a in actions:   # the model: newest reference of a key wins
            if "add" in a:
                k = _key(self._rel(a["add"]["path"]), a["add"].get("deletionVector"))
                self.active[k] = a["add"]
                self.tombs.pop(k, None)
            elif "remove" in a:
                k = _key(self._rel(a["remove"]["path"]), a["remove"].get("deletionVector"))
                self.active.pop(k, None)
                self.tombs[k] = a["remove"]
            elif "txn" in a:
                self.txns[a["txn"]["appId"]] = a["txn"]["version"]
            elif "domainMetadata" in a:
                d = a["domainMetadata"]
                if d["removed"]:
                    self.domains.pop(d["domain"], None)
                else:
                    self.domains[d["domain"]] = d["configuration"]
        st = os.stat(path)
        from tahoe.storage.base import FileStatus

        name = parse_log_file_name(path.name)
        assert name is not None
        return LogFile(FileStatus(str(path), st.st_size, st.st_mtime_ns // 1_000_000), name)

    def _rel(self, p: str) -> str:
        for prefix in (f"file://{self.root}/", f"{self.root}/"):
            if p.startswith(prefix):
                return p[len(prefix):]
        return p


def full_replay(root: Path, version: int) -> Snapshot:
    """The oracle: the version replayed from the files on disk (no kept snapshot)."""
    log = DeltaLog.for_table(str(root))
    seg = LogSegment.for_version(log.store, log.table_root, version)
    return Snapshot(log.store, log.table_root, seg, replay(log.store, log.table_root, seg))


def state(snap: Snapshot) -> dict:
    return {
        "version": snap.version,
        "protocol": snap.protocol.to_action_dict(),
        "metadata": snap.metadata.to_action_dict(),
        "txns": {k: v.to_action_dict() for k, v in snap.set_transactions.items()},
        "domains": {k: v.to_action_dict() for k, v in snap.domain_metadata.items()},
        # row order too; not compared: dataChange (a checkpoint writes every action with false)
        # and a tombstone's stats (a checkpoint's remove has none)
        "files": snap.files_table().drop_columns(["dataChange"]).to_pylist(),
        "tombstones": snap.tombstones_table().drop_columns(["dataChange", "stats"]).to_pylist(),
        "timestamp": snap.timestamp,
    }


def check_model(snap: Snapshot, model: RandomLog) -> None:
    def keys(t: pa.Table) -> list:
        return sorted((_key(model._rel(r["path"]), r["deletionVector"]) for r in t.to_pylist()), key=str)

    assert keys(snap.files_table(["path", "deletionVector"])) == sorted(model.active, key=str)
    assert keys(snap.tombstones_table(["path", "deletionVector"])) == sorted(model.tombs, key=str)
    assert {k: t.version for k, t in snap.set_transactions.items()} == model.txns
    assert {k: d.configuration for k, d in snap.domain_metadata.items()} == model.domains


@pytest.mark.parametrize("seed", range(12))
def test_derived_snapshots_match_a_full_replay_on_random_logs(tmp_path, seed):
    rng = random.Random(seed)
    model = RandomLog(tmp_path / "t", rng)
    log = DeltaLog.for_table(str(model.root))
    snap = full_replay(model.root, 0)
    for _ in range(40):
        c = model.commit(model.random_actions())
        if rng.random() < 0.5:
            state(snap)   # materialize the previous one's tables first: the derived one shares its reads
        derived = snap.after_commit(c, (model.log_dir / c.path.rsplit("/", 1)[1]).read_bytes())
        assert derived is not None
        oracle = full_replay(model.root, c.version)
        assert state(derived) == state(oracle)
        check_model(derived, model)
        if rng.random() < 0.15:
            write_checkpoint(log, c.version)   # later full replays start from it; the chain does not
        # go on from the derived snapshot (errors would pile up), or now and then from a fresh load
        snap = derived if rng.random() < 0.8 else full_replay(model.root, c.version)


def test_derived_after_a_large_vectorised_commit(tmp_path):
    """A commit large enough to be replayed vectorised is not derived (a full replay does it);
    small commits after it are, on top of the vectorised tail."""
    rng = random.Random(7)
    model = RandomLog(tmp_path / "t", rng)
    big = [{"commitInfo": {"operation": "WRITE"}}]
    for i in range(4000):
        big.append({"add": {"path": f"part=a/big-{i}.parquet", "partitionValues": {"part": "a"}, "size": 10 + i,
                            "modificationTime": 1, "dataChange": True,
                            "stats": json.dumps({"numRecords": 1, "minValues": {"id": i}, "maxValues": {"id": i},
                                                 "nullCount": {"id": 0}, "pad": "x" * 200})}})
    snap = full_replay(model.root, 0)
    c = model.commit(big)
    assert c.status.size >= 1 << 20
    assert snap.after_commit(c, Path(c.path).read_bytes()) is None
    snap = full_replay(model.root, c.version)
    for _ in range(15):
        c = model.commit(model.random_actions())
        snap = snap.after_commit(c, Path(c.path).read_bytes())
        assert snap is not None
        assert state(snap) == state(full_replay(model.root, c.version))
        check_model(snap, model)


def test_a_writer_keeps_its_committed_snapshot(tmp_path):
    """After each commit the transaction's derived snapshot equals a full replay, and the next
    load of the table returns it while the log is unchanged; a tampered file, a commit of
    another writer, or a new checkpoint are seen."""
    path = str(tmp_path / "t")
    rng = random.Random(3)
    tahoe.write_table(path, pa.table({"id": pa.array([0], pa.int64()), "part": ["a"]}), partition_by=["part"],
                      properties={"delta.checkpointInterval": "4", "delta.feature.domainMetadata": "supported"})
    log = DeltaLog.for_table(path)
    for i in range(1, 14):
        snap = log.snapshot()
        txn = Transaction(log, "WRITE", {"mode": "Append"}, snapshot=snap)
        files = snap.add_files()
        if files and rng.random() < 0.3:
            txn.remove_files([files[0]])
        txn.add_files([AddFile(path=f"part=b/x-{i}.parquet", partition_values={"part": "b"}, size=100 + i,
                               modification_time=i, stats='{"numRecords":1}')])
        if rng.random() < 0.3:
            txn.set_txn("app", i)
        if rng.random() < 0.3:
            txn.set_domain_metadata(DomainMetadata("my.domain", f"c{i}", False))
        v = txn.commit()
        post = txn.committed_snapshot
        assert post is not None and post.version == v
        assert state(post) == state(full_replay(Path(path), v))
        if v % 4 == 0:
            # a checkpoint was written after the commit: the snapshot kept is the one a fresh load
            # builds from it (made from the Arrow table written), and it goes on from there
            rebased = log.snapshot()
            assert rebased is not post and rebased.segment.checkpoint_version == v and not rebased.segment.commits
            assert state(rebased) == state(full_replay(Path(path), v))
            assert log.snapshot() is rebased
        else:
            assert log.snapshot() is post and DeltaLog.for_table(path).snapshot(version=v) is post

    # another writer's commit is replayed on top of the kept snapshot
    v = txn.committed_version
    other = [{"commitInfo": {"operation": "OTHER"}},
             {"remove": {"path": "part=b/x-13.parquet", "deletionTimestamp": NOW, "dataChange": True}}]
    p = Path(path) / "_delta_log" / commit_file_name(v + 1)
    p.write_text("".join(json.dumps(a) + "\n" for a in other))
    caught_up = log.snapshot()
    assert caught_up.version == v + 1
    assert state(caught_up) == state(full_replay(Path(path), v + 1))
    assert log.snapshot() is caught_up

    # a file the kept snapshot was built from, replaced: a fresh load
    p.write_text("".join(json.dumps(a) + "\n" for a in other[:1]))
    os.utime(p, ns=(1, 1))
    fresh = log.snapshot()
    assert fresh is not caught_up and "part=b/x-13.parquet" in fresh.files_table(["path"]).column("path").to_pylist()


def test_a_vanished_table_is_not_served_from_memory(tmp_path):
    path = tmp_path / "t"
    tahoe.write_table(str(path), pa.table({"id": [1]}))
    tahoe.write_table(str(path), pa.table({"id": [2]}))
    assert DeltaLog.for_table(str(path)).snapshot().version == 1
    import shutil

    shutil.rmtree(path)
    tahoe.write_table(str(path), pa.table({"id": [5]}))
    snap = DeltaLog.for_table(str(path)).snapshot()
    assert snap.version == 0 and snap.num_files == 1
    snapshot_cache.forget(snap.store, snap.table_root)
