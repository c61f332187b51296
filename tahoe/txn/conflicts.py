"""Conflict detection for optimistic concurrency (delta-spark's ConflictChecker), pure: from what the current
transaction read and writes (`TransactionSummary`) and one winning commit (`WinningCommit`), raise the specific
ConcurrentModificationException subclass or return how the conflict was resolved (`Resolution`).

The checks, in delta-spark's order:
  1. protocol: the winner's must be supported (UnsupportedFeatureError); both change it → ProtocolChangedException;
  2. metadata: see `_check_metadata`; unresolvable → MetadataChangedException;
  3. domain metadata: both set the same domain → ConcurrentTransactionException (`delta.rowTracking` is rebased);
  4. application transactions: the winner wrote a txn appId this one read or writes → ConcurrentTransactionException;
  5. row tracking enablement against a winner adding files without a baseRowId → ConcurrentAppendException;
  6. added files the current transaction should have read, by isolation level → ConcurrentAppendException;
  7. the winner removed a file this one read → ConcurrentDeleteReadException;
  8. both remove the same file → ConcurrentDeleteDeleteException."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Iterable

from ..errors import (
    ConcurrentAppendException, ConcurrentDeleteDeleteException, ConcurrentDeleteReadException,
    ConcurrentTransactionException, MetadataChangedException, ProtocolChangedException,
)
from ..protocol import column_mapping
from ..protocol.actions import Metadata, Protocol
from ..protocol.properties import (
    ENABLE_DELETION_VECTORS, ENABLE_ROW_TRACKING, ROW_COMMIT_VERSION_COLUMN_PROP, ROW_ID_COLUMN_PROP,
    SERIALIZABLE, SNAPSHOT_ISOLATION, WRITE_SERIALIZABLE, bool_property,
)
from ..protocol.table_features import (
    check_writable, is_feature_supported, reader_features_of, writer_features_of,
)
from .identity_columns import IDENTITY_UPDATE_TAG
from .row_tracking import ROW_TRACKING_DOMAIN

__all__ = ["TransactionSummary", "WinningCommit", "Resolution", "check_conflicts",
           "isolation_level_for_commit", "DATA_CHANGING_OPERATIONS"]

# delta-spark's operations whose `changesData` is true (DeltaOperations): at WriteSerializable a
# commit of one of these is never downgraded to SnapshotIsolation, even without data changes.
DATA_CHANGING_OPERATIONS = frozenset({
    "WRITE", "STREAMING UPDATE", "DELETE", "TRUNCATE", "CONVERT", "MERGE", "UPDATE",
    "CREATE TABLE AS SELECT", "REPLACE TABLE", "REPLACE TABLE AS SELECT", "CREATE OR REPLACE TABLE",
    "CREATE OR REPLACE TABLE AS SELECT", "RESTORE", "CLONE",
})

# field metadata that enabling column mapping adds (delta-spark's COLUMN_MAPPING_METADATA_KEYS)
_COLUMN_MAPPING_FIELD_KEYS = frozenset({
    column_mapping.ID_KEY, column_mapping.PHYSICAL_NAME_KEY, "delta.columnMapping.nested.ids",
    column_mapping.PARQUET_FIELD_ID_KEY, "parquet.field.nested.ids",
})

PartitionFilter = Callable[[dict[str, "str | None"]], bool]


def _identity(p: str) -> str:
    return p


@dataclass(frozen=True)
class TransactionSummary:
    """What the current transaction read and what it is about to write.

    Invariants: paths in `read_paths` / `removed_paths` are keys produced by `path_key` (the
    same function is applied to the winner's paths); `isolation_level` is one of Serializable,
    WriteSerializable, SnapshotIsolation; a blind append (only adds, nothing read — delta-spark's
    `isBlindAppend`) has no read predicates, no read files, does not read the whole table and
    removes nothing; `metadata_changed` is true for any metaData the transaction writes,
    identity high-water-mark updates included."""

    isolation_level: str = WRITE_SERIALIZABLE
    read_protocol: Protocol | None = None
    read_paths: frozenset[str] = frozenset()
    read_predicates: tuple[PartitionFilter, ...] = ()
    read_whole_table: bool = False
    read_app_ids: frozenset[str] = frozenset()
    partition_columns: tuple[str, ...] = ()                 # logical names, as of the read snapshot
    physical_to_logical: dict[str, str] = field(default_factory=dict)  # partition value keys → logical
    is_blind_append: bool = False
    metadata_changed: bool = False
    protocol_changed: bool = False
    removed_paths: frozenset[str] = frozenset()
    domains: frozenset[str] = frozenset()                   # domains this transaction sets
    enables_row_tracking: bool = False                      # turns delta.enableRowTracking on
    path_key: Callable[[str], str] = _identity
    supported_writer_features: frozenset[str] | None = None  # None: the registry's default

    def __post_init__(self) -> None:
        if self.isolation_level not in (SERIALIZABLE, WRITE_SERIALIZABLE, SNAPSHOT_ISOLATION):
            raise ValueError(f"unknown isolation level {self.isolation_level!r}")
        if self.is_blind_append and (self.read_predicates or self.read_paths or
                                     self.read_whole_table or self.removed_paths):
            raise ValueError("a blind append reads nothing and removes nothing")

    @property
    def reads_anything(self) -> bool:
        return bool(self.read_predicates or self.read_whole_table)


@dataclass(frozen=True)
class WinningCommit:
    """One commit that won the race: its version, its actions (the JSON objects of its lines)
    and the commit file's modification time. Derived views are computed once, on first use."""

    version: int
    actions: tuple[dict, ...]
    file_timestamp: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "actions", tuple(self.actions))

    @classmethod
    def from_actions(cls, version: int, actions: Iterable[dict], file_timestamp: int | None = None) -> "WinningCommit":
        return cls(version, tuple(actions), file_timestamp)

    def _all(self, key: str) -> list[dict]:
        return [a[key] for a in self.actions if isinstance(a.get(key), dict)]

    @cached_property
    def commit_info(self) -> dict:
        ci = self._all("commitInfo")
        return ci[0] if ci else {}

    @cached_property
    def operation(self) -> str:
        return str(self.commit_info.get("operation") or "an unknown operation")

    @cached_property
    def protocol(self) -> Protocol | None:
        p = self._all("protocol")
        return Protocol.from_dict(p[-1]) if p else None

    @cached_property
    def metadata(self) -> list[dict]:
        return self._all("metaData")

    @cached_property
    def adds(self) -> list[dict]:
        return self._all("add")

    @cached_property
    def removes(self) -> list[dict]:
        return self._all("remove")

    @cached_property
    def app_ids(self) -> set[str]:
        return {t.get("appId") for t in self._all("txn")}

    @cached_property
    def domains(self) -> dict[str, dict]:
        return {d.get("domain"): d for d in self._all("domainMetadata")}

    @cached_property
    def is_blind_append(self) -> bool:
        return bool(self.commit_info.get("isBlindAppend", False))

    @cached_property
    def identity_only_metadata_update(self) -> bool:
        tags = self.commit_info.get("tags") or {}
        return str(tags.get(IDENTITY_UPDATE_TAG, "")).lower() == "true"

    @cached_property
    def in_commit_timestamp(self) -> int | None:
        v = self.commit_info.get("inCommitTimestamp")
        return int(v) if v is not None else None

    @cached_property
    def row_id_high_water_mark(self) -> int | None:
        d = self.domains.get(ROW_TRACKING_DOMAIN)
        if d is None or d.get("removed"):
            return None
        try:
            return int(json.loads(d.get("configuration") or "{}")["rowIdHighWaterMark"])
        except (ValueError, KeyError, TypeError):
            return None


