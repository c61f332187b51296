"""Metadata cleanup (spec "Metadata Cleanup"): the log files and V2 sidecars no version within the
log retention needs, deleted.

  1. `cleanup_expired_logs`: commits, checkpoints, checksums and compactions of the versions
     before the newest complete checkpoint at the retention boundary — commits first — honouring
     checkpoint protection (all at once up to the protected version, or nothing).
  2. `cleanup_unreferenced_sidecars`: files in `_delta_log/_sidecars/` no checkpoint references,
     older than the boundary truncated to midnight UTC and than a day; fails closed.
"""

from __future__ import annotations

import logging
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..protocol import timestamps
from ..protocol.filenames import SIDECAR_DIR, LogFileKind, parse_log_file_name
from ..protocol.properties import int_property, interval_property_ms
from ..protocol.table_features import is_feature_supported
from .replay import read_commit
from .segment import complete_checkpoints, list_log

__all__ = ["cleanup_expired_logs", "cleanup_unreferenced_sidecars"]

_logger = logging.getLogger(__name__)


def cleanup_expired_logs(log: Any, now_ms: int | None = None, configuration: dict | None = None, *,
                         retention_ms: int | None = None) -> list[str]:
    """Delete the log files (commits, checkpoints, version checksums, compactions) that no version
    within `delta.logRetentionDuration` (or `retention_ms`: DROP FEATURE ... TRUNCATE HISTORY's
    shorter one) needs, and return their paths.

    Let B be the first version whose commit is younger than the retention boundary (the latest
    version if none is) and C the newest complete checkpoint at or before B. Every version >= B is
    rebuilt from C and the commits after it, so exactly the files of versions < C whose
    modification time is older than the boundary are deleted — commit files first, then the
    checkpoints and the rest (spec, Checkpoint Protection (d): commits go before the checkpoints
    that stand for them). Without such a checkpoint nothing is deleted. Checkpoint protection
    (the `checkpointProtection` writer feature): when C is below
    `delta.requireCheckpointProtectionBeforeVersion`, nothing is deleted — the log is cleaned up
    to that version in one go or not at all, and no checkpoint before it goes. `configuration`:
    the table's, when the caller has it (saves loading the snapshot when nothing is old enough)."""
    now_ms = timestamps.now_ms() if now_ms is None else now_ms
    store = log.store

    def cutoff_of(conf: dict) -> int:
        return now_ms - (interval_property_ms(conf, "delta.logRetentionDuration") if retention_ms is None
                         else retention_ms)

    if configuration is not None and _nothing_expired(store, log.log_dir, cutoff_of(configuration)):
        return []
    files = list_log(store, log.log_dir, 0)
    commits = sorted((f for f in files if f.name.kind == LogFileKind.COMMIT), key=lambda f: f.version)
    if not commits:
        return []
    snapshot = None
    if configuration is None:
        snapshot = log.snapshot()
        configuration = snapshot.configuration
    conf = configuration
    cutoff = cutoff_of(conf)
    if min(f.status.modification_time for f in files) > cutoff:
        return []   # nothing is old enough
    boundary = next((c.version for c in commits if c.status.modification_time > cutoff), commits[-1].version)
    checkpoints = [v for v in complete_checkpoints(files) if v <= boundary]
    if not checkpoints:
        return []
    keep_from = max(checkpoints)
    protected_before = int_property(conf, "delta.requireCheckpointProtectionBeforeVersion")
    if protected_before > 0:
        protocol = (snapshot or log.snapshot()).protocol
        # Spec, Checkpoint Protection: clean up to the protected version in one go, or not at all
        # (never in chunks that would leave the protected checkpoints' history half gone).
        if is_feature_supported(protocol, "checkpointProtection") and keep_from < protected_before:
            return []
    local = type(store).__name__ == "LocalLogStore"
    deleted: list[str] = []
    order = sorted(files, key=lambda f: (f.name.kind != LogFileKind.COMMIT, f.version, f.name.name))
    for f in order:
        last_version = f.name.end_version if f.name.kind == LogFileKind.COMPACTION else f.version
        if last_version is None or last_version >= keep_from:
            continue
        if f.status.modification_time > cutoff:
            continue
        store.delete(f.path)
        deleted.append(f.path)
        if local:  # Hadoop's side checksum file, if a JVM writer left one
            d, _, name = f.path.rpartition("/")
            store.delete(store.join(d, f".{name}.crc"))
    return deleted


