"""Transactions: one atomic commit to a table's log with optimistic concurrency (spec "Requirements for
Writers"; delta-spark's OptimisticTransaction). A `Transaction` collects what it read and writes; `commit()`:
  1. plans once: metaData and protocol (never dropping a feature except for DROP FEATURE,
     `allow_feature_removal`; column mapping assigned), and at most one add and one remove per path;
  2. per attempt applies `WRITER_RULES` in order and writes `commitInfo` first (`tahoe.txn.commit_info`);
  3. puts the commit file if absent; on a lost race asks `tahoe.txn.conflicts` (raising the specific
     ConcurrentModificationException) and retries the next version, at most `max_retries` times;
  4. runs the post-commit hooks (`tahoe.txn.post_commit`), none of which can fail the commit.
Creating a table (`new_table=True`, or no table at the path) commits version 0 only; a table created
meanwhile fails with ProtocolChangedException. A failed put is read back: own bytes mean landed, another
writer's a lost race; undecidable is `CommitOutcome.UNKNOWN` (CommitOutcomeUnknownError: keep the files)."""

from __future__ import annotations

import dataclasses
import enum
import logging
import random
import time
import uuid
from typing import Any, Callable, Iterable

import pyarrow as pa

from ..errors import (
    BucketNotFoundError, CommitFailedException, CommitOutcomeUnknownError, InvalidTableOperationError,
    ProtocolChangedException, SchemaError, StorageAccessDeniedError, StorageConfigError, StorageCredentialsError,
    StorageThrottledError, TableNotFoundError, UnsupportedFeatureError, UnsupportedStorageError,
)
from ..log.delta_log import DeltaLog
from ..log.replay import canonical_key, read_commit, root_uri
from ..log.segment import LogFile, list_log
from ..log.snapshot import Snapshot
from ..protocol import column_mapping, iceberg_compat
from ..protocol.actions import (
    Action, AddCDCFile, AddFile, DomainMetadata, Metadata, Protocol, RemoveFile, SetTransaction,
    actions_to_json_lines,
)
from ..protocol.clustering import (
    CLUSTERING_DOMAIN, CLUSTERING_FEATURE, check_clustering_columns, clustering_paths, logical_name,
)
from ..protocol.filenames import LogFileKind, commit_file_name, parse_log_file_name
from ..protocol.properties import (
    ENABLE_ROW_TRACKING, ISOLATION_LEVELS, bool_property, data_skipping_settings, features_for_metadata,
    isolation_level, normalize_property, split_protocol_properties,
)
from ..protocol.schema import VARIANT, GeoType
from ..protocol.stats import stats_columns
from ..protocol.table_features import (
    FEATURES, MAX_READER_VERSION, MAX_WRITER_VERSION, canonical_feature_name, check_writable,
    is_feature_supported, merge_protocols, protocol_for_features, reader_features_of, writer_features_of,
)
from ..protocol.timestamps import now_ms
from . import (
    append_only, checkpoint_protection, deletion_vectors, domain_metadata, identity_columns, in_commit_timestamps,
    row_tracking,
)
from .attempt import Attempt
from .commit_info import commit_info
from .commit_properties import take_commit_properties
from .conflicts import TransactionSummary, WinningCommit, check_conflicts, isolation_level_for_commit
from .post_commit import POST_COMMIT_HOOKS, Committed, PostCommitHook, run_post_commit_hooks

__all__ = ["Transaction", "CommitOutcome", "WRITER_RULES", "protocol_features", "same_protocol",
           "raise_protocol_versions", "check_clustered_table"]

log = logging.getLogger(__name__)

# The writer requirements of the spec that each attempt at a version must meet, in the order they
# are applied: each completes the attempt's actions (`Attempt`) or refuses the commit.
WRITER_RULES = (
    identity_columns.advance_high_water_marks,      # "Identity Columns"
    checkpoint_protection.protect_history,          # "Checkpoint Protection"
    append_only.refuse_data_removal,                # "Append-only Tables"
    deletion_vectors.check_adds,                    # "Deletion Vectors"
    domain_metadata.check_supported,                # "Domain Metadata"
    in_commit_timestamps.assign_timestamp,          # "In-Commit Timestamps"
    row_tracking.assign_row_ids,                    # "Row Tracking"
)


def check_clustered_table(metadata: Metadata, paths: list[list[str]]) -> None:
    """The writer rules of spec "Clustered Table" for the table's metadata: no partition columns,
    and every clustering column (a physical name path) in the schema and among the columns stats
    are collected on (InvalidTableOperationError naming it otherwise)."""
    mode = column_mapping.mode(metadata.configuration)
    names = [logical_name(metadata.schema, p, mode) for p in paths]
    skipping = data_skipping_settings(metadata.configuration)
    stats = stats_columns(metadata.schema, skipping.num_indexed_cols, skipping.stats_columns,
                          metadata.partition_columns)
    check_clustering_columns(metadata.schema, names, metadata.partition_columns, stats)


def protocol_features(p: Protocol) -> set[str]:
    return writer_features_of(p) | reader_features_of(p)


def same_protocol(a: Protocol | None, b: Protocol | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.min_reader_version, a.min_writer_version, set(a.reader_features or ()),
            set(a.writer_features or ()), a.reader_features is None, a.writer_features is None) == \
        (b.min_reader_version, b.min_writer_version, set(b.reader_features or ()),
         set(b.writer_features or ()), b.reader_features is None, b.writer_features is None)


