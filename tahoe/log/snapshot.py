"""A snapshot: the state of a table at one version (spec "Delta Table Specification").

Invariants, checked at construction (`Snapshot.load`):
  1. exactly one protocol and one metaData are known (missing: CorruptLogError);
  2. the protocol is readable by this client (else UnsupportedFeatureError naming the features);
  3. the schema parses;
  4. the active files are reconciled (`tahoe.log.replay`) and read lazily as Arrow;
  5. with `TAHOE_VALIDATE_CHECKSUMS` `strict` or `warn`, the state agrees with the version's `.crc`.
The `.crc` answers `num_files` and `size_in_bytes`; with `from_checksum=True` invariants 1-3 are checked on
its protocol and metaData and the log is replayed only when something needs it."""

from __future__ import annotations

import json
import os
from functools import cached_property
from typing import TYPE_CHECKING, Iterable, Iterator

from ..errors import CorruptLogError
from ..protocol import column_mapping
from ..protocol.actions import AddFile, CommitInfo, DomainMetadata, Metadata, Protocol, RemoveFile, SetTransaction
from ..protocol.properties import bool_property
from ..protocol.schema import StructType
from ..protocol.table_features import check_readable, is_feature_supported
from ..storage.base import LogStore
from .segment import LogFile, LogSegment

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from ..protocol.version_checksum import VersionChecksum
    from .replay import ReplayState

# The replay (and with it pyarrow) is imported when a snapshot is replayed: a snapshot loaded
# `from_checksum` answers version, protocol, metaData, file count and size without it.

__all__ = ["Snapshot", "add_files_from_table"]


def _maps(v):
    if isinstance(v, list) and all(isinstance(x, tuple) and len(x) == 2 for x in v):
        return dict(v)
    return v


def _row_to_dict(row: dict) -> dict:
    return {k: _maps(v) for k, v in row.items()}


def add_files_from_table(files: pa.Table) -> list[AddFile]:
    """AddFile actions from rows of `files_table()` (any subset of its columns that includes
    path and size)."""
    return [AddFile.from_dict(_row_to_dict(r)) for r in files.to_pylist()]