def _describe(w: WinningCommit) -> str:
    return f"version {w.version} ({w.operation})"


def _partition_text(pv: dict | None) -> str:
    if not pv:
        return ""
    return " in partition [" + ", ".join(f"{k}={v}" for k, v in sorted(pv.items())) + "]"


def _retry_hint() -> str:
    return " Refresh the table and try the operation again."


def _matches(txn: TransactionSummary, add: dict) -> bool:
    """Whether an added file falls in what a (non-blind-append) current transaction read:
    anything when it read the whole table or the table was unpartitioned when it read it (as
    delta-spark's `getFirstFileMatchingPartitionPredicates`), else a read predicate must hold."""
    if txn.read_whole_table or not txn.partition_columns:
        return True
    pv_physical = add.get("partitionValues") or {}
    pv = {txn.physical_to_logical.get(k, k): (v if v != "" else None) for k, v in pv_physical.items()}
    for pred in txn.read_predicates:
        try:
            if pred(pv):
                return True
        except Exception:  # a predicate that cannot judge the file: assume it would have read it
            return True
    return False


def _dropped_features(new: Protocol, old: Protocol) -> set[str]:
    before = writer_features_of(old) | reader_features_of(old)
    after = writer_features_of(new) | reader_features_of(new)
    return before - after


@dataclass(frozen=True)
class Resolution:
    """How a winner that did not conflict changed the current transaction: `row_tracking_enabled`
    — the winner turned row tracking on (its metadata was accepted); the current commit is tagged
    as not preserving row tracking (`delta.rowTracking.preserved=false`)."""

    row_tracking_enabled: bool = False


_NO_CHANGE = Resolution()


