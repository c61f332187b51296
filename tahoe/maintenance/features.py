"""DROP FEATURE: remove a table feature and downgrade the protocol as current delta-spark does
(`dropFeatureSupport(name, truncateHistory)`; spec "Checkpoint Protection"). `addFeatureSupport` and
`upgradeTableProtocol` live in `tahoe.txn.table_ops`.

  1. Pre-downgrade steps, each its own commit (`_pre_downgrade`): e.g. deletionVectors purged and DV tombstones
     written, columnMapping removed by rewriting, row ids unbackfilled; checkConstraints refused while any exist.
  2. The downgrade commits `DROP FEATURE` (featureName, truncateHistory) with the lowest protocol form.
  3. Without `truncate_history` a reader-writer feature's history is protected: checkpoints around the drop,
     `checkpointProtection` and `delta.requireCheckpointProtectionBeforeVersion` added.
  4. With it the log before the drop is cleaned up (24 hours); commits still using the feature refuse the drop
     (DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST).
  5. Every refusal is a DropFeatureError naming delta-spark's error class."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import DropFeatureError
from ..log import DeltaLog, Snapshot
from ..log.checkpoints import write_checkpoint
from ..log.metadata_cleanup import cleanup_expired_logs
from ..log.replay import read_commit
from ..log.segment import complete_checkpoints, list_log
from ..protocol import column_mapping
from ..protocol.actions import AddFile, Protocol, RemoveFile
from ..protocol.filenames import LogFileKind
from ..protocol.properties import (
    ENABLE_DELETION_VECTORS, ENABLE_ROW_TRACKING, ROW_COMMIT_VERSION_COLUMN_PROP, ROW_ID_COLUMN_PROP,
    TYPE_CHANGES, bool_property, constraints_of, enum_property, int_property, interval_property_ms, raw_property,
)
from ..protocol.schema import ArrayType, MapType, StructField, StructType, to_arrow_type
from ..protocol.table_features import (
    FEATURES, canonical_feature_name, protocol_for_features, reader_features_of, writer_features_of,
)
from ..protocol import timestamps
from ..read.arrow_reader import ArrowFileReader
from ..storage import resolve_data_path
from ..txn import Transaction, set_properties, unset_properties
from ..txn.checkpoint_protection import CHECKPOINT_PROTECTION_KEY
from ..write.commit import commit_new_files
from ..storage import encode_log_path
from ..write.files import write_data_files
from ..log.snapshot import add_files_from_table
from ..protocol.deletion_vectors import DeletionVectorDescriptor

__all__ = ["drop_feature", "REMOVABLE_FEATURES", "purge_deletion_vectors", "protocol_without"]

Progress = Callable[[str, int, int], None]

ICT_KEYS = ("delta.enableInCommitTimestamps", "delta.inCommitTimestampEnablementVersion",
            "delta.inCommitTimestampEnablementTimestamp")


@dataclass(frozen=True)
class _Removable:
    history_protection: bool      # leaves traces in the history older readers must not replay


REMOVABLE_FEATURES: dict[str, _Removable] = {
    "deletionVectors": _Removable(True),
    "v2Checkpoint": _Removable(True),
    "typeWidening": _Removable(True),
    "typeWidening-preview": _Removable(True),
    "columnMapping": _Removable(True),
    "vacuumProtocolCheck": _Removable(True),
    "checkConstraints": _Removable(False),
    "inCommitTimestamp": _Removable(False),
    "rowTracking": _Removable(False),
    "domainMetadata": _Removable(False),
    "checkpointProtection": _Removable(False),
}


def _features(p: Protocol) -> set[str]:
    return reader_features_of(p) | writer_features_of(p)


def protocol_without(p: Protocol, feature: str, add: Iterable[str] = ()) -> Protocol:
    """`p` without `feature` (plus `add`), normalized: the lowest protocol holding the rest."""
    keep = (_features(p) - {feature}) | set(add)
    return protocol_for_features(keep)


# --- rewriting files -----------------------------------------------------------------------------

def _rewrite(log: DeltaLog, snap: Snapshot, files: list[AddFile], operation: str, params: dict,
             schema: StructType | None = None, mode: str | None = None, configuration: dict | None = None,
             metadata=None, replace_table: bool = False, progress: Progress | None = None) -> int | None:
    """Rewrite `files` (deletion vectors applied) into new files of the same partitions, in
    `schema` / column-mapping `mode` when given, and commit removes + adds with dataChange=false.
    Returns the version, None when there was nothing to rewrite."""
    if not files:
        return None
    reader = ArrowFileReader(snap.store, snap.table_root, snap.schema, snap.partition_columns,
                             snap.column_mapping_mode)
    out_schema = schema or snap.schema
    out_mode = mode or snap.column_mapping_mode
    conf = configuration if configuration is not None else snap.configuration
    adds: list[AddFile] = []
    now = timestamps.now_ms()
    for i, f in enumerate(files):
        rows = reader.read_file(f.path, f.partition_values, f.deletion_vector)
        if rows.num_rows:
            new = write_data_files(snap.store, snap.table_root, rows, out_schema, snap.partition_columns,
                                   out_mode, conf)
            adds.extend(dataclasses.replace(a, data_change=False) for a in new)
        if progress is not None:
            progress("rewriting files", i + 1, len(files))
    removes = [f.remove(now, data_change=False) for f in files]
    txn = Transaction(log, operation, params, snapshot=snap)
    n_dvs = sum(1 for f in files if f.deletion_vector is not None)

    def stage(t: Transaction) -> dict:
        t.read_files(files)
        if replace_table:
            t.replace_table()
        if metadata is not None:
            t.update_metadata(metadata)
        t.remove_files(removes)
        t.add_files(adds)
        return {"numRemovedFiles": len(removes), "numAddedFiles": len(adds),
                "numRemovedBytes": sum(f.size for f in files), "numAddedBytes": sum(a.size for a in adds),
                "numDeletionVectorsRemoved": n_dvs}

    return commit_new_files(txn, adds, stage)


def purge_deletion_vectors(table: str | DeltaLog, storage_options: dict | None = None,
                           progress: Progress | None = None) -> int | None:
    """REORG TABLE ... APPLY (PURGE): every file with a deletion vector rewritten without its
    deleted rows, one dataChange=false commit (operation REORG). Returns the version, or None
    when no file has a deletion vector."""
    log = table if isinstance(table, DeltaLog) else DeltaLog.for_table(table, storage_options)
    snap = log.snapshot()
    t = snap.files_table()
    with_dv = t.filter(pc.is_valid(t.column("deletionVector")))

    return _rewrite(log, snap, add_files_from_table(with_dv), "REORG",
                    {"predicate": "[]", "applyPurge": True}, progress=progress)


# --- checks --------------------------------------------------------------------------------------

def _traces(snap: Snapshot, feature: str) -> str | None:
    """What of `feature` the latest version still uses (None: nothing — delta-spark's
    validateRemoval)."""
    conf = snap.configuration
    if feature == "deletionVectors":
        if bool_property(conf, ENABLE_DELETION_VECTORS):
            return f"{ENABLE_DELETION_VECTORS} is true"
        dvs = snap.files_table(["deletionVector"]).column("deletionVector")
        n = len(dvs) - dvs.null_count
        return f"{n} file(s) have deletion vectors" if n else None
    if feature == "v2Checkpoint":
        if enum_property(conf, "delta.checkpointPolicy") == "v2":
            return "delta.checkpointPolicy is v2"
        cp = snap.segment.checkpoint
        if cp is not None and cp.kind == LogFileKind.V2_CHECKPOINT:
            return "the latest checkpoint is a v2 checkpoint"
        return None
    if feature in ("typeWidening", "typeWidening-preview"):
        if bool_property(conf, "delta.enableTypeWidening"):
            return "delta.enableTypeWidening is true"
        return "columns carry delta.typeChanges metadata" if _has_type_changes(snap.schema) else None
    if feature == "columnMapping":
        if column_mapping.mode(conf) != "none":
            return f"delta.columnMapping.mode is {column_mapping.mode(conf)}"
        return None
    if feature == "checkConstraints":
        names = sorted(constraints_of(conf))
        return f"CHECK constraints {names}" if names else None
    if feature == "inCommitTimestamp":
        present = [k for k in ICT_KEYS[1:] if k in conf]
        if bool_property(conf, "delta.enableInCommitTimestamps") or present:
            return "in-commit timestamps are enabled (or their enablement properties are set)"
        return None
    if feature == "rowTracking":
        if bool_property(conf, ENABLE_ROW_TRACKING):
            return f"{ENABLE_ROW_TRACKING} is true"
        ids = snap.files_table(["baseRowId"]).column("baseRowId")
        return f"{len(ids) - ids.null_count} file(s) carry row ids" if ids.null_count < len(ids) else None
    if feature == "domainMetadata":
        domains = sorted(snap.domain_metadata)
        return f"metadata domains {domains}" if domains else None
    if feature == "checkpointProtection":
        return f"{CHECKPOINT_PROTECTION_KEY} is set" if raw_property(conf, CHECKPOINT_PROTECTION_KEY) is not None else None
    return None


def _has_type_changes(dt) -> bool:
    if isinstance(dt, StructType):
        return any(TYPE_CHANGES in f.metadata or _has_type_changes(f.type) for f in dt.fields)
    if isinstance(dt, ArrayType):
        return _has_type_changes(dt.element_type)
    if isinstance(dt, MapType):
        return _has_type_changes(dt.key_type) or _has_type_changes(dt.value_type)
    return False


def _strip_field_metadata(dt, keys: tuple[str, ...]):
    if isinstance(dt, StructType):
        return StructType([StructField(f.name, _strip_field_metadata(f.type, keys), f.nullable,
                                       {k: v for k, v in f.metadata.items() if not k.startswith(keys)})
                           for f in dt.fields])
    if isinstance(dt, ArrayType):
        return ArrayType(_strip_field_metadata(dt.element_type, keys), dt.contains_null)
    if isinstance(dt, MapType):
        return MapType(_strip_field_metadata(dt.key_type, keys), _strip_field_metadata(dt.value_type, keys),
                       dt.value_contains_null)
    return dt


def _action_uses(feature: str, obj: dict) -> bool:
    """delta-spark's actionUsesFeature (for the features whose history must be clean)."""
    if feature == "deletionVectors":
        md = obj.get("metaData")
        if isinstance(md, dict):
            return bool(bool_property(md.get("configuration"), ENABLE_DELETION_VECTORS))
        for k in ("add", "remove", "cdc"):
            a = obj.get(k)
            if isinstance(a, dict) and a.get("deletionVector"):
                return True
        return False
    if feature == "v2Checkpoint":
        md = obj.get("metaData")
        return isinstance(md, dict) and enum_property(md.get("configuration"), "delta.checkpointPolicy") == "v2" \
            or "checkpointMetadata" in obj or "sidecar" in obj
    if feature in ("typeWidening", "typeWidening-preview"):
        md = obj.get("metaData")
        return isinstance(md, dict) and TYPE_CHANGES in (md.get("schemaString") or "")
    if feature == "columnMapping":
        md = obj.get("metaData")
        return isinstance(md, dict) and enum_property(md.get("configuration"), "delta.columnMapping.mode") != "none"
    return False


