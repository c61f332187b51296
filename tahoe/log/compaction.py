"""Writing log compaction files (spec "Log Compaction Files"): `<x>.<y>.compacted.json` holds the reconciled
actions of commits x..y (readers use them via `LogSegment.deltas`). An optional maintenance step, as
delta-rs's `compact_logs`: `compact_log(log, start, end)`, `tahoe compact-log PATH [--from N --to M]`.

  1. It covers committed versions only: x < y, every commit x..y present.
  2. Replayed in place of x..y on the state at x - 1 it gives the state at y: the newest reference per
     logical file (removes kept as tombstones), latest protocol, metaData, txn per appId, domainMetadata
     per domain (`removed` kept); commitInfo and cdc dropped.
  3. It appears whole or not at all (put-if-absent); an existing file of that name is kept."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from ..errors import CorruptLogError, VersionNotFoundError
from ..protocol.filenames import LogFileKind, compaction_file_name
from .file_actions import canonical_key, dv_unique_id, read_commit, root_uri
from .segment import complete_checkpoints, list_log

_logger = logging.getLogger(__name__)

__all__ = ["compact_log", "CompactionResult", "reconcile_commits"]


@dataclass(frozen=True)
class CompactionResult:
    start_version: int
    end_version: int
    path: str
    num_actions: int
    size_in_bytes: int
    created: bool          # False: a compaction of this range already existed and was kept

    def to_dict(self) -> dict[str, Any]:
        return {"startVersion": self.start_version, "endVersion": self.end_version, "path": self.path,
                "numActions": self.num_actions, "sizeInBytes": self.size_in_bytes, "created": self.created}


def reconcile_commits(commits: list[tuple[str, list[dict]]], table_root: str) -> list[dict]:
    """The reconciled actions of consecutive commits (each `(source, actions)`, in version order),
    as invariant 2 of the module docstring describes: non-file actions first (protocol, metaData,
    txn, domainMetadata, rowIdHighWaterMark), then adds and removes in first-reference order."""
    key_root = root_uri(table_root)
    protocol = metadata = hwm = None
    txns: dict[str, dict] = {}
    domains: dict[str, dict] = {}
    files: dict[str, tuple[str, dict]] = {}
    for source, actions in commits:
        for obj in actions:
            if (a := obj.get("add")) is not None or (a := obj.get("remove")) is not None:
                kind = "add" if obj.get("add") is not None else "remove"
                if not isinstance(a, dict) or not isinstance(a.get("path"), str):
                    raise CorruptLogError(f"{source}: {kind} action without a valid 'path': {a!r}"[:300])
                k = canonical_key(a["path"], dv_unique_id(a.get("deletionVector")), key_root)
                files.pop(k, None)          # the newest reference decides, in its own position
                files[k] = (kind, a)
            elif (p := obj.get("protocol")) is not None:
                protocol = p
            elif (m := obj.get("metaData")) is not None:
                metadata = m
            elif (t := obj.get("txn")) is not None:
                if not isinstance(t, dict) or not isinstance(t.get("appId"), str):
                    raise CorruptLogError(f"{source}: txn action without a valid 'appId': {t!r}"[:300])
                txns[t["appId"]] = t
            elif (d := obj.get("domainMetadata")) is not None:
                if not isinstance(d, dict) or not isinstance(d.get("domain"), str):
                    raise CorruptLogError(f"{source}: domainMetadata action without a valid 'domain'")
                domains[d["domain"]] = d
            elif (r := obj.get("rowIdHighWaterMark")) is not None:
                hwm = r
            # commitInfo, cdc and actions this client does not know are not reconciled state
    out: list[dict] = []
    if protocol is not None:
        out.append({"protocol": protocol})
    if metadata is not None:
        out.append({"metaData": metadata})
    out.extend({"txn": t} for t in txns.values())
    out.extend({"domainMetadata": d} for d in domains.values())
    if hwm is not None:
        out.append({"rowIdHighWaterMark": hwm})
    out.extend({kind: a} for kind, a in files.values() if kind == "add")
    out.extend({kind: a} for kind, a in files.values() if kind == "remove")
    return out


def compact_log(log: Any, start: int | None = None, end: int | None = None) -> CompactionResult:
    """Write `<start>.<end>.compacted.json` for the table of `log` (a DeltaLog). `end` defaults
    to the latest version, `start` to the version after the newest checkpoint at or before `end`
    (0 without one). VersionNotFoundError when the range is empty (start >= end) or reaches
    versions the log does not hold; an existing compaction of the range is kept."""
    store = log.store
    files = list_log(store, log.log_dir, 0)
    commits = {f.version: f for f in files if f.name.kind == LogFileKind.COMMIT}
    if not commits:
        raise VersionNotFoundError(f"{log.table_root} has no commits to compact")
    latest = max(commits)
    if end is None:
        end = latest
    if start is None:
        cps = [v for v in complete_checkpoints(files) if v < end]
        start = max(cps) + 1 if cps else min(commits)
    if start < 0 or end < 0:
        raise VersionNotFoundError(f"versions must be >= 0, got {start}..{end}")
    if end > latest:
        raise VersionNotFoundError(f"cannot compact up to version {end}: the latest version is {latest}")
    if start >= end:
        raise VersionNotFoundError(
            f"a log compaction covers at least two commits (start < end); got {start}..{end}")
    missing = [v for v in range(start, end + 1) if v not in commits]
    if missing:
        raise VersionNotFoundError(
            f"cannot compact versions {start}..{end}: commit {missing[0]} is not in the log "
            f"(the earliest commit is {min(commits)})")
    actions = reconcile_commits([(commits[v].path, list(read_commit(store, commits[v].path)))
                                 for v in range(start, end + 1)], log.table_root)
    body = "".join(json.dumps(a, separators=(",", ":"), ensure_ascii=False) + "\n" for a in actions)
    data = body.encode("utf-8")
    path = store.join(log.log_dir, compaction_file_name(start, end))
    try:
        store.write(path, data, overwrite=False)
        created = True
        size = len(data)
    except FileExistsError:
        _logger.info("log compaction %s already exists; keeping it", path)
        created = False
        name = compaction_file_name(start, end)
        size = next((st.size for st in store.list_from(path) if st.name == name), len(data))
    return CompactionResult(start, end, path, len(actions), size, created)