class Snapshot:
    def __init__(self, store: LogStore, table_root: str, segment: LogSegment, state: "ReplayState | None",
                 checksum: "VersionChecksum | None" = None):
        """`state`: the replayed log; or None with a `checksum` of this version that holds its
        protocol and metaData (the log is then replayed on first need)."""
        self.store = store
        self.table_root = table_root
        self.segment = segment
        self._replayed = state
        if state is None:
            if checksum is None or checksum.protocol is None or checksum.metadata is None:
                raise ValueError("a snapshot without a replayed state needs a checksum with protocol and metaData")
            self.__dict__["version_checksum"] = checksum   # the cached_property's value
            protocol, metadata = checksum.protocol, checksum.metadata
        else:
            protocol, metadata = state.protocol, state.metadata
        if protocol is None:
            where = "checkpoint" if segment.checkpoint and not segment.commits else "log"
            raise CorruptLogError(
                f"table {table_root} at version {segment.version} has no protocol action in its {where}")
        check_readable(protocol)
        self.protocol: Protocol = protocol
        self._metadata = metadata
        if metadata is not None and metadata.schema_string is not None:
            metadata.schema  # parse now: a bad schema fails the load

    @property
    def _state(self) -> "ReplayState":
        """The replayed log (replayed now when the snapshot was loaded from its checksum)."""
        if self._replayed is None:
            from .replay import replay

            self._replayed = replay(self.store, self.table_root, self.segment)
        return self._replayed

    @property
    def metadata(self) -> Metadata:
        """The table's metaData. A log without one loads (its version, protocol and files are
        known) but everything that needs the schema fails here with a CorruptLogError."""
        md = self._metadata
        if md is None:
            seg = self.segment
            where = "checkpoint" if seg.checkpoint and not seg.commits else "log"
            raise CorruptLogError(
                f"table {self.table_root} at version {seg.version} has no metaData action in its {where}")
        return md

    @classmethod
    def load(cls, store: LogStore, table_root: str, version: int | None = None, *,
             from_checksum: bool = False) -> "Snapshot":
        """The snapshot at `version` (latest when None). `from_checksum`: when the version's
        `.crc` holds protocol and metaData, take them from it and replay the log only on first
        need (see the module docstring)."""
        segment = LogSegment.for_version(store, table_root, version)
        snap = None
        if from_checksum:
            from .crc import read_version_checksum

            crc = read_version_checksum(store, segment.log_dir, segment.version)
            if crc is not None and crc.protocol is not None and crc.metadata is not None:
                snap = cls(store, table_root, segment, None, crc)
        if snap is None:
            from .replay import replay

            snap = cls(store, table_root, segment, replay(store, table_root, segment))
        if os.environ.get("TAHOE_VALIDATE_CHECKSUMS", "").strip():   # (unset: the checksum module is not needed)
            from .crc import validation_mode

            mode = validation_mode()
            if mode is not None:
                snap.validate_checksum(strict=mode == "strict")
        return snap

    def after_commit(self, commit: LogFile, data: bytes) -> "Snapshot | None":
        """The snapshot of the version committed right after this one, derived from this one and
        that commit (`commit`, the listed file of version `self.version + 1`, and `data`, its
        bytes) without replaying the log (`tahoe.log.replay.replay_commit`); None when that
        commit is one a replay would vectorise (large). The protocol must be readable, as on a
        load. When `TAHOE_VALIDATE_CHECKSUMS` is set, the derived state is checked against the
        version's `.crc` later, by whoever derives it (`tahoe.txn.transaction`)."""
        from .replay import replay_commit

        if commit.version != self.version + 1:
            raise ValueError(f"commit {commit.version} does not follow version {self.version}")
        state = replay_commit(self._state, self.table_root, commit.path, data)
        if state is None:
            return None
        seg = self.segment
        segment = LogSegment(seg.log_dir, commit.version, seg.checkpoint, seg.commits + (commit,), commit,
                             seg.deltas + (commit,))
        return Snapshot(self.store, self.table_root, segment, state)

    def known_checksum(self, checksum: "VersionChecksum") -> None:
        """Record `checksum` as this version's `.crc` content (the writer that just wrote it), so
        `version_checksum` needs no read."""
        if checksum is not None:
            self.__dict__["version_checksum"] = checksum

    # --- version checksum (`<v>.crc`) ------------------------------------------------------------
    @cached_property
    def version_checksum(self) -> "VersionChecksum | None":
        """The version's checksum file (`tahoe.protocol.version_checksum.VersionChecksum`), or
        None when the log has none (or an unreadable one: logged)."""
        from .crc import read_version_checksum

        return read_version_checksum(self.store, self.segment.log_dir, self.version)

    def validate_checksum(self, strict: bool = True) -> dict[str, str]:
        """Check the replayed state against the version's `.crc` (spec "State Validation"):
        field → message per disagreement, empty when they agree or there is no `.crc`.
        `strict`: a disagreement raises VersionChecksumMismatchError, else it is logged."""
        from .crc import validate_snapshot

        return validate_snapshot(self, strict=strict)

    # --- identity ------------------------------------------------------------------------------
    @property
    def version(self) -> int:
        return self.segment.version

    @cached_property
    def timestamp(self) -> int:
        """The commit timestamp of this version in ms: the inCommitTimestamp when the table has
        that feature enabled, else the commit file's modification time — also when a checkpoint
        at this version is what the snapshot was loaded from (the checkpoint file's own time is
        when it was written, not when the version was committed). Only when the log no longer
        holds the version's commit is the checkpoint file's time used."""
        md = self._metadata   # (a log without metaData still has a timestamp)
        ict = md is not None and bool(bool_property(md.configuration, "delta.enableInCommitTimestamps"))
        tip = self.segment.last_commit or self.segment.version_commit
        if ict:
            ci = self._replayed.last_commit_info \
                if self._replayed is not None and self.segment.last_commit is not None else None
            if ci is None and self.version_checksum is not None and \
                    self.version_checksum.in_commit_timestamp is not None:
                return int(self.version_checksum.in_commit_timestamp)
            if ci is None and tip is not None:
                from .file_actions import read_commit

                raw = next((o["commitInfo"] for o in read_commit(self.store, tip.path)
                            if isinstance(o.get("commitInfo"), dict)), None)
                ci = CommitInfo.from_dict(raw) if raw is not None else None
            if ci is not None and ci.in_commit_timestamp is not None:
                return int(ci.in_commit_timestamp)
        if tip is not None:
            return tip.status.modification_time
        return self.segment.checkpoint.files[0].status.modification_time if self.segment.checkpoint else 0

    # --- metadata ------------------------------------------------------------------------------
    @property
    def schema(self) -> StructType:
        return self.metadata.schema

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata.partition_columns)

    @property
    def configuration(self) -> dict[str, str]:
        return dict(self.metadata.configuration)

    @property
    def column_mapping_mode(self) -> str:
        """The mode in effect (`column_mapping.effective_mode`: the property needs the protocol's feature)."""
        return column_mapping.effective_mode(self.metadata.configuration, self.protocol)

    def supports_feature(self, name: str) -> bool:
        return is_feature_supported(self.protocol, name)

    @property
    def set_transactions(self) -> dict[str, SetTransaction]:
        return dict(self._state.txns)

    def txn_version(self, app_id: str) -> int | None:
        """The last committed version of an application transaction id (idempotent writes)."""
        t = self._state.txns.get(app_id)
        return t.version if t else None

    @property
    def domain_metadata(self) -> dict[str, DomainMetadata]:
        return dict(self._state.domains)

    @property
    def row_id_high_water_mark(self) -> int | None:
        """Highest row id assigned: the `delta.rowTracking` domain (current) or the
        rowIdHighWaterMark action (seed spec), whichever the table uses."""
        dm = self._state.domains.get("delta.rowTracking")
        if dm is not None:
            try:
                return int(json.loads(dm.configuration)["rowIdHighWaterMark"])
            except (ValueError, KeyError, TypeError):
                raise CorruptLogError(f"invalid delta.rowTracking domain configuration: {dm.configuration!r}")
        hw = self._state.row_id_high_water_mark
        return hw.high_water_mark if hw else None

    # --- files ---------------------------------------------------------------------------------
    def files_table(self, columns: Iterable[str] | None = None) -> pa.Table:
        """Active files as Arrow (columns of `ADD_SCHEMA`; all when None)."""
        assert self._state.files is not None
        return self._state.files.table(columns, "add")

    def files_batches(self, columns: Iterable[str] | None = None) -> Iterator[pa.Table]:
        """`files_table(columns)` a batch at a time (`tahoe.log.replay.ActiveFiles.batches`): a
        big checkpoint's files are read and reconciled a batch at a time, never all held."""
        assert self._state.files is not None
        return self._state.files.batches(columns, "add")

    def tombstones_table(self, columns: Iterable[str] | None = None) -> pa.Table:
        """Tombstones (remove actions kept for VACUUM) as Arrow."""
        assert self._state.files is not None
        return self._state.files.table(columns, "remove")

    def add_files(self) -> list[AddFile]:
        return add_files_from_table(self.files_table())

    def tombstones(self) -> list[RemoveFile]:
        return [RemoveFile.from_dict(_row_to_dict(r)) for r in self.tombstones_table().to_pylist()]

    @property
    def num_files(self) -> int:
        crc = self.version_checksum
        if crc is not None:
            return crc.num_files
        return self.files_table(["path"]).num_rows

    @property
    def size_in_bytes(self) -> int:
        crc = self.version_checksum
        if crc is not None:
            return crc.table_size_bytes
        import pyarrow.compute as pc

        s = pc.sum(self.files_table(["size"]).column("size")).as_py()
        return int(s or 0)

    def __repr__(self) -> str:
        return f"Snapshot(table={self.table_root!r}, version={self.version})"