def _history_uses(log: DeltaLog, feature: str, up_to: int) -> int | None:
    """The first commit (<= up_to) still in the log that uses `feature`, or None."""
    for f in list_log(log.store, log.log_dir, 0):
        if f.name.kind != LogFileKind.COMMIT or f.version > up_to:
            continue
        if any(_action_uses(feature, obj) for obj in read_commit(log.store, f.path)):
            return f.version
    files = list_log(log.store, log.log_dir, 0)
    cps = sorted(complete_checkpoints(files))
    if cps and feature not in ("vacuumProtocolCheck",):
        earliest = log.snapshot(version=cps[0])
        if feature == "deletionVectors":
            dvs = earliest.files_table(["deletionVector"]).column("deletionVector")
            if dvs.null_count < len(dvs) or bool_property(earliest.configuration, ENABLE_DELETION_VECTORS):
                return cps[0]
        elif _action_uses(feature, {"metaData": earliest.metadata.to_dict()}):
            return cps[0]
    return None


# --- pre-downgrade steps ---------------------------------------------------------------------------

def _dv_tombstones(log: DeltaLog) -> int | None:
    """A remove (dataChange=false) for every on-disk deletion-vector file the retained tombstones
    reference and no tombstone names yet (delta-spark's "Deletion Vector Tombstones")."""
    snap = log.snapshot()
    tomb = snap.tombstones_table(["path", "deletionVector"])
    if not tomb.num_rows:
        return None

    named = set(tomb.filter(pc.is_null(tomb.column("deletionVector"))).column("path").to_pylist())
    paths: list[str] = []
    for dv in tomb.filter(pc.is_valid(tomb.column("deletionVector"))).column("deletionVector").to_pylist():
        d = DeletionVectorDescriptor.from_dict(dv)
        if d.storage_type == "u":
            p = encode_log_path(d.relative_path())
        elif d.storage_type == "p":
            p = d.path_or_inline_dv
        else:
            continue
        if p not in named:
            named.add(p)
            paths.append(p)
    if not paths:
        return None
    now = timestamps.now_ms()
    txn = Transaction(log, "Deletion Vector Tombstones", {}, snapshot=snap)
    txn.remove_files([RemoveFile(path=p, deletion_timestamp=now, data_change=False) for p in paths])
    return txn.commit(operation_metrics={"dvTombstonesWithinRetentionPeriod": len(paths)})