def _metadata_fields_differing(a: Metadata, b: Metadata) -> set[str]:
    out = set()
    for name, x, y in (("id", a.id, b.id), ("name", a.name, b.name),
                       ("description", a.description, b.description), ("format", a.format, b.format),
                       ("schemaString", a.schema, b.schema),
                       ("partitionColumns", tuple(a.partition_columns), tuple(b.partition_columns)),
                       ("configuration", dict(a.configuration), dict(b.configuration)),
                       ("createdTime", a.created_time, b.created_time)):
        if x != y:
            out.add(name)
    return out


def _configuration_change_allowed(current: Metadata, winning: Metadata, protocol: Protocol | None) -> tuple[bool, bool]:
    """delta-spark's `checkConfigurationChangesForConflicts` with its allow list: (allowed,
    row tracking enabled by the change)."""
    cur, win = current.configuration, winning.configuration
    if set(cur) - set(win):
        return False, False                     # unsetting a property is never resolved
    changed = {k: v for k, v in win.items() if cur.get(k) != v}

    def supports(feature: str) -> bool:
        return protocol is not None and is_feature_supported(protocol, feature)

    for key in changed:
        if key == ENABLE_ROW_TRACKING:
            ok = supports("rowTracking") and bool_property(win, ENABLE_ROW_TRACKING)
        elif key in (ROW_ID_COLUMN_PROP, ROW_COMMIT_VERSION_COLUMN_PROP):
            ok = bool_property(win, ENABLE_ROW_TRACKING)
        elif key == column_mapping.MODE_KEY:
            ok = (column_mapping.mode(cur) == "none" and column_mapping.mode(win) == "name"
                  and supports("columnMapping"))
        elif key == column_mapping.MAX_COLUMN_ID_KEY:
            ok = True
        elif key == ENABLE_DELETION_VECTORS:
            ok = supports("deletionVectors") and bool_property(win, ENABLE_DELETION_VECTORS)
        else:
            ok = False
        if not ok:
            return False, False
    return True, bool(bool_property(win, ENABLE_ROW_TRACKING)) and not bool_property(cur, ENABLE_ROW_TRACKING)


def _schema_change_allowed(current: Metadata, winning: Metadata) -> bool:
    """delta-spark's `checkSchemaChangesForConflicts`: only column-mapping field metadata added by
    enabling name mapping on otherwise identical top-level columns."""
    a, b = current.schema, winning.schema
    if len(a.fields) != len(b.fields):
        return False
    if not (column_mapping.mode(current.configuration) == "none"
            and column_mapping.mode(winning.configuration) == "name"):
        return False
    for fa, fb in zip(a.fields, b.fields):
        if fa.name != fb.name or fa.type != fb.type or fa.nullable != fb.nullable:
            return False
        ma, mb = fa.metadata, fb.metadata
        changed = {k for k in set(ma) | set(mb) if ma.get(k) != mb.get(k)}
        if not changed <= _COLUMN_MAPPING_FIELD_KEYS:
            return False
    return True


def _check_metadata(txn: TransactionSummary, winner: WinningCommit, current: Metadata | None,
                    protocol: Protocol | None, where: str) -> Resolution:
    """delta-spark's `attemptToResolveMetadataConflicts`: a winner's metaData conflicts when this transaction
    changes metadata too (an identity high-water-mark update counts); else it is accepted when it only advances
    identity high-water marks (tag `delta.identity.schemaUpdate`) or only adds or changes these keys:
    delta.enableDeletionVectors=true, delta.enableRowTracking=true with the materialized column names,
    delta.columnMapping.mode none→name with maxColumnId (plus the field metadata that brings). Accepting row
    tracking tags the commit `delta.rowTracking.preserved=false`."""
    if not winner.metadata:
        return _NO_CHANGE

    def conflict() -> MetadataChangedException:
        return MetadataChangedException(
            f"the metadata of the table (schema, partitioning or properties) was changed by a "
            f"concurrent update ({where})." + _retry_hint())

    if txn.metadata_changed:
        raise conflict()
    if winner.identity_only_metadata_update:
        return _NO_CHANGE
    if current is None:
        raise conflict()
    try:
        winning = Metadata.from_dict(winner.metadata[-1])
        differing = _metadata_fields_differing(current, winning)
    except Exception:  # noqa: BLE001 - a metaData we cannot compare is a change we cannot merge
        raise conflict() from None
    if not differing <= {"configuration", "schemaString"}:
        raise conflict()
    row_tracking = False
    if "configuration" in differing:
        ok, row_tracking = _configuration_change_allowed(current, winning, protocol)
        if not ok:
            raise conflict()
    if "schemaString" in differing and not _schema_change_allowed(current, winning):
        raise conflict()
    return Resolution(row_tracking_enabled=row_tracking)