def _nothing_expired(store: Any, log_dir: str, cutoff: int) -> bool:
    """A cheap sufficient condition for `cleanup_expired_logs` to delete nothing, without the
    status of every log file: the earliest commit C is younger than `cutoff` and no log file
    belongs to a version before C. (Then the retention boundary is C, the checkpoint kept is at
    or before C, and only files of versions before C could go.) One listing of names and one
    status; False whenever that does not settle it (the full rule then decides)."""
    try:
        names = store.list_names(log_dir)
    except (FileNotFoundError, NotADirectoryError):
        return True
    first_commit = None
    before: list[int] = []
    for n in names:   # sorted by name: by version first (the 20-digit prefix)
        parsed = parse_log_file_name(n)
        if parsed is None:
            continue
        if parsed.kind == LogFileKind.COMMIT:
            first_commit = parsed
            break
        before.append(parsed.version)
    if first_commit is None or any(v < first_commit.version for v in before):
        return False
    st = store.status(store.join(log_dir, first_commit.name))
    return st is not None and st.modification_time > cutoff


# --- sidecar cleanup (v2 checkpoints) ------------------------------------------------------------

_DAY_MS = 24 * 3600 * 1000


def _sidecar_refs(store: Any, path: str, ext: str) -> set[str]:
    """The file names of the sidecars a checkpoint file references."""
    if ext == "json":
        return {str(o["sidecar"]["path"]).rsplit("/", 1)[-1] for o in read_commit(store, path)
                if isinstance(o.get("sidecar"), dict) and o["sidecar"].get("path")}
    with store.open_input_file(path) as f:
        pf = pq.ParquetFile(f)
        if "sidecar" not in pf.schema_arrow.names:
            return set()
        col = pf.read(columns=["sidecar.path"]).column("sidecar")
    paths = pc.struct_field(col.combine_chunks(), "path").drop_null().to_pylist()
    return {p.rsplit("/", 1)[-1] for p in paths}


def cleanup_unreferenced_sidecars(log: Any, now_ms: int | None = None,
                                  configuration: dict | None = None) -> list[str]:
    """Spec "Metadata Cleanup" steps 4-5 for V2 checkpoints: delete the files in
    `_delta_log/_sidecars/` that no checkpoint left in the log references and that are older than
    the cleanup boundary — `delta.logRetentionDuration` before now, truncated to midnight UTC as
    delta-spark does, and never within the last day (a checkpoint being written has its sidecars
    before it is itself visible). Returns the deleted paths. Fails closed: a checkpoint that
    cannot be read means the referenced set is unknown, and nothing is deleted."""
    now_ms = timestamps.now_ms() if now_ms is None else now_ms
    store = log.store
    sidecar_dir = store.join(log.log_dir, SIDECAR_DIR)
    try:
        sidecars = list(store.list_dir(sidecar_dir))
    except (FileNotFoundError, NotADirectoryError):
        return []
    if not sidecars:
        return []
    conf = configuration if configuration is not None else log.snapshot().configuration
    boundary = now_ms - interval_property_ms(conf, "delta.logRetentionDuration")
    cutoff = min(boundary - boundary % _DAY_MS, now_ms - now_ms % _DAY_MS - _DAY_MS)
    candidates = [st for st in sidecars if st.modification_time < cutoff]
    if not candidates:
        return []
    referenced: set[str] = set()
    for f in list_log(store, log.log_dir, 0):
        if f.name.kind in (LogFileKind.V2_CHECKPOINT, LogFileKind.CHECKPOINT):
            try:
                referenced |= _sidecar_refs(store, f.path, f.name.ext)
            except FileNotFoundError:
                continue   # deleted meanwhile (another cleanup): it references nothing any more
            except Exception as e:  # noqa: BLE001 - fail closed
                _logger.warning("sidecar cleanup of %s skipped: cannot read checkpoint %s: %s: %s",
                                log.table_root, f.path, type(e).__name__, e)
                return []
    deleted = []
    for st in candidates:
        if st.name not in referenced:
            store.delete(st.path)
            deleted.append(st.path)
    return deleted