def _type_widening_rewrite(log: DeltaLog, progress: Progress | None) -> None:
    snap = log.snapshot()
    widened = {f.name for f in snap.schema.fields if TYPE_CHANGES in f.metadata or _has_type_changes(f.type)}
    if widened:
        phys = {n: column_mapping.physical_name(snap.schema.field(n)) if snap.column_mapping_mode != "none" else n
                for n in widened}
        need = []
        for a in snap.add_files():
            full = resolve_data_path(snap.table_root, a.path)
            with snap.store.open_input_file(full) as fh:
                file_schema = pq.ParquetFile(fh).schema_arrow
            for n in widened:
                want = to_arrow_type(snap.schema.field(n).type)
                idx = file_schema.get_field_index(phys[n])
                if idx >= 0 and file_schema.field(idx).type != want:
                    need.append(a)
                    break
        _rewrite(log, snap, need, "REORG", {"predicate": "[]", "applyPurge": False}, progress=progress)
        snap = log.snapshot()
    if _has_type_changes(snap.schema):
        schema = _strip_field_metadata(snap.schema, (TYPE_CHANGES,))
        txn = Transaction(log, "DROP FEATURE", {"columns": json.dumps([f.name for f in schema.fields])}, snapshot=snap)
        txn.update_metadata(dataclasses.replace(snap.metadata, schema_string=schema.to_json()))
        txn.commit()