def check_conflicts(txn: TransactionSummary, winner: WinningCommit, current_metadata: Metadata | None = None,
                    current_protocol: Protocol | None = None) -> Resolution:
    """Raise the exception for the first conflict between the current transaction and `winner`
    (the module docstring's rules, in order); return how it was resolved when the current
    transaction can commit on top of it. `current_metadata` / `current_protocol`: the table's
    metadata and protocol as the current transaction sees them before this winner (its read
    snapshot's, brought forward by the winners already accepted); without them a winner's
    metadata change is never resolved.

    Rule 6: a blind append never conflicts; otherwise the winner's added files are checked, all of them when
    this transaction read the whole table or the table is unpartitioned, else those matching a read
    predicate. Which count: Serializable all; WriteSerializable those of a non-blind-append winner (all when
    this one changes metadata); SnapshotIsolation none."""
    where = _describe(winner)

    # 1. protocol
    wp = winner.protocol
    if wp is not None:
        if txn.supported_writer_features is None:
            check_writable(wp)
        else:
            check_writable(wp, txn.supported_writer_features)
        if txn.protocol_changed:
            raise ProtocolChangedException(
                f"the protocol of the table was changed by a concurrent update ({where}); this "
                f"transaction changes the protocol too. This happens when several writers create "
                f"or upgrade the same table at once." + _retry_hint())
        if txn.read_protocol is not None and _dropped_features(wp, txn.read_protocol):
            raise ProtocolChangedException(
                f"a concurrent update ({where}) removed table features "
                f"{sorted(_dropped_features(wp, txn.read_protocol))}." + _retry_hint())

    # 2. metadata
    resolution = _check_metadata(txn, winner, current_metadata, wp or current_protocol, where)

    # 3. domain metadata
    clash = sorted(d for d in winner.domains if d in txn.domains and d != ROW_TRACKING_DOMAIN)
    if clash:
        raise ConcurrentTransactionException(
            f"a concurrent update ({where}) set metadata domain '{clash[0]}' that this "
            f"transaction sets too." + _retry_hint())

    # 4. application transaction ids
    ids = sorted(a for a in winner.app_ids if a in txn.read_app_ids)
    if ids:
        raise ConcurrentTransactionException(
            f"a concurrent update ({where}) committed application transaction '{ids[0]}' that "
            f"this transaction depends on (are two instances of the same job or stream "
            f"running?).")

    # 5. enabling row tracking needs a baseRowId on every file
    if txn.enables_row_tracking:
        for add in winner.adds:
            if add.get("baseRowId") is None:
                raise ConcurrentAppendException(
                    f"this transaction enables row tracking, and a concurrent update ({where}) "
                    f"added files without row ids (e.g. {add.get('path')})." + _retry_hint())

    # 6. files added that this transaction should have read
    if txn.isolation_level != SNAPSHOT_ISOLATION and not txn.is_blind_append:
        if winner.is_blind_append:
            check_blind = txn.isolation_level == SERIALIZABLE or txn.metadata_changed
            candidates = winner.adds if check_blind else []
        else:
            candidates = winner.adds
        for add in candidates:
            if _matches(txn, add):
                raise ConcurrentAppendException(
                    f"files were added{_partition_text(add.get('partitionValues'))} by a concurrent "
                    f"update ({where}) to data this transaction read (e.g. {add.get('path')})."
                    + _retry_hint())

    # 7. files removed that this transaction read
    removes = winner.removes
    if removes:
        if txn.read_paths:
            for r in removes:
                if txn.path_key(r.get("path", "")) in txn.read_paths:
                    raise ConcurrentDeleteReadException(
                        f"a file this transaction read ({r.get('path')}"
                        f"{_partition_text(r.get('partitionValues'))}) was removed by a "
                        f"concurrent update ({where})." + _retry_hint())
        if txn.read_whole_table:
            r = removes[0]
            raise ConcurrentDeleteReadException(
                f"this transaction read the whole table and a concurrent update ({where}) removed "
                f"files from it (e.g. {r.get('path')})." + _retry_hint())

    # 8. files removed by both
    if removes and txn.removed_paths:
        for r in removes:
            if txn.path_key(r.get("path", "")) in txn.removed_paths:
                raise ConcurrentDeleteDeleteException(
                    f"a file this transaction removes ({r.get('path')}"
                    f"{_partition_text(r.get('partitionValues'))}) was already removed by a "
                    f"concurrent update ({where})." + _retry_hint())
    return resolution


def isolation_level_for_commit(data_changed: bool, requested: str | None, table_default: str, *,
                               only_file_actions: bool = True, operation: str | None = None) -> str:
    """The isolation level a commit is checked at (delta-spark's `getIsolationLevelToUse`):
    SnapshotIsolation when no file action changes data, the commit holds nothing but file actions
    (and the row-tracking domain) and — at WriteSerializable — its operation is not one that
    changes data; else the requested level or the table's."""
    level = requested or table_default
    if not data_changed and only_file_actions:
        if level == SERIALIZABLE or operation not in DATA_CHANGING_OPERATIONS:
            return SNAPSHOT_ISOLATION
    return level