def raise_protocol_versions(p: Protocol, reader: int | None, writer: int | None) -> Protocol:
    """`p` with its versions raised to at least (reader, writer), keeping every feature it has.
    Reader 3 needs writer 7 (spec "Table Features"); versions above the maximum are refused."""
    r = max(p.min_reader_version, reader or 0)
    w = max(p.min_writer_version, writer or 0)
    if r > MAX_READER_VERSION or w > MAX_WRITER_VERSION:
        raise UnsupportedFeatureError(
            f"protocol ({r}, {w}) is above what tahoe supports ({MAX_READER_VERSION}, {MAX_WRITER_VERSION})")
    if r >= 3 and w < 7:
        raise InvalidTableOperationError(
            f"reader version 3 needs writer version 7 (table features); asked for ({r}, {w})")
    if (r, w) == (p.min_reader_version, p.min_writer_version):
        return p
    feats = protocol_features(p)
    if w < 7:
        return Protocol(r, w)
    rw = sorted(f for f in feats if f in FEATURES and FEATURES[f].reader_writer)
    if r >= 3:
        return Protocol(r, 7, tuple(rw), tuple(sorted(feats)))
    return Protocol(r, 7, None, tuple(sorted(feats)))


def _partition_keys(md: Metadata, other: Metadata) -> list[str]:
    """The partition columns of `md` as compared with those of `other` (the metadata before or
    after it): when both use column mapping, the physical names the files carry their partition
    values under — renaming a partition column keeps them, and is no repartitioning (delta-spark
    allows it on a table holding data) —, else their names (case-insensitive, as delta-spark
    compares them)."""
    mode = column_mapping.mode(md.configuration)
    if mode == "none" or column_mapping.mode(other.configuration) == "none":
        return [c.lower() for c in md.partition_columns]
    phys = column_mapping.logical_to_physical_names(md.schema, mode)
    return [phys.get(c, c) for c in md.partition_columns]


def _check_no_downgrade(old: Protocol, new: Protocol, allowed: frozenset[str] = frozenset()) -> None:
    lost = protocol_features(old) - protocol_features(new)
    if lost - allowed:
        raise InvalidTableOperationError(
            f"the new protocol drops table features {sorted(lost - allowed)}; features are removed only "
            f"by DROP FEATURE (tahoe.maintenance.features.drop_feature)")
    if lost:
        return   # a feature drop may lower the versions (the protocol is normalized)
    if new.min_reader_version < old.min_reader_version or new.min_writer_version < old.min_writer_version:
        raise InvalidTableOperationError(
            f"the new protocol ({new.min_reader_version}, {new.min_writer_version}) lowers the "
            f"table's ({old.min_reader_version}, {old.min_writer_version})")


class CommitOutcome(enum.Enum):
    """What a transaction's commit did to the log: NOT_COMMITTED (surely not in the log), COMMITTED (the
    version holds this commit) or UNKNOWN (the store failed after a put and reading back could not tell)."""
    NOT_COMMITTED = "not committed"
    COMMITTED = "committed"
    UNKNOWN = "unknown"


# how often a put whose outcome is unknown is resolved (read back, re-sent) before giving up
_RESOLVE_ATTEMPTS = 3


@dataclasses.dataclass
class _TableState:
    """The newest table state this transaction knows: the read snapshot, then every winning
    commit it has rebased over."""
    version: int
    protocol: Protocol | None
    metadata: Metadata | None
    row_id_high_water_mark: int          # -1: none assigned yet
    last_timestamp: int                  # commit timestamp of `version` (ms), 0 before version 0

    def apply(self, w: WinningCommit) -> None:
        if w.protocol is not None:
            self.protocol = w.protocol
        if w.metadata:
            self.metadata = Metadata.from_dict(w.metadata[-1])
        hwm = w.row_id_high_water_mark
        if hwm is not None:
            self.row_id_high_water_mark = max(self.row_id_high_water_mark, hwm)
        ts = in_commit_timestamps.commit_timestamp(w, self.metadata)
        if ts is not None:
            self.last_timestamp = ts
        self.version = w.version