def _remove_column_mapping(log: DeltaLog, progress: Progress | None) -> None:
    snap = log.snapshot()
    if column_mapping.mode(snap.configuration) == "none":
        return
    schema = _strip_field_metadata(snap.schema, ("delta.columnMapping.",))
    conf = {k: v for k, v in snap.configuration.items()
            if k not in (column_mapping.MODE_KEY, column_mapping.MAX_COLUMN_ID_KEY)}
    md = dataclasses.replace(snap.metadata, schema_string=schema.to_json(), configuration=conf)
    files = snap.add_files()
    if not files:
        txn = Transaction(log, "REMOVE COLUMN MAPPING", {}, snapshot=snap)
        txn.replace_table()
        txn.update_metadata(md)
        txn.commit()
        return
    _rewrite(log, snap, files, "REMOVE COLUMN MAPPING", {}, schema=schema, mode="none", configuration=conf,
             metadata=md, replace_table=True, progress=progress)


def _unbackfill_row_ids(log: DeltaLog) -> None:
    snap = log.snapshot()
    t = snap.files_table()
    with_ids = t.filter(pc.is_valid(t.column("baseRowId")))
    if not with_ids.num_rows:
        return

    adds = [dataclasses.replace(a, data_change=False, base_row_id=None, default_row_commit_version=None)
            for a in add_files_from_table(with_ids)]
    txn = Transaction(log, "ROW TRACKING UNBACKFILL", {}, snapshot=snap)
    txn.read_files(adds)
    txn.add_files(adds)
    txn.commit(operation_metrics={"numUnbackfilledFiles": len(adds)})


