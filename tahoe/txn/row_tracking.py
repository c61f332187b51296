"""Row tracking (spec "Row Tracking", the `rowTracking` feature), the writer's part.

  1. On a table that supports the feature, the metadata names the materialized row id and row
     commit version columns (`name_materialized_columns`).
  2. Enabling `delta.enableRowTracking` on a table with data needs a `baseRowId` on every file, or
     every file without one re-added in the same commit (`check_backfilled`).
  3. Every new add gets a fresh `baseRowId` from the `delta.rowTracking` domain's high-water mark
     (`numRecords` from its stats is required) and a `defaultRowCommitVersion`; the domain records
     the new high-water mark (`assign_row_ids`, applied per attempt: a rebase reassigns them).
  4. Removes carry their add's `baseRowId` and `defaultRowCommitVersion` (`fill_remove_row_ids`).
Not while `delta.rowTrackingSuspended` is true.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import TYPE_CHECKING, Any, Callable

from ..errors import InvalidTableOperationError
from ..protocol.actions import AddFile, DomainMetadata, Metadata, Protocol, RemoveFile
from ..protocol.properties import (
    ROW_COMMIT_VERSION_COLUMN_PROP, ROW_ID_COLUMN_PROP, bool_property, raw_property,
)
from ..protocol.table_features import is_feature_supported
from .attempt import Attempt

if TYPE_CHECKING:  # pragma: no cover
    from ..log.snapshot import Snapshot

__all__ = ["assign_row_ids", "name_materialized_columns", "check_backfilled", "fill_remove_row_ids",
           "ROW_TRACKING_DOMAIN", "ROW_TRACKING_PRESERVED_TAG"]

ROW_TRACKING_DOMAIN = "delta.rowTracking"
ROW_TRACKING_PRESERVED_TAG = "delta.rowTracking.preserved"


def name_materialized_columns(md: Metadata, protocol: Protocol) -> Metadata:
    """Rule 1: `md` with fresh names for the materialized columns when it has none."""
    if not is_feature_supported(protocol, "rowTracking") or raw_property(md.configuration, ROW_ID_COLUMN_PROP) is not None:
        return md
    conf = dict(md.configuration)
    conf[ROW_ID_COLUMN_PROP] = f"_row-id-col-{uuid.uuid4()}"
    conf[ROW_COMMIT_VERSION_COLUMN_PROP] = f"_row-commit-version-col-{uuid.uuid4()}"
    return dataclasses.replace(md, configuration=conf)


def check_backfilled(snapshot: Snapshot, adds: list[AddFile], removes: list[RemoveFile],
                     key: Callable[[str], str]) -> None:
    """Rule 2 (`key`: a path as the log compares paths)."""
    t = snapshot.files_table(["path", "baseRowId"])
    readded = {key(a.path) for a in adds if a.base_row_id is None}
    removed = {key(r.path) for r in removes}
    for path, brid in zip(t.column("path").to_pylist(), t.column("baseRowId").to_pylist()):
        if brid is None:
            k = key(path)
            if k not in readded and k not in removed:
                raise InvalidTableOperationError(
                    f"cannot enable row tracking: file {path} has no baseRowId; re-add every "
                    f"file with row ids assigned in the same commit (table_ops.set_properties "
                    f"does this)")


def fill_remove_row_ids(snapshot: Snapshot | None, removes: list[RemoveFile],
                        key: Callable[[str], str]) -> list[RemoveFile]:
    """Rule 4: `removes` with the row ids of the files they remove, as of `snapshot`."""
    missing = [r for r in removes if r.base_row_id is None]
    if not missing or snapshot is None:
        return removes
    t = snapshot.files_table(["path", "baseRowId", "defaultRowCommitVersion"])
    by_key = {}
    for p, b, d in zip(t.column("path").to_pylist(), t.column("baseRowId").to_pylist(),
                       t.column("defaultRowCommitVersion").to_pylist()):
        if b is not None:
            by_key[key(p)] = (b, d)
    out = []
    for r in removes:
        hit = by_key.get(key(r.path)) if r.base_row_id is None else None
        if hit is not None:
            r = dataclasses.replace(r, base_row_id=hit[0],
                                    default_row_commit_version=r.default_row_commit_version
                                    if r.default_row_commit_version is not None else hit[1])
        out.append(r)
    return out


def assign_row_ids(a: Attempt) -> None:
    """Rules 3 and 4 for the attempt: its adds with row ids, the domain's new high-water mark,
    its removes with their row ids."""
    if not is_feature_supported(a.protocol, "rowTracking") or bool_property(a.configuration, "delta.rowTrackingSuspended"):
        return
    if ROW_TRACKING_DOMAIN in a.domains:
        raise InvalidTableOperationError(
            f"the '{ROW_TRACKING_DOMAIN}' domain is maintained by the transaction itself")
    hwm = a.row_id_high_water_mark
    assigned = False
    adds = []
    for f in a.adds:
        changes: dict[str, Any] = {}
        if f.base_row_id is None or f.base_row_id > a.read_row_id_high_water_mark:
            n = f.num_records
            if n is None:
                raise InvalidTableOperationError(
                    f"add {f.path}: row tracking needs numRecords in the file's stats to "
                    f"assign row ids")
            changes["base_row_id"] = hwm + 1
            hwm += int(n)
            assigned = True
        if f.default_row_commit_version is None:
            changes["default_row_commit_version"] = a.version
        adds.append(dataclasses.replace(f, **changes) if changes else f)
    a.adds = adds
    if assigned:
        a.rule_domains.append(DomainMetadata(ROW_TRACKING_DOMAIN,
                                             json.dumps({"rowIdHighWaterMark": hwm}, separators=(",", ":"))))
    a.removes = a.removes_with_row_ids