class Transaction:
    """One optimistic transaction on a table (see the module docstring).

    `snapshot`: the version the caller read and planned on; None reads the latest — unless
    `new_table=True`: the caller planned on the table not existing, and the transaction creates
    it (version 0) or fails (see the module docstring's rule for creating a table).

    Invariants: `read_version` is the version of `read_snapshot` (-1 when the table does not
    exist yet); metaData and protocol are each updated at most once; a transaction commits at
    most once (`committed_version` is set after it did); `outcome` is NOT_COMMITTED until a put
    was sent, COMMITTED exactly when `committed_version` is set."""

    def __init__(self, log: DeltaLog, operation: str, operation_parameters: dict | None = None,
                 snapshot: Snapshot | None = None, isolation_level: str | None = None,
                 engine_info: str | None = None, max_retries: int = 10_000, *, new_table: bool = False):
        self.log = log
        self.operation = operation
        self.operation_parameters = dict(operation_parameters or {})
        if new_table:
            if snapshot is not None:
                raise ValueError("new_table=True: the transaction creates the table; give no snapshot")
        elif snapshot is None:
            try:
                snapshot = log.snapshot()
            except TableNotFoundError:
                snapshot = None
        self.read_snapshot: Snapshot | None = snapshot
        self.read_version: int = snapshot.version if snapshot is not None else -1
        if snapshot is not None:
            check_writable(snapshot.protocol)
        if isolation_level is not None:
            match = [lvl for lvl in ISOLATION_LEVELS if lvl.lower() == str(isolation_level).lower()]
            if not match:
                raise InvalidTableOperationError(
                    f"unknown isolation level '{isolation_level}'; expected one of {list(ISOLATION_LEVELS)}")
            isolation_level = match[0]
        self.isolation_level = isolation_level
        self.engine_info = engine_info
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.max_retries = max_retries
        self.txn_id = str(uuid.uuid4())

        self._root_uri = root_uri(log.table_root)
        self._read_paths: set[str] = set()
        self._read_predicates: list[Callable[[dict], bool]] = []
        self._read_whole_table = False
        self._read_app_ids: set[str] = set()
        self._new_metadata: Metadata | None = None
        self._new_protocol: Protocol | None = None
        self._adds: list[AddFile] = []
        self._removes: list[RemoveFile] = []
        self._cdcs: list[AddCDCFile] = []
        self._txns: dict[str, SetTransaction] = {}
        self._domains: dict[str, DomainMetadata] = {}
        self._identity_updates: dict[str, int] = {}
        self._tags: dict[str, str] = {}
        self._replaces_table = False
        self._droppable: frozenset[str] = frozenset()
        self._protect_history = False
        self.committed_version: int | None = None
        self.committed_actions: list[Action] | None = None
        self._committed_bytes = 0          # size of the commit file written
        self._committed_data: bytes | None = None
        # the snapshot of the committed version, derived from the read snapshot and this commit
        # when it directly follows it (`Snapshot.after_commit`); None otherwise
        self.committed_snapshot: Snapshot | None = None
        self.outcome = CommitOutcome.NOT_COMMITTED
        self.post_commit_errors: list[Exception] = []   # post-commit hooks that failed (logged)
        self._post_commit_hooks: list[Callable[["Transaction", int], Any]] = []
        self.attempts = 0
        # deltalake's CommitProperties set around the operation (`commit_properties`): the first
        # transaction it opens takes them
        self.commit_properties = take_commit_properties()
        if self.commit_properties is not None:
            if self.commit_properties.max_retries is not None:
                self.max_retries = self.commit_properties.max_retries
            for t in self.commit_properties.app_transactions:
                self._txns[t.app_id] = t

    # --- what the transaction sees ---------------------------------------------------------
    @property
    def metadata(self) -> Metadata | None:
        """The metadata this transaction will commit with (its update, else the read one)."""
        if self._new_metadata is not None:
            return self._new_metadata
        return self.read_snapshot.metadata if self.read_snapshot is not None else None

    @property
    def protocol(self) -> Protocol | None:
        if self._new_protocol is not None:
            return self._new_protocol
        return self.read_snapshot.protocol if self.read_snapshot is not None else None

    def txn_version(self, app_id: str) -> int | None:
        """The last version committed by application transaction `app_id` as of the read
        snapshot. The transaction now depends on it: a concurrent commit of the same appId
        makes this one fail with ConcurrentTransactionException."""
        self._read_app_ids.add(app_id)
        return self.read_snapshot.txn_version(app_id) if self.read_snapshot is not None else None

    # --- what the transaction read -----------------------------------------------------------
    def read_files(self, files: pa.Table | Iterable[AddFile]) -> None:
        """Record files this transaction read (an Arrow table with a `path` column, such as
        `Snapshot.files_table()`, or AddFile actions): a concurrent removal of any of them is a
        ConcurrentDeleteReadException."""
        if isinstance(files, pa.Table):
            paths = files.column("path").to_pylist()
        else:
            paths = [f.path for f in files]
        self._read_paths.update(canonical_key(p, None, self._root_uri) for p in paths if p is not None)

    def read_predicate(self, partition_filter: Callable[[dict[str, str | None]], bool] | None) -> None:
        """Record what this transaction read as a predicate on partition values (logical column
        name → serialized value, None for null); None means the whole table. Files a concurrent
        writer adds where the predicate holds are a ConcurrentAppendException."""
        if partition_filter is None:
            self._read_whole_table = True
        else:
            self._read_predicates.append(partition_filter)

    def read_whole_table(self) -> None:
        self._read_whole_table = True

    # --- what the transaction writes -----------------------------------------------------------
    def _path_key(self, path: str) -> str:
        """`path` as the log compares paths (decoded, relative to the table root)."""
        return canonical_key(path, None, self._root_uri)

    def _check_open(self) -> None:
        if self.committed_version is not None:
            raise InvalidTableOperationError(
                f"this transaction already committed version {self.committed_version}")

    def update_metadata(self, metadata: Metadata) -> None:
        self._check_open()
        if self._new_metadata is not None:
            raise InvalidTableOperationError("the metadata can be changed only once per transaction")
        self._new_metadata = metadata

    def update_protocol(self, protocol: Protocol) -> None:
        self._check_open()
        if self._new_protocol is not None:
            raise InvalidTableOperationError("the protocol can be changed only once per transaction")
        self._new_protocol = protocol

    def add_files(self, adds: Iterable[AddFile]) -> None:
        self._check_open()
        for a in adds:
            if not isinstance(a, AddFile):
                raise TypeError(f"add_files expects AddFile actions, got {type(a).__name__}")
            self._adds.append(a)

    def remove_files(self, removes: Iterable[RemoveFile | AddFile]) -> None:
        """Record removals; an AddFile is turned into its tombstone (`AddFile.remove`)."""
        self._check_open()
        ts = now_ms()
        for r in removes:
            if isinstance(r, AddFile):
                r = r.remove(ts)
            if not isinstance(r, RemoveFile):
                raise TypeError(f"remove_files expects RemoveFile actions, got {type(r).__name__}")
            self._removes.append(r)

    def add_cdc_files(self, cdcs: Iterable[AddCDCFile]) -> None:
        self._check_open()
        for c in cdcs:
            if not isinstance(c, AddCDCFile):
                raise TypeError(f"add_cdc_files expects AddCDCFile actions, got {type(c).__name__}")
            self._cdcs.append(c)

    def set_txn(self, app_id: str, version: int) -> None:
        """Record application transaction `app_id` at `version` (idempotent writes). The
        transaction depends on `app_id` as if it had read it."""
        self._check_open()
        if app_id in self._txns:
            raise InvalidTableOperationError(f"application transaction '{app_id}' is set twice")
        self._txns[app_id] = SetTransaction(app_id, int(version), now_ms())
        self._read_app_ids.add(app_id)

    def set_domain_metadata(self, dm: DomainMetadata) -> None:
        """Set (or, with `removed=True`, remove) a user metadata domain (spec "Domain Metadata";
        the table needs the `domainMetadata` feature). Domains named `delta.*` are reserved for
        the protocol's own features and refused. The latest action per domain wins on replay; a
        concurrent commit that sets the same domain is a conflict (ConcurrentTransactionException)."""
        self._check_open()
        domain_metadata.check_user_domain(dm.domain)
        if dm.domain in self._domains:
            raise InvalidTableOperationError(f"metadata domain '{dm.domain}' is set twice")
        self._domains[dm.domain] = dm

    def set_system_domain_metadata(self, dm: DomainMetadata) -> None:
        """Set a metadata domain the protocol itself defines and tahoe maintains through its own
        operations — `delta.clustering` (spec "Clustered Table": the clustering columns; setting
        non-empty columns adds the `clustering` feature to the protocol). The commit checks the
        clustered-table writer rules (no partition columns, clustering columns in the schema and
        in the stats columns)."""
        self._check_open()
        domain_metadata.check_system_domain(dm.domain)
        if dm.domain in self._domains:
            raise InvalidTableOperationError(f"metadata domain '{dm.domain}' is set twice")
        self._domains[dm.domain] = dm

    def _clustering_paths(self) -> list[list[str]]:
        """The clustering columns (physical paths) the table has after this transaction."""
        if CLUSTERING_DOMAIN in self._domains:
            return clustering_paths({CLUSTERING_DOMAIN: self._domains[CLUSTERING_DOMAIN]})
        if self.read_snapshot is None or self._replaces_table:
            return []
        return clustering_paths(self.read_snapshot.domain_metadata)

    def remove_domain_metadata(self, domain: str) -> None:
        """Remove a user metadata domain: a `removed` tombstone carrying its current configuration
        (as delta-kernel writes it). InvalidTableOperationError when the table has no such domain."""
        current = self.read_snapshot.domain_metadata.get(domain) if self.read_snapshot is not None else None
        if current is None and not domain.lower().startswith("delta."):
            raise InvalidTableOperationError(
                f"cannot remove metadata domain '{domain}': the table (version {self.read_version}) has no such domain")
        self.set_domain_metadata(DomainMetadata(domain, current.configuration if current else "", removed=True))

    def remove_feature_domain(self, domain: str) -> None:
        """Tombstone a `delta.*` domain whose feature the table no longer supports (DROP FEATURE
        domainMetadata removes the `delta.rowTracking` domain a dropped rowTracking left behind).
        A domain the table does not have is a no-op."""
        self._check_open()
        snap = self.read_snapshot
        current = snap.domain_metadata.get(domain) if snap is not None else None
        if current is None:
            return
        domain_metadata.check_feature_domain_removable(domain, snap.protocol)
        self._domains[domain] = DomainMetadata(domain, current.configuration, removed=True)

    def update_identity_high_water_mark(self, column: str, value: int) -> None:
        """Advance `delta.identity.highWaterMark` of identity column `column` to `value` at
        commit (only forward; a value that does not advance it is ignored)."""
        self._check_open()
        prev = self._identity_updates.get(column)
        self._identity_updates[column] = int(value) if prev is None else (
            max(prev, int(value)) if self._identity_step(column) > 0 else min(prev, int(value)))

    def _identity_step(self, column: str) -> int:
        md = self.metadata
        if md is None:
            return 1
        f = md.schema.get(column, case_insensitive=True)
        if f is None:
            raise SchemaError(f"column '{column}' not found; available columns: {md.schema.names}")
        return int(f.metadata.get("delta.identity.step", 1) or 1)

    def replace_table(self) -> None:
        """Mark this transaction as replacing the table (CREATE OR REPLACE: every file removed,
        new metadata): the column mapping mode may then change and columns get fresh physical
        names. Column ids keep counting up from the old maxColumnId."""
        self._check_open()
        self._replaces_table = True

    def allow_feature_removal(self, features: Iterable[str], protect_history: bool = False) -> None:
        """Let this commit's new protocol (`update_protocol`) lack `features` — DROP FEATURE's
        protocol downgrade, which has already removed every trace of them. `protect_history`:
        the commit also sets `delta.requireCheckpointProtectionBeforeVersion` to its own version
        (recomputed when it is rebased), so the checkpoints before it are protected (the new
        protocol must have `checkpointProtection`)."""
        self._check_open()
        self._droppable = frozenset(canonical_feature_name(f) for f in features)
        self._protect_history = protect_history
    def add_post_commit_hook(self, hook: Callable[["Transaction", int], Any]) -> None:
        """Run `hook(txn, version)` after this transaction commits (after the checkpoint and
        UniForm hooks; e.g. auto compaction). A failing hook is logged and kept in
        `post_commit_errors`; it never fails the commit."""
        self._post_commit_hooks.append(hook)

    def set_tag(self, key: str, value: str) -> None:
        """A commitInfo tag (delta-spark's `tags` map)."""
        self._tags[key] = value

    # --- preparing the commit ------------------------------------------------------------------
    def _finalize_metadata(self) -> tuple[Metadata | None, Protocol | None]:
        """The metadata and protocol to commit (before the version-specific parts), validated.
        Protocol None: unchanged."""
        read_md = self.read_snapshot.metadata if self.read_snapshot is not None else None
        read_proto = self.read_snapshot.protocol if self.read_snapshot is not None else None
        md = self._new_metadata
        if md is None and read_md is None:
            raise InvalidTableOperationError(
                f"table {self.log.table_root} does not exist: the first commit needs metadata "
                f"(create the table first)")
        features: set[str] = set()
        reader_v = writer_v = None
        if md is not None:
            md, features, reader_v, writer_v = self._normalize_metadata(md, read_md)
        effective_md = md or read_md
        assert effective_md is not None
        # the features the metadata asks for are added when it changes (delta-spark upgrades the
        # protocol in updateMetadata); a commit without metadata keeps the protocol it read — a
        # table that sets a property without its feature (delta-rs: delta.columnMapping.mode on a
        # 3/7 protocol) is not turned into another table by an append or a DML
        required = (features_for_metadata(effective_md.configuration, effective_md.schema)
                    if md is not None or read_proto is None else set()) | features
        if md is not None and read_md is not None and read_proto is not None \
                and column_mapping.effective_mode(read_md.configuration, read_proto) == "none" \
                and column_mapping.mode(read_md.configuration) == column_mapping.mode(md.configuration) != "none":
            # the mode was set without the feature and stays as it was: its files carry the logical
            # names — adding the feature now would make them unreadable (a schema change by MERGE)
            required.discard("columnMapping")
        clustering = self._clustering_paths()
        if clustering and CLUSTERING_DOMAIN in self._domains:
            required.add(CLUSTERING_FEATURE)
        if clustering and (md is not None or CLUSTERING_DOMAIN in self._domains):
            check_clustered_table(effective_md, clustering)
        base = self._new_protocol if self._new_protocol is not None else read_proto
        proto = protocol_for_features(required) if base is None else merge_protocols(base, required)
        if reader_v is not None or writer_v is not None:
            proto = raise_protocol_versions(proto, reader_v, writer_v)
        check_writable(proto)
        if read_proto is not None:
            for candidate in (self._new_protocol, proto):
                if candidate is not None:
                    _check_no_downgrade(read_proto, candidate, self._droppable)
        if md is not None:
            md = row_tracking.name_materialized_columns(md, proto)
        if md is not None and read_md is not None and _partition_keys(md, read_md) != _partition_keys(read_md, md):
            self._check_all_files_removed("change the partition columns")
        if md is not None and read_md is not None and bool_property(md.configuration, "delta.enableRowTracking") \
                and not bool_property(read_md.configuration, "delta.enableRowTracking"):
            row_tracking.check_backfilled(self.read_snapshot, self._adds, self._removes, self._path_key)
        new_proto = None if read_proto is not None and same_protocol(proto, read_proto) else proto
        return md, new_proto

    def _normalize_metadata(self, md: Metadata, read_md: Metadata | None) -> tuple[Metadata, set[str], int | None, int | None]:
        conf, features, reader_v, writer_v = split_protocol_properties(dict(md.configuration))
        old_conf = read_md.configuration if read_md is not None else {}
        checked: dict[str, str] = {}
        for k, v in conf.items():
            if old_conf.get(k) == v:
                checked[k] = v          # unchanged: another writer's business, kept as is
            else:
                ck, cv = normalize_property(k, v)
                checked[ck] = cv
        conf = checked
        if read_md is None or self._replaces_table:
            conf = iceberg_compat.creating_defaults(conf)
        schema = md.schema
        names = schema.names
        for pc in md.partition_columns:
            if pc not in names:
                raise SchemaError(f"partition column '{pc}' is not in the schema {names}")
            if schema.field(pc).type == VARIANT:   # spec "Variant Data Type": not comparable
                raise SchemaError(f"partition column '{pc}' has type variant; variant columns cannot be partition columns")
            if isinstance(schema.field(pc).type, GeoType):   # not orderable (delta-spark's PartitionUtils)
                raise SchemaError(f"Using column {pc} of type {schema.field(pc).type} as a partition column is "
                                  f"not supported.", error_class="DELTA_INVALID_PARTITION_COLUMN_TYPE")
        old_mode = column_mapping.mode(old_conf) if read_md is not None else "none"
        new_mode = column_mapping.mode(conf)
        if read_md is not None and old_mode != new_mode and not self._replaces_table and \
                not (old_mode == "none" and new_mode == "name"):
            raise InvalidTableOperationError(
                f"changing the column mapping mode from '{old_mode}' to '{new_mode}' is not supported "
                f"(only 'none' → 'name' on an existing table)")
        schema_string = md.schema_string
        if new_mode != "none":
            key = column_mapping.MAX_COLUMN_ID_KEY
            prev_max = max(int(old_conf.get(key, 0) or 0), int(conf.get(key, 0) or 0))
            new_schema, new_max = column_mapping.assign_ids(
                schema, prev_max, physical_names_from_logical=read_md is not None and old_mode == "none" and not self._replaces_table)
            conf[key] = str(max(new_max, prev_max))
            if new_schema != schema:
                schema_string = new_schema.to_json()
        md = dataclasses.replace(md, configuration=conf, schema_string=schema_string)
        return md, features, reader_v, writer_v

    def _check_all_files_removed(self, what: str) -> None:
        """Some changes (partitioning) are only valid when the table's data is replaced."""
        snap = self.read_snapshot
        assert snap is not None
        removed = {canonical_key(r.path, None, self._root_uri) for r in self._removes}
        for path in snap.files_table(["path"]).column("path").to_pylist():
            if canonical_key(path, None, self._root_uri) not in removed:
                raise InvalidTableOperationError(
                    f"cannot {what} of {self.log.table_root} while it holds data: the same commit "
                    f"must remove every file (overwrite the table)")

    def _check_files(self, md: Metadata, protocol: Protocol | None = None) -> None:
        seen: dict[str, AddFile] = {}
        for a in self._adds:
            k = canonical_key(a.path, None, self._root_uri)
            if k in seen:
                raise InvalidTableOperationError(
                    f"file {a.path} is added twice in one commit (at most one add per path)")
            seen[k] = a
        seen_r: set[str] = set()
        for r in self._removes:
            k = canonical_key(r.path, None, self._root_uri)
            if k in seen_r:
                raise InvalidTableOperationError(
                    f"file {r.path} is removed twice in one commit (at most one remove per path)")
            seen_r.add(k)
        mode = column_mapping.effective_mode(md.configuration, protocol)
        pcols = list(md.partition_columns)
        if pcols and mode != "none":
            phys = column_mapping.logical_to_physical_names(md.schema, mode)
            expected = {phys[c] for c in pcols}
        else:
            expected = set(pcols)
        for a in self._adds:
            if set(a.partition_values) != expected:
                raise InvalidTableOperationError(
                    f"add {a.path}: partitionValues name {sorted(a.partition_values)} but the "
                    f"table's partition columns are {sorted(expected)}")

    def _finalize_removes(self) -> list[RemoveFile]:
        ts = now_ms()
        out = []
        for r in self._removes:
            changes: dict[str, Any] = {}
            if r.deletion_timestamp is None:
                changes["deletion_timestamp"] = ts
            if r.extended_file_metadata is None and r.partition_values is not None and r.size is not None:
                changes["extended_file_metadata"] = True
            out.append(dataclasses.replace(r, **changes) if changes else r)
        return out

    # --- per attempt -----------------------------------------------------------------------------
    def _actions_for(self, version: int, state: _TableState, plan: "_Plan",
                     operation_metrics: dict | None, user_metadata: str | None) -> tuple[list[Action], TransactionSummary]:
        protocol = plan.protocol if plan.protocol is not None else state.protocol
        metadata = plan.metadata if plan.metadata is not None else state.metadata
        assert protocol is not None and metadata is not None
        check_writable(protocol)
        a = Attempt(self.log.table_root, self.operation, version, protocol, metadata, plan.metadata,
                    state.version, state.metadata, state.last_timestamp, state.row_id_high_water_mark,
                    plan.read_row_id_high_water_mark, list(self._adds), plan.removes, plan.removes_with_row_ids,
                    self._domains, self._identity_updates, self._protect_history, dict(self._tags))
        for rule in WRITER_RULES:
            rule(a)

        data_changed = any(f.data_change for f in a.adds) or any(r.data_change for r in a.removes)
        only_file_actions = (plan.protocol is None and a.new_metadata is None and not self._txns
                             and not self._domains)
        level = isolation_level_for_commit(data_changed, self.isolation_level, isolation_level(a.configuration),
                                           only_file_actions=only_file_actions, operation=self.operation)
        reads = bool(self._read_paths or self._read_predicates or self._read_whole_table)
        blind = not reads and not a.removes and not self._cdcs
        read_conf = self.read_snapshot.metadata.configuration if self.read_snapshot is not None else {}
        enables_row_tracking = a.new_metadata is not None and \
            bool_property(a.new_metadata.configuration, ENABLE_ROW_TRACKING) and \
            not bool_property(read_conf, ENABLE_ROW_TRACKING)

        info = commit_info(a, operation_parameters=self.operation_parameters, read_version=self.read_version,
                           isolation_level=level, blind_append=blind, operation_metrics=operation_metrics,
                           user_metadata=user_metadata, engine_info=self.engine_info, txn_id=self.txn_id,
                           custom_metadata=self.commit_properties.custom_metadata if self.commit_properties else None)
        actions: list[Action] = [info]
        if plan.protocol is not None:
            actions.append(plan.protocol)
        if a.new_metadata is not None:
            actions.append(a.new_metadata)
        actions.extend(a.rule_domains)
        actions.extend(self._txns.values())
        actions.extend(self._domains.values())
        actions.extend(a.adds)
        actions.extend(a.removes)
        actions.extend(self._cdcs)

        summary = TransactionSummary(
            isolation_level=level,
            read_protocol=self.read_snapshot.protocol if self.read_snapshot is not None else None,
            read_paths=frozenset(self._read_paths),
            read_predicates=tuple(self._read_predicates),
            read_whole_table=self._read_whole_table,
            read_app_ids=frozenset(self._read_app_ids),
            partition_columns=plan.read_partition_columns,
            physical_to_logical=plan.physical_to_logical,
            is_blind_append=blind,
            metadata_changed=a.new_metadata is not None,
            protocol_changed=plan.protocol is not None,
            removed_paths=frozenset(canonical_key(r.path, None, self._root_uri) for r in a.removes),
            domains=frozenset(self._domains),
            enables_row_tracking=enables_row_tracking,
            path_key=lambda p: canonical_key(p, None, self._root_uri),
        )
        return actions, summary

    # --- commit --------------------------------------------------------------------------------
    def commit(self, operation_metrics: dict | None = None, user_metadata: str | None = None) -> int:
        """Write the transaction as the next version (see the module docstring); returns the
        committed version."""
        self._check_open()
        plan = self._plan()
        snap = self.read_snapshot
        if snap is not None:
            state = _TableState(snap.version, snap.protocol, snap.metadata,
                                plan.read_row_id_high_water_mark, snap.timestamp)
        else:
            state = _TableState(-1, None, None, -1, 0)
        if state.protocol is None:
            state.protocol = plan.protocol
        if state.metadata is None:
            state.metadata = plan.metadata
        store = self.log.store
        version = self.read_version + 1
        if self.read_version < 0:
            self._check_still_absent()
        attempt = 0
        while True:
            self.attempts = attempt + 1
            actions, summary = self._actions_for(version, state, plan, operation_metrics, user_metadata)
            path = store.join(self.log.log_dir, commit_file_name(version))
            data = actions_to_json_lines(actions)
            if self._put(path, data):
                break
            attempt += 1
            if attempt > self.max_retries:
                raise CommitFailedException(
                    f"{self.operation} on {self.log.table_root}: gave up after {self.max_retries} "
                    f"retries; version {version} was taken by another writer")
            winners = self._read_winners(version)
            if self.read_version < 0:
                raise _created_concurrently(self.log.table_root, winners[0] if winners else None)
            for w in winners:
                resolution = check_conflicts(
                    summary, w, current_metadata=state.metadata,
                    current_protocol=plan.protocol if plan.protocol is not None else state.protocol)
                if resolution.row_tracking_enabled:
                    self._tags[row_tracking.ROW_TRACKING_PRESERVED_TAG] = "false"
                state.apply(w)
            version = (winners[-1].version if winners else version) + 1
            self._backoff(attempt)
        self.committed_version = version
        self.outcome = CommitOutcome.COMMITTED
        self.committed_actions = actions
        self._committed_bytes = len(data)
        self._committed_data = data
        final_md = next((a for a in actions if isinstance(a, Metadata)), None) or state.metadata
        self._post_commit(version, final_md.configuration if final_md is not None else None)
        return version

    def _put(self, path: str, data: bytes) -> bool:
        """Put-if-absent of one commit file: True when it holds this commit, False when another
        writer's commit took the version (the outcome stays NOT_COMMITTED). A store failure
        after the put was sent is resolved (`_resolve`); CommitOutcomeUnknownError when it
        cannot be."""
        store = self.log.store
        self.outcome = CommitOutcome.UNKNOWN
        try:
            store.write(path, data, overwrite=False)
            return True
        except FileExistsError:
            self.outcome = CommitOutcome.NOT_COMMITTED
            return False
        except _REFUSED as e:
            # the store refused the put (403, bad credentials, no bucket, throttling, bad
            # options) the only time it was sent: it did not land
            if not e.retried:
                self.outcome = CommitOutcome.NOT_COMMITTED
                raise
            found = self._resolve(path, data)
            if found is None or found == "absent":
                raise CommitOutcomeUnknownError(
                    f"{self.operation} on {self.log.table_root}: the log store failed while writing "
                    f"{path} ({type(e).__name__}: {e}) after the request was sent more than once, and "
                    f"the outcome could not be read back; the version may or may not exist (the files "
                    f"it references are kept)") from e
            if found == "theirs":
                self.outcome = CommitOutcome.NOT_COMMITTED
                return False
            return True
        except Exception as e:  # noqa: BLE001 - the put was sent: its outcome is unknown
            found = self._resolve(path, data)
            if found is None:
                raise CommitOutcomeUnknownError(
                    f"{self.operation} on {self.log.table_root}: the log store failed while writing "
                    f"{path} ({type(e).__name__}: {e}) and the outcome could not be read back; the "
                    f"version may or may not exist (the files it references are kept)") from e
            if found == "absent":   # the store settles a put on return: a plain failure
                self.outcome = CommitOutcome.NOT_COMMITTED
                raise
            log.warning("the log store failed while writing %s (%s: %s); read back: %s", path,
                        type(e).__name__, e, "this commit landed" if found == "ours" else "another writer's commit")
            if found == "theirs":
                self.outcome = CommitOutcome.NOT_COMMITTED
                return False
            return True
        # BaseException (KeyboardInterrupt, ...): the outcome stays UNKNOWN and it propagates

    def _resolve(self, path: str, data: bytes) -> str | None:
        """After a failed put of `data` at `path`: "ours" — the file holds `data`; "theirs" — it
        holds another writer's commit; "absent" — it does not exist and no put of ours can still
        land (stores whose puts are settled when the call returns, `LogStore.puts_may_land_late`
        false); None — could not tell. On other stores an absent file is put again
        (put-if-absent), which settles it: once the version exists, a put of ours still in
        flight can no longer land."""
        store = self.log.store
        for i in range(_RESOLVE_ATTEMPTS):
            if i:
                self._backoff(i + 3)
            try:
                try:
                    return "ours" if store.read(path) == data else "theirs"
                except FileNotFoundError:
                    pass
                if not store.puts_may_land_late:
                    return "absent"
                try:
                    store.write(path, data, overwrite=False)
                    return "ours"
                except FileExistsError:
                    continue   # someone (maybe our first put) created it meanwhile: read it
            except Exception as e:  # noqa: BLE001 - still failing: try again, then give up
                log.debug("resolving the outcome of %s failed: %s: %s", path, type(e).__name__, e)
        return None

    def _check_still_absent(self) -> None:
        """A transaction planned on no table: refuse when the table exists by now (another
        writer created it), before anything is sent. The put-if-absent of version 0 catches a
        creation after this check."""
        try:
            files = list_log(self.log.store, self.log.log_dir, 0)
        except TableNotFoundError:
            return
        if any(f.name.kind in (LogFileKind.COMMIT, LogFileKind.CHECKPOINT, LogFileKind.V2_CHECKPOINT,
                               LogFileKind.MULTIPART_CHECKPOINT) for f in files):
            first = next((f for f in files if f.name.kind == LogFileKind.COMMIT), None)
            winner = None
            if first is not None:
                try:
                    winner = WinningCommit.from_actions(first.version, read_commit(self.log.store, first.path))
                except Exception:  # noqa: BLE001 - only for the message
                    winner = None
            raise _created_concurrently(self.log.table_root, winner)

    def _read_winners(self, from_version: int) -> list[WinningCommit]:
        store = self.log.store
        try:
            files = [f for f in list_log(store, self.log.log_dir, from_version)
                     if f.name.kind == LogFileKind.COMMIT and f.version >= from_version]
        except TableNotFoundError:
            files = []
        out: list[WinningCommit] = []
        expected = from_version
        for f in files:
            if f.version != expected:
                break
            out.append(WinningCommit.from_actions(f.version, read_commit(store, f.path),
                                                  f.status.modification_time))
            expected += 1
        if not out:  # listed nothing yet (eventual listing): read the taken version directly
            path = store.join(self.log.log_dir, commit_file_name(from_version))
            out.append(WinningCommit.from_actions(from_version, read_commit(store, path), None))
        return out

    @staticmethod
    def _backoff(attempt: int) -> None:
        cap = min(0.25, 0.002 * (2 ** min(attempt, 12)))
        time.sleep(random.uniform(0, cap))

    def _post_commit(self, version: int, configuration: dict | None) -> None:
        """The post-commit hooks (`tahoe.txn.post_commit`), then the caller's."""
        self.committed_snapshot = self._derive_snapshot(version)
        assert self.committed_actions is not None
        props = self.commit_properties
        committed = Committed(self.log, version, self.committed_actions, self._committed_bytes, configuration,
                              self.read_snapshot, self.committed_snapshot,
                              props.create_checkpoint if props is not None else True,
                              props.cleanup_expired_logs if props is not None else None)
        added = [PostCommitHook(getattr(h, "__name__", repr(h)), lambda c, h=h: h(self, c.version))
                 for h in self._post_commit_hooks]
        run_post_commit_hooks(committed, (*POST_COMMIT_HOOKS, *added), self.post_commit_errors)

    def _derive_snapshot(self, version: int) -> Snapshot | None:
        """The snapshot of the version just committed, from the read snapshot and the bytes this
        transaction wrote, when the commit directly follows the read snapshot (no rebase over
        other writers' commits) — else None. Never fails the commit."""
        snap = self.read_snapshot
        if snap is None or snap.version != version - 1 or self._committed_data is None:
            return None
        store = self.log.store
        try:
            name = parse_log_file_name(commit_file_name(version))
            st = store.status(store.join(self.log.log_dir, commit_file_name(version)))
            if st is None or name is None or st.size != len(self._committed_data):
                return None
            return snap.after_commit(LogFile(st, name), self._committed_data)
        except Exception as e:  # noqa: BLE001 - the commit already succeeded; the next load replays
            log.warning("could not derive the snapshot of version %s of %s: %s: %s",
                        version, self.log.table_root, type(e).__name__, e)
            return None

    def _plan(self) -> "_Plan":
        md, proto = self._finalize_metadata()
        effective_md = md or (self.read_snapshot.metadata if self.read_snapshot is not None else None)
        assert effective_md is not None
        final_proto = proto or (self.read_snapshot.protocol if self.read_snapshot is not None else None)
        self._check_files(effective_md, final_proto)
        removes = self._finalize_removes()
        removes_rt = removes
        if final_proto is not None and is_feature_supported(final_proto, "rowTracking"):
            removes_rt = row_tracking.fill_remove_row_ids(self.read_snapshot, removes, self._path_key)
        read_md = self.read_snapshot.metadata if self.read_snapshot is not None else effective_md
        pcols = tuple(read_md.partition_columns)
        mode = column_mapping.effective_mode(read_md.configuration, final_proto)
        p2l: dict[str, str] = {}
        if pcols and mode != "none":
            phys = column_mapping.logical_to_physical_names(read_md.schema, mode)
            p2l = {phys[c]: c for c in pcols}
        hwm = self.read_snapshot.row_id_high_water_mark if self.read_snapshot is not None else None
        assert final_proto is not None
        iceberg_compat.check_commit(self.read_snapshot.metadata if self.read_snapshot is not None else None,
                                    effective_md, final_proto, self._adds,
                                    creating=self.read_snapshot is None or self._replaces_table,
                                    features=protocol_features(final_proto))
        return _Plan(md, proto, removes, removes_rt, pcols, p2l, -1 if hwm is None else int(hwm))

    def __repr__(self) -> str:
        return (f"Transaction({self.operation!r} on {self.log.table_root!r}, "
                f"read_version={self.read_version})")


_REFUSED = (StorageAccessDeniedError, StorageCredentialsError, BucketNotFoundError, StorageThrottledError,
            StorageConfigError, UnsupportedStorageError)


def _created_concurrently(table_root: str, winner: WinningCommit | None) -> ProtocolChangedException:
    """delta-spark's exception for a transaction that meant to create the table and found it
    created by another writer."""
    where = f" Conflicting commit: version {winner.version} ({winner.operation})." if winner is not None else ""
    return ProtocolChangedException(
        f"The protocol version of the Delta table has been changed by a concurrent update. This "
        f"happens when multiple writers are writing to an empty directory. Creating the table ahead "
        f"of time will avoid this conflict. Please try the operation again.{where} (table {table_root}: "
        f"this transaction was creating it and another writer created it first)")


@dataclasses.dataclass(frozen=True)
class _Plan:
    metadata: Metadata | None            # metaData to commit (before version-specific keys)
    protocol: Protocol | None            # protocol to commit; None: unchanged
    removes: list[RemoveFile]
    removes_with_row_ids: list[RemoveFile]
    read_partition_columns: tuple[str, ...]
    physical_to_logical: dict[str, str]
    read_row_id_high_water_mark: int