def _pre_downgrade(log: DeltaLog, feature: str, truncate_history: bool, progress: Progress | None) -> bool:
    """Remove what of `feature` the latest version uses, each step its own commit; True when it committed anything.

      1. deletionVectors: property unset, DVs purged (REORG ... APPLY (PURGE)), then "Deletion Vector
         Tombstones" for the DV files retained tombstones reference;
      2. v2Checkpoint: `delta.checkpointPolicy=classic`, then a classic checkpoint;
      3. typeWidening(-preview): property unset, files of other parquet types rewritten, `delta.typeChanges` gone;
      4. columnMapping: files rewritten with logical names ("REMOVE COLUMN MAPPING");
      5. vacuumProtocolCheck: nothing; checkConstraints: refused while constraints exist;
      6. inCommitTimestamp: `delta.enableInCommitTimestamps=false`, enablement properties removed;
      7. rowTracking: disabled and suspended, files re-added without row ids ("ROW TRACKING UNBACKFILL");
      8. domainMetadata: after rowTracking and clustering, their domains removed ("DOMAIN METADATA CLEANUP");
         user domains must go first;
      9. checkpointProtection: only with `truncate_history`, history before
         `delta.requireCheckpointProtectionBeforeVersion` truncated (24 hours), else wait."""
    snap = log.snapshot()
    before = snap.version
    conf = snap.configuration
    if feature == "deletionVectors":
        if raw_property(conf, ENABLE_DELETION_VECTORS) is not None:
            unset_properties(log, [ENABLE_DELETION_VECTORS], if_exists=True)
        purge_deletion_vectors(log, progress=progress)
        _dv_tombstones(log)
    elif feature == "v2Checkpoint":
        if enum_property(conf, "delta.checkpointPolicy") == "v2":
            set_properties(log, {"delta.checkpointPolicy": "classic"})
            write_checkpoint(log)
    elif feature in ("typeWidening", "typeWidening-preview"):
        if raw_property(conf, "delta.enableTypeWidening") is not None:
            unset_properties(log, ["delta.enableTypeWidening"], if_exists=True)
        _type_widening_rewrite(log, progress)
    elif feature == "columnMapping":
        _remove_column_mapping(log, progress)
    elif feature == "checkConstraints":
        names = sorted(constraints_of(conf))
        if names:
            raise DropFeatureError(
                f"Cannot drop the checkConstraints table feature: the table has CHECK constraints {names}; "
                f"drop them first (ALTER TABLE ... DROP CONSTRAINT / Table.drop_constraint)",
                "DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE")
    elif feature == "inCommitTimestamp":
        if _traces(snap, feature):
            new_conf = {k: v for k, v in conf.items() if k not in ICT_KEYS[1:]}
            if bool_property(conf, "delta.enableInCommitTimestamps"):
                new_conf["delta.enableInCommitTimestamps"] = "false"
            txn = Transaction(log, "UNSET TBLPROPERTIES", {"properties": list(ICT_KEYS), "ifExists": True},
                              snapshot=snap)
            txn.update_metadata(dataclasses.replace(snap.metadata, configuration=new_conf))
            txn.commit()
    elif feature == "rowTracking":
        if bool_property(conf, ENABLE_ROW_TRACKING) or not bool_property(conf, "delta.rowTrackingSuspended"):
            set_properties(log, {ENABLE_ROW_TRACKING: "false", "delta.rowTrackingSuspended": "true"})
        _unbackfill_row_ids(log)
    elif feature == "domainMetadata":
        user = sorted(d for d in snap.domain_metadata if not d.lower().startswith("delta."))
        if user:
            raise DropFeatureError(
                f"Cannot drop the domainMetadata table feature: the table has metadata domains {user}; "
                f"remove them first", "DELTA_FEATURE_DROP_DOMAIN_METADATA_IN_USE")
        system = sorted(snap.domain_metadata)
        if system:
            txn = Transaction(log, "DOMAIN METADATA CLEANUP", {}, snapshot=snap)
            for d in system:
                txn.remove_feature_domain(d)
            txn.commit()
    elif feature == "checkpointProtection":
        _truncate_before_protection(log)
    return log.snapshot().version != before


