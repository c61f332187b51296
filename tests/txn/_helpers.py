"""Helpers for the transaction tests (also imported by spawned workers): add actions pointing at
fake parquet paths (log-level tests need no data files) that carry numRecords stats, and readers
of raw commit files."""

from __future__ import annotations

import json
import os

from tahoe.log import DeltaLog
from tahoe.log.replay import read_commit
from tahoe.protocol.actions import AddFile


def fake_add(path: str, p: str | None = None, n: int = 10, data_change: bool = True, **kw) -> AddFile:
    pv = {"p": p} if p is not None else {}
    return AddFile(path, pv, 100 + n, 1_700_000_000_000, data_change,
                   json.dumps({"numRecords": n}), **kw)


def commit_actions(table: str, version: int) -> list[dict]:
    log = DeltaLog.for_table(table)
    return read_commit(log.store, log.store.join(log.log_dir, f"{version:020d}.json"))


def commit_info(table: str, version: int) -> dict:
    first = commit_actions(table, version)[0]
    assert "commitInfo" in first, "commitInfo must be the first line"
    return first["commitInfo"]


def latest_version(table: str) -> int:
    names = [n for n in os.listdir(os.path.join(table, "_delta_log")) if n.endswith(".json") and n[0] != "."]
    return max(int(n.split(".")[0]) for n in names)
