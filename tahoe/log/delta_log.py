"""A table's log as a whole: where it lives, its versions, snapshots at a version or timestamp
(time travel), and history (spec "Commit Provenance Information").

Commit timestamps: the inCommitTimestamp of a commit when the table has that feature enabled
(from its enablement version on), else the commit file's modification time, made strictly
increasing the way delta-spark does (a timestamp not after its predecessor's becomes predecessor
+ 1 ms), so "the version as of T" — the newest version whose timestamp is <= T — is well defined;
across the enablement, T is looked up on one side of it only (see `version_at_timestamp`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..errors import CorruptLogError, DeltaError, TableNotFoundError, VersionNotFoundError
from ..protocol.filenames import LOG_DIR, LogFileKind
from ..protocol.properties import bool_property, int_property
from ..protocol.timestamps import instant_ms
from ..storage import store_for
from ..storage.base import LogStore
from .segment import LogFile, list_log
from .snapshot import Snapshot
from .snapshot_cache import recall

__all__ = ["DeltaLog", "CommitEntry", "parse_timestamp"]


@dataclass(frozen=True)
class CommitEntry:
    """One version of the history: its commitInfo (empty when the commit carried none)."""
    version: int
    timestamp: int                       # ms since epoch
    commit_info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.commit_info)
        d["version"] = self.version
        d["timestamp"] = self.timestamp
        return d


def parse_timestamp(ts: str | int | float | datetime, time_zone: str | None = None) -> int:
    """A timestamp as ms since epoch: epoch ms (int), a datetime, or a string (`2024-01-01`,
    `2024-01-01 10:00:00`, `2024-01-01T10:00:00.123Z`, with offsets). A zone-less string or a
    naive datetime is wall-clock time in `time_zone` — the Spark session time zone on Spark, UTC
    (`tahoe.protocol.timestamps.DEFAULT_TIME_ZONE`) when not given."""
    try:
        return instant_ms(ts, time_zone)
    except TypeError:
        raise ValueError(f"cannot parse timestamp {ts!r}: use epoch milliseconds, a datetime or ISO 8601 text, "
                         f"e.g. 2024-01-01T10:00:00Z") from None


class DeltaLog:
    """Entry point of the log core: `DeltaLog.for_table(path)`."""

    def __init__(self, store: LogStore, table_root: str):
        self.store = store
        self.table_root = table_root
        self.log_dir = store.join(table_root, LOG_DIR)

    @classmethod
    def for_table(cls, uri: str, storage_options: dict | None = None) -> "DeltaLog":
        store, root = store_for(uri, storage_options)
        return cls(store, root)

    # --- snapshots ---------------------------------------------------------------------------
    def snapshot(self, version: int | None = None, timestamp: Any = None, *,
                 from_checksum: bool = False, time_zone: str | None = None) -> Snapshot:
        """The latest snapshot, or the one at `version`, or the one as of `timestamp` (a zone-less
        one in `time_zone`: see `parse_timestamp`).
        `from_checksum`: protocol and metaData from the version's `.crc` when it has them, the log
        replayed only on first need (`Snapshot.load`)."""
        if version is not None and timestamp is not None:
            raise ValueError("give either version or timestamp, not both")
        if timestamp is not None:
            version = self.version_at_timestamp(timestamp, time_zone=time_zone)
        kept = recall(self.store, self.table_root, version)   # this process's own last commit
        if kept is not None:
            return kept
        return Snapshot.load(self.store, self.table_root, version, from_checksum=from_checksum)

    def exists(self) -> bool:
        try:
            return any(f.name.kind == LogFileKind.COMMIT for f in list_log(self.store, self.log_dir, 0))
        except TableNotFoundError:
            return False

    def _commits(self) -> list[LogFile]:
        commits = [f for f in list_log(self.store, self.log_dir, 0) if f.name.kind == LogFileKind.COMMIT]
        if not commits:
            raise TableNotFoundError(f"`{self.table_root}` is not a Delta table: no commit files in {self.log_dir}",
                                     error_class="DELTA_MISSING_DELTA_TABLE")
        return commits

    def _ict_enablement_version(self) -> int | None:
        """The first version whose commits carry in-commit timestamps (the table property
        `delta.inCommitTimestampEnablementVersion`; 0 when the feature was on from the start), or
        None when the table does not use them."""
        try:
            conf = self.snapshot(from_checksum=True).metadata.configuration
        except DeltaError:  # a log without readable metaData has no in-commit timestamps
            return None
        if not bool_property(conf, "delta.enableInCommitTimestamps"):
            return None
        v = int_property(conf, "delta.inCommitTimestampEnablementVersion")
        t = int_property(conf, "delta.inCommitTimestampEnablementTimestamp")
        if (v is None) != (t is None):
            # as delta-spark: the two enablement properties exist together or not at all
            raise CorruptLogError(
                f"table {self.table_root}: delta.inCommitTimestampEnablementVersion and "
                f"delta.inCommitTimestampEnablementTimestamp must be both set or both absent "
                f"(found only {'the version' if t is None else 'the timestamp'})")
        return v if v is not None else 0

    def commit_timestamps(self) -> list[tuple[int, int]]:
        """(version, timestamp ms) of every commit still in the log, ascending by version. From
        the in-commit-timestamp enablement version on: each commit's inCommitTimestamp; before it:
        file modification times, made strictly increasing among themselves only (they may even be
        later than the in-commit timestamps, e.g. after the table was copied)."""
        commits = self._commits()
        ict_from = self._ict_enablement_version()
        out: list[tuple[int, int]] = []
        prev = None
        for c in commits:
            ts = c.status.modification_time
            if ict_from is not None and c.version >= ict_from:
                if c.version == ict_from:
                    prev = None   # a new range: not ordered against the file times before it
                ci = self._commit_info(c)
                if ci.get("inCommitTimestamp") is not None:
                    ts = int(ci["inCommitTimestamp"])
            if prev is not None and ts <= prev:
                ts = prev + 1
            out.append((c.version, ts))
            prev = ts
        return out

    def version_at_or_after(self, timestamp: Any, time_zone: str | None = None) -> int:
        """The first version committed at or after `timestamp` (where a change-data range that
        starts at a timestamp begins); VersionNotFoundError when every commit is older."""
        ts = parse_timestamp(timestamp, time_zone)
        stamps = self.commit_timestamps()
        for v, t in stamps:
            if t >= ts:
                return v
        raise VersionNotFoundError(_after_latest(ts, self.table_root, stamps[-1]), error_class="DELTA_TIMESTAMP_GREATER_THAN_COMMIT")

    def version_at_or_before(self, timestamp: Any, time_zone: str | None = None) -> int:
        """The newest version committed at or before `timestamp` (where a change-data range that
        ends at a timestamp ends); VersionNotFoundError when every commit is newer."""
        ts = parse_timestamp(timestamp, time_zone)
        best = None
        for v, t in self.commit_timestamps():
            if t <= ts:
                best = v
        if best is None:
            first = self.commit_timestamps()[0]
            raise VersionNotFoundError(_before_earliest(ts, first), error_class="DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION")
        return best

    def version_at_timestamp(self, timestamp: Any, time_zone: str | None = None) -> int:
        """The newest version committed at or before `timestamp`. On a table that enabled
        in-commit timestamps at version E (timestamp T_E), as delta-spark: a timestamp >= T_E is
        looked up among the in-commit timestamps of versions >= E, an earlier one among the file
        times of the versions before E."""
        ts = parse_timestamp(timestamp, time_zone)
        stamps = self.commit_timestamps()
        ict_from = self._ict_enablement_version()
        if ict_from is not None and stamps[0][0] < ict_from <= stamps[-1][0]:
            ict_ts = dict(stamps)[ict_from]
            if ts >= ict_ts:
                stamps = [s for s in stamps if s[0] >= ict_from]
            else:
                before = [s for s in stamps if s[0] < ict_from]
                if ts >= before[0][1]:
                    return max(v for v, t in before if t <= ts)
                stamps = before
        if ts < stamps[0][1]:
            raise VersionNotFoundError(_before_earliest(ts, stamps[0]),
                                       error_class="DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION")
        if ts > stamps[-1][1]:
            # As delta-spark: a timestamp after the latest commit is an error, not "latest".
            raise VersionNotFoundError(_after_latest(ts, self.table_root, stamps[-1]),
                                       error_class="DELTA_TIMESTAMP_GREATER_THAN_COMMIT")
        best = stamps[0][0]
        for v, t in stamps:
            if t <= ts:
                best = v
            else:
                break
        return best

    # --- history -----------------------------------------------------------------------------
    def _commit_info(self, c: LogFile) -> dict[str, Any]:
        from .file_actions import read_commit

        for obj in read_commit(self.store, c.path):
            ci = obj.get("commitInfo")
            if isinstance(ci, dict):
                return ci
        return {}

    def history(self, limit: int | None = None) -> list[CommitEntry]:
        """Commit entries, newest first (at most `limit`)."""
        stamps = dict(self.commit_timestamps())
        commits = self._commits()[::-1]
        if limit is not None:
            commits = commits[:limit]
        out = []
        for c in commits:
            ci = self._commit_info(c)
            out.append(CommitEntry(c.version, stamps[c.version], ci))
        return out


def _fmt(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat()



def _after_latest(ts, table: str, latest: tuple[int, Any]) -> str:
    """delta-spark's DELTA_TIMESTAMP_GREATER_THAN_COMMIT message, then the latest version."""
    return (f"The provided timestamp ({_fmt(ts)}) is after the latest version available to this table ({table}). "
            f"Please use a timestamp before or at {_fmt(latest[1])} (version {latest[0]}).")


def _before_earliest(ts, earliest: tuple[int, Any]) -> str:
    """delta-spark's DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION message, then the version."""
    return (f"The provided timestamp ({_fmt(ts)}) is before the earliest version available to this table "
            f"({_fmt(earliest[1])}). Please use a timestamp after {_fmt(earliest[1])} (version {earliest[0]}).")