def _history_truncated_before(log: DeltaLog, version: int) -> bool:
    files = list_log(log.store, log.log_dir, 0)
    commits = [f.version for f in files if f.name.kind == LogFileKind.COMMIT]
    cps = complete_checkpoints(files)
    return bool(cps) and min(cps) >= version and (not commits or min(commits) >= version)


def _truncate_before_protection(log: DeltaLog) -> None:
    snap = log.snapshot()
    protected = int_property(snap.configuration, CHECKPOINT_PROTECTION_KEY)
    if protected > 0 and not _history_truncated_before(log, protected):
        Transaction(log, "Empty Commit", {}, snapshot=snap).commit()
        write_checkpoint(log)
        retention = interval_property_ms(snap.configuration, "delta.dropFeatureTruncateHistory.retentionDuration")
        _cleanup_at_minute(log, retention)
        if not _history_truncated_before(log, protected):
            raise DropFeatureError(
                f"Cannot drop the checkpointProtection table feature yet: the history before version {protected} "
                f"({CHECKPOINT_PROTECTION_KEY}) must be truncated first, and it is younger than the "
                f"{retention // 3_600_000}-hour truncation retention (delta.dropFeatureTruncateHistory."
                f"retentionDuration). Retry after it has passed", "DELTA_FEATURE_DROP_CHECKPOINT_PROTECTION_WAIT_FOR_RETENTION_PERIOD")
    if raw_property(log.snapshot().configuration, CHECKPOINT_PROTECTION_KEY) is not None:
        unset_properties(log, [CHECKPOINT_PROTECTION_KEY], if_exists=True)


def _cleanup_at_minute(log: DeltaLog, retention_ms: int) -> list[str]:
    """Log cleanup with the truncation retention, its cutoff truncated to the minute (as
    delta-spark's TRUNCATE HISTORY)."""
    now = timestamps.now_ms()
    return cleanup_expired_logs(log, now_ms=now - (now - retention_ms) % 60_000, retention_ms=retention_ms)


# --- DROP FEATURE ----------------------------------------------------------------------------------

