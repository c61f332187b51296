"""The log core: log segments, replay, snapshots, checkpoints (read), history, time travel.
Spark-free; all I/O goes through a `tahoe.storage.LogStore`."""

from .delta_log import CommitEntry, DeltaLog, parse_timestamp
from .segment import LogSegment
from .snapshot import Snapshot

__all__ = ["CommitEntry", "DeltaLog", "LogSegment", "Snapshot", "parse_timestamp"]
