"""FSCK (deltalake's `DeltaTable.repair`): the active files whose data file is gone from storage
are removed from the table in one commit, operation "FSCK", so that the table reads again.

  1. Every active file is looked up in the table's store (in parallel); a missing one is listed.
  2. `dry_run`: the list only. Otherwise one commit removes them (dataChange=true, as delta-rs
     writes it), with delta-rs's metrics `dry_run` and `files_removed` (a JSON list of paths);
     nothing missing: no commit.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..storage import resolve_data_path
from ..txn import Transaction

__all__ = ["repair"]


def repair(log: Any, dry_run: bool = False) -> dict[str, Any]:
    """{"dry_run": ..., "files_removed": [paths as the log names them]}; see the module docstring."""
    snap = log.snapshot()
    adds = snap.add_files()
    store = snap.store

    def missing(add) -> bool:
        return not store.exists(resolve_data_path(snap.table_root, add.path))

    with ThreadPoolExecutor(max_workers=8) as pool:
        gone = [a for a, m in zip(adds, pool.map(missing, adds)) if m]
    paths = [a.path for a in gone]
    if gone and not dry_run:
        txn = Transaction(log, "FSCK", {}, snapshot=snap)
        txn.read_files(gone)
        txn.remove_files(gone)
        txn.commit({"dry_run": False, "files_removed": json.dumps(paths)})
    return {"dry_run": dry_run, "files_removed": paths}