def drop_feature(table: str | DeltaLog, feature: str, truncate_history: bool = False, *,
                 storage_options: dict | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """DROP FEATURE `feature` (see the module docstring). Returns {"version": the downgrade
    commit, "protocol": the new protocol, "checkpointProtection": whether history was protected}."""
    if not isinstance(feature, str) or not feature:
        raise DropFeatureError(f"featureName needs to be a string but got {feature!r}", "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE")
    if not isinstance(truncate_history, bool):
        raise DropFeatureError(f"truncateHistory needs to be a bool but got {truncate_history!r}",
                               "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE")
    log = table if isinstance(table, DeltaLog) else DeltaLog.for_table(table, storage_options)
    name = canonical_feature_name(feature)
    if name not in FEATURES:
        raise DropFeatureError(f"Dropping '{feature}' is not supported: tahoe does not know this table feature",
                               "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE")
    spec = REMOVABLE_FEATURES.get(name)
    if spec is None:
        raise DropFeatureError(
            f"Cannot drop '{name}': it is not a removable table feature (removable: "
            f"{', '.join(sorted(REMOVABLE_FEATURES))})", "DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE")
    snap = log.snapshot()
    if name not in _features(snap.protocol):
        raise DropFeatureError(f"Cannot drop '{name}': the table's protocol does not support it",
                               "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT")
    dependents = sorted(f for f in _features(snap.protocol) if f in FEATURES and name in FEATURES[f].requires)
    if dependents:
        raise DropFeatureError(f"Cannot drop '{name}': the table's features {dependents} depend on it; drop them first",
                               "DELTA_FEATURE_DROP_DEPENDENT_FEATURE")
    if name == "checkpointProtection" and not truncate_history:
        raise DropFeatureError("The checkpointProtection table feature can only be dropped with TRUNCATE HISTORY "
                               "(truncate_history=True / truncateHistory=True)",
                               "DELTA_FEATURE_DROP_CHECKPOINT_PROTECTION_REQUIRES_TRUNCATE_HISTORY")
    if truncate_history and not spec.history_protection and name != "checkpointProtection":
        raise DropFeatureError(f"'{name}' is a writer feature: it is dropped without truncating history",
                               "DELTA_FEATURE_DROP_HISTORY_TRUNCATION_NOT_ALLOWED")
    made_changes = _pre_downgrade(log, name, truncate_history, progress)
    protect = spec.history_protection and not truncate_history
    if spec.history_protection and truncate_history:
        if made_changes:
            raise DropFeatureError(
                f"Dropping '{name}' was partially successful: its traces are removed from the current version, "
                f"but versions of the table that use it remain in the log. Retry after the "
                f"delta.dropFeatureTruncateHistory.retentionDuration (24 hours by default) has passed, or drop it "
                f"without truncateHistory (history protected by checkpointProtection)",
                "DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD")
        Transaction(log, "Empty Commit", {}).commit()
        write_checkpoint(log)
        snap = log.snapshot()
        _cleanup_at_minute(log, interval_property_ms(snap.configuration, "delta.dropFeatureTruncateHistory.retentionDuration"))
        used = _history_uses(log, name, snap.version)
        if used is not None:
            raise DropFeatureError(
                f"Cannot drop '{name}' with truncateHistory yet: version {used} in the log still uses it; retry after "
                f"the delta.dropFeatureTruncateHistory.retentionDuration (24 hours by default) has passed",
                "DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST")
    snap = log.snapshot()
    left = _traces(snap, name)
    if left is not None:
        raise DropFeatureError(f"Cannot drop '{name}': the table still uses it ({left}); a concurrent writer may "
                               f"have enabled it again", "DELTA_FEATURE_DROP_CONFLICT_REVALIDATION_FAILED")
    if protect:
        write_checkpoint(log)        # the barrier before the downgrade, written by a client that knows the feature
    new_protocol = protocol_without(snap.protocol, name, ["checkpointProtection"] if protect else [])
    txn = Transaction(log, "DROP FEATURE", {"featureName": name, "truncateHistory": truncate_history}, snapshot=snap)
    txn.read_whole_table()
    txn.allow_feature_removal([name], protect_history=protect)
    if name == "rowTracking":
        conf = {k: v for k, v in snap.configuration.items()
                if k not in (ROW_ID_COLUMN_PROP, ROW_COMMIT_VERSION_COLUMN_PROP, "delta.rowTrackingSuspended",
                             ENABLE_ROW_TRACKING)}
        txn.update_metadata(dataclasses.replace(snap.metadata, configuration=conf))
    txn.update_protocol(new_protocol)
    version = txn.commit()
    if protect:
        write_checkpoint(log, version)
    final = log.snapshot(version=version).protocol
    return {"version": version, "protocol": final.to_dict(), "checkpointProtection": protect}
