"""Conflict detection for optimistic concurrency (delta-spark's ConflictChecker semantics).

A transaction that lost the race for version N reads the commits that won (N, N+1, ...) and asks,
for each winner in order, whether it can still commit on top of it. This module answers that
question and nothing else: it is pure (no I/O) — it takes a summary of what the current
transaction read and writes (`TransactionSummary`) and one winner's parsed action dicts
(`WinningCommit`), and raises the specific ConcurrentModificationException subclass, or returns.

The checks, in delta-spark's order:
  1. protocol — the winner's protocol must be readable and writable by this client
     (UnsupportedFeatureError); if the current transaction changes the protocol too, or the winner
     dropped features → ProtocolChangedException;
  2. metadata — any winner metaData → MetadataChangedException, except a winner whose metadata
     change only advances identity high-water marks (commitInfo tag
     `delta.identity.schemaUpdate`) while the current transaction changes no metadata;
  3. domain metadata — both set the same domain → ConcurrentTransactionException (the system
     domain `delta.rowTracking` is resolved by rebasing instead);
  4. application transactions — the winner wrote a txn appId the current transaction read or
     writes → ConcurrentTransactionException;
  5. added files — files the winner added that match what the current transaction read (its
     partition predicates, or anything when it read the whole table or the table is unpartitioned)
     → ConcurrentAppendException. Which added files count depends on the isolation level:
     Serializable: all; WriteSerializable: only those of non-blind-append winners, unless the
     current transaction changes metadata; SnapshotIsolation (commits that change no data,
     e.g. compaction): none;
  6. deleted-read — the winner removed a file the current transaction read (or anything, when it
     read the whole table) → ConcurrentDeleteReadException;
  7. delete-delete — both remove the same file → ConcurrentDeleteDeleteException.

A blind append (only adds, nothing read) never conflicts on files: it has no read predicates and
removes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Iterable

from ..errors import (
    ConcurrentAppendException, ConcurrentDeleteDeleteException, ConcurrentDeleteReadException,
    ConcurrentTransactionException, MetadataChangedException, ProtocolChangedException,
)
from ..protocol.actions import Protocol
from ..protocol.table_features import check_writable, reader_features_of, writer_features_of
from ..protocol.properties import SERIALIZABLE, SNAPSHOT_ISOLATION, WRITE_SERIALIZABLE

__all__ = ["TransactionSummary", "WinningCommit", "check_conflicts", "isolation_level_for_commit",
           "ROW_TRACKING_DOMAIN", "IDENTITY_UPDATE_TAG"]

ROW_TRACKING_DOMAIN = "delta.rowTracking"
IDENTITY_UPDATE_TAG = "delta.identity.schemaUpdate"

PartitionFilter = Callable[[dict[str, "str | None"]], bool]


def _identity(p: str) -> str:
    return p


@dataclass(frozen=True)
class TransactionSummary:
    """What the current transaction read and what it is about to write.

    Invariants: paths in `read_paths` / `removed_paths` are keys produced by `path_key` (the
    same function is applied to the winner's paths); `isolation_level` is one of Serializable,
    WriteSerializable, SnapshotIsolation; a blind append has no read predicates, no read files,
    does not read the whole table and removes nothing."""

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
    """Whether an added file falls in what the current transaction read."""
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


def check_conflicts(txn: TransactionSummary, winner: WinningCommit) -> None:
    """Raise the exception for the first conflict between the current transaction and `winner`
    (see the module docstring for the rules); return None when it can commit on top of it."""
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
    if winner.metadata:
        tolerated = winner.identity_only_metadata_update and not txn.metadata_changed
        if not tolerated:
            raise MetadataChangedException(
                f"the metadata of the table (schema, partitioning or properties) was changed by a "
                f"concurrent update ({where})." + _retry_hint())

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

    # 5. files added that this transaction should have read
    if txn.isolation_level != SNAPSHOT_ISOLATION and txn.reads_anything and not txn.is_blind_append:
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

    # 6. files removed that this transaction read
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

    # 7. files removed by both
    if removes and txn.removed_paths:
        for r in removes:
            if txn.path_key(r.get("path", "")) in txn.removed_paths:
                raise ConcurrentDeleteDeleteException(
                    f"a file this transaction removes ({r.get('path')}"
                    f"{_partition_text(r.get('partitionValues'))}) was already removed by a "
                    f"concurrent update ({where})." + _retry_hint())


def isolation_level_for_commit(data_changed: bool, requested: str | None, table_default: str) -> str:
    """The isolation level a commit is checked at: SnapshotIsolation when it changes no data
    (every file action has dataChange=false), else the requested level or the table's."""
    if not data_changed:
        return SNAPSHOT_ISOLATION
    return requested or table_default
