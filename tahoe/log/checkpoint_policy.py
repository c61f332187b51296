"""When a commit is followed by a checkpoint, and the post-commit step that writes it.

  1. `checkpoint_due`: every `delta.checkpointInterval` commits (10, as delta-spark), or — tahoe's
     own rule, `tahoe.checkpoint.jsonSizeThreshold` (32mb; 0: off) — once the JSON a reader
     replays after the newest checkpoint has reached that size.
  2. `checkpoint_if_needed`: writes the checkpoint when due, keeps the writer's snapshot rebased on
     it, then cleans up expired log files (`delta.enableExpiredLogCleanup`,
     `tahoe.log.metadata_cleanup`). Never raises: the commit already succeeded.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from ..errors import CorruptLogError
from ..protocol.filenames import commit_file_name
from ..protocol.properties import CHECKPOINT_JSON_SIZE_THRESHOLD, bool_property, int_property, size_property
from .checkpoints import write_checkpoint_and_snapshot
from .last_checkpoint import LastCheckpoint
from .metadata_cleanup import cleanup_expired_logs, cleanup_unreferenced_sidecars
from .replay import read_commit
from .segment import LogSegment
from .snapshot import Snapshot
from .snapshot_cache import remember

__all__ = ["checkpoint_due", "checkpoint_if_needed", "json_tail_bytes", "cleanup_logs"]

_logger = logging.getLogger(__name__)

_conf_cache: dict[tuple[int, str], tuple[int, dict]] = {}
_conf_lock = threading.Lock()


def _configuration_at(log: Any, version: int) -> dict:
    """The table configuration at `version`, cheaply: the cached configuration of an earlier
    version brought forward by the metaData actions of the commits in between (usually one small
    file); a full snapshot load only the first time or when a commit is missing."""
    key = (id(log.store), log.table_root)
    with _conf_lock:
        cached = _conf_cache.get(key)
    conf = None
    if cached is not None and cached[0] <= version and version - cached[0] <= 100:
        conf = dict(cached[1])
        try:
            for v in range(cached[0] + 1, version + 1):
                for obj in read_commit(log.store, log.store.join(log.log_dir, commit_file_name(v))):
                    md = obj.get("metaData")
                    if isinstance(md, dict):
                        conf = {k: x for k, x in (md.get("configuration") or {}).items() if x is not None}
        except (FileNotFoundError, CorruptLogError):
            conf = None
    if conf is None:
        conf = log.snapshot(version=version).configuration
    with _conf_lock:
        _conf_cache[key] = (version, conf)
        if len(_conf_cache) > 1024:
            _conf_cache.pop(next(iter(_conf_cache)))
    return conf


def json_tail_bytes(log: Any, version: int) -> int:
    """Bytes of JSON a reader of `version` replays after its newest checkpoint: the commits (or
    log compaction files standing for them) of its log segment."""
    return sum(f.status.size for f in LogSegment.for_version(log.store, log.table_root, version).deltas)


def checkpoint_due(conf: dict, version: int, tail_bytes: "int | Callable[[], int]") -> bool:
    """Whether a commit of `version` is followed by a checkpoint: `version` > 0 and a multiple of
    `delta.checkpointInterval` (as delta-spark), or — tahoe's own rule, the table property
    `tahoe.checkpoint.jsonSizeThreshold` (default 32mb, 0: off) — the JSON a reader replays after
    the newest checkpoint (`tail_bytes`, or a callable computing it) has reached the threshold."""
    if version <= 0:
        return False
    if version % int_property(conf, "delta.checkpointInterval") == 0:
        return True
    threshold = size_property(conf, CHECKPOINT_JSON_SIZE_THRESHOLD)
    if not threshold:
        return False
    return (tail_bytes() if callable(tail_bytes) else tail_bytes) >= threshold


def checkpoint_if_needed(log: Any, version: int, configuration: dict | None = None,
                         tail_bytes: int | None = None, snapshot: Snapshot | None = None,
                         cleanup: bool = True) -> LastCheckpoint | None:
    """Post-commit hook: when `checkpoint_due` (every `delta.checkpointInterval` commits, or once
    the JSON since the last checkpoint reaches `tahoe.checkpoint.jsonSizeThreshold`), write the
    checkpoint of `version`, then (if `delta.enableExpiredLogCleanup`) clean up expired log files.
    Returns the checkpoint written, or None. Never raises — the commit already succeeded — but
    logs a warning. `configuration`: the table configuration at `version` when the caller knows it
    (saves a read); `tail_bytes`: the JSON bytes after the newest checkpoint up to `version` when
    the caller knows them (else the log is listed, only when the interval alone does not decide);
    `snapshot`: the snapshot of `version` when the caller has it (saves loading it); `cleanup`
    False: no log cleanup after it."""
    try:
        conf = configuration if configuration is not None else _configuration_at(log, version)
        if not checkpoint_due(conf, version, tail_bytes if tail_bytes is not None
                              else (lambda: json_tail_bytes(log, version))):
            return None
        given = snapshot if snapshot is not None and snapshot.version == version else None
        lc, rebased = write_checkpoint_and_snapshot(log, version, None, None, None, given)
        if given is not None and rebased is not None:
            # the writer's kept snapshot, rebased on the checkpoint as a fresh load would be
            rebased.known_checksum(given.version_checksum)
            remember(rebased)
    except Exception as e:  # noqa: BLE001 - a failed checkpoint never fails the commit
        _logger.warning("checkpoint of %s at version %s failed: %s: %s",
                        getattr(log, "table_root", "?"), version, type(e).__name__, e)
        return None
    if cleanup and bool_property(conf, "delta.enableExpiredLogCleanup"):
        cleanup_logs(log, version, conf)
    return lc


def cleanup_logs(log: Any, version: int, configuration: dict | None = None) -> None:
    """Expired log files and unreferenced sidecars deleted (spec "Metadata Cleanup"); never raises."""
    try:
        conf = configuration if configuration is not None else _configuration_at(log, version)
        cleanup_expired_logs(log, configuration=conf)
        cleanup_unreferenced_sidecars(log, configuration=conf)
    except Exception as e:  # noqa: BLE001
        _logger.warning("log cleanup of %s after version %s failed: %s: %s",
                        getattr(log, "table_root", "?"), version, type(e).__name__, e)
