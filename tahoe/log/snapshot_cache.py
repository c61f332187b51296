"""The snapshots a writer in this process committed, kept so its next transaction starts from them instead of
replaying the log again. A commit derives the new snapshot (`Snapshot.after_commit`) and hands it to
`remember`; `recall` gives it back to `DeltaLog.snapshot` only when the log still looks the same, checked with
`LogStore.status` calls, no listing:
  1. every file the snapshot was built from is there with the same size and modification time;
  2. for the latest version: no newer commit (up to `MAX_CATCH_UP` are replayed on top) and an unchanged
     `_last_checkpoint`.
Only stores naming a `snapshot_cache_namespace` keep snapshots, of small logs (`MAX_CACHED_LOG_BYTES`), at
most `MAX_TABLES` tables."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from ..protocol.filenames import LAST_CHECKPOINT, commit_file_name, crc_file_name, parse_log_file_name
from ..storage.base import LogStore
from .crc import validation_mode
from .segment import LogFile
from .snapshot import Snapshot

__all__ = ["remember", "recall", "forget", "MAX_TABLES", "MAX_CACHED_LOG_BYTES", "MAX_CATCH_UP"]

MAX_TABLES = 16
MAX_CACHED_LOG_BYTES = 16 << 20   # checkpoint + commits after it
MAX_CATCH_UP = 16                 # newer commits replayed onto a kept snapshot before a fresh load


@dataclass
class _Entry:
    snapshot: Snapshot
    files: tuple[tuple[str, int, int], ...]       # (path, size, mtime) of each file it was built from
    last_checkpoint: tuple[int, int] | None       # (size, mtime) of `_last_checkpoint`, None: absent
    validated: bool                               # checked against its `.crc` (TAHOE_VALIDATE_CHECKSUMS)


_lock = threading.Lock()
_entries: "OrderedDict[tuple[str, str], _Entry]" = OrderedDict()


def _key(store: LogStore, table_root: str) -> tuple[str, str] | None:
    ns = store.snapshot_cache_namespace
    return None if ns is None else (ns, table_root)


def _last_checkpoint_stamp(store: LogStore, log_dir: str) -> tuple[int, int] | None:
    st = store.status(store.join(log_dir, LAST_CHECKPOINT))
    return None if st is None else (st.size, st.modification_time)


def _files_of(snapshot: Snapshot) -> tuple[tuple[str, int, int], ...]:
    seg = snapshot.segment
    files = list(seg.checkpoint.files) if seg.checkpoint is not None else []
    files += list(seg.deltas)
    if seg.version_commit is not None and seg.version_commit not in files:
        files.append(seg.version_commit)
    out = [(f.path, f.status.size, f.status.modification_time) for f in files]
    # the version's `.crc`, when there is one: the next commit's checksum is derived from it
    crc = snapshot.store.status(snapshot.store.join(seg.log_dir, crc_file_name(snapshot.version)))
    if crc is not None:
        out.append((crc.path, crc.size, crc.modification_time))
    return tuple(out)


def remember(snapshot: Snapshot, validated: bool = False) -> bool:
    """Keep `snapshot` (just committed by this process) for `recall`; False when it is not kept
    (a store without a namespace, a large log). `validated`: it was checked against its `.crc`
    (else `recall` checks it when TAHOE_VALIDATE_CHECKSUMS asks for it, as a load would)."""
    key = _key(snapshot.store, snapshot.table_root)
    if key is None:
        return False
    files = _files_of(snapshot)
    if sum(size for _, size, _ in files) > MAX_CACHED_LOG_BYTES:
        forget(snapshot.store, snapshot.table_root)
        return False
    entry = _Entry(snapshot, files, _last_checkpoint_stamp(snapshot.store, snapshot.segment.log_dir), validated)
    with _lock:
        _entries[key] = entry
        _entries.move_to_end(key)
        while len(_entries) > MAX_TABLES:
            _entries.popitem(last=False)
    return True


def forget(store: LogStore, table_root: str) -> None:
    key = _key(store, table_root)
    if key is not None:
        with _lock:
            _entries.pop(key, None)


def _unchanged(store: LogStore, files: tuple[tuple[str, int, int], ...]) -> bool:
    for path, size, mtime in files:
        st = store.status(path)
        if st is None or st.size != size or st.modification_time != mtime:
            return False
    return True


def recall(store: LogStore, table_root: str, version: int | None = None) -> Snapshot | None:
    """The kept snapshot of the table at `version` (None: the latest), when the log still holds
    exactly the files it was built from (see the module docstring); else None."""
    key = _key(store, table_root)
    if key is None:
        return None
    with _lock:
        entry = _entries.get(key)
    if entry is None:
        return None
    snap = entry.snapshot
    if version is not None and version != snap.version:
        return None
    if not _unchanged(store, entry.files):
        forget(store, table_root)
        return None
    if version is not None:
        return _validated(entry)
    if _last_checkpoint_stamp(store, snap.segment.log_dir) != entry.last_checkpoint:
        return None
    caught_up = snap
    for _ in range(MAX_CATCH_UP + 1):
        path = store.join(snap.segment.log_dir, commit_file_name(caught_up.version + 1))
        st = store.status(path)
        if st is None:
            break
        try:
            data = store.read(path)
        except FileNotFoundError:
            return None
        name = parse_log_file_name(commit_file_name(caught_up.version + 1))
        assert name is not None
        # the status read before the bytes: a file replaced meanwhile fails the next recall's check
        nxt = caught_up.after_commit(LogFile(st, name), data)
        if nxt is None:
            return None
        caught_up = nxt
    else:
        return None
    if caught_up is snap:
        return _validated(entry)
    remember(caught_up)
    return _validated(_entries.get(key) or _Entry(caught_up, (), None, False))


def _validated(entry: _Entry) -> Snapshot:
    """The entry's snapshot, checked against its `.crc` first when TAHOE_VALIDATE_CHECKSUMS asks
    for it and it was not yet (a disagreement raises in strict mode, as a load's would)."""
    mode = validation_mode()
    if mode is not None and not entry.validated:
        entry.snapshot.validate_checksum(strict=mode == "strict")
        entry.validated = True
    return entry.snapshot
