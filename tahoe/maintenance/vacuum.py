"""VACUUM: delete the files of a table's directory that no version inside the retention window needs
(delta-spark's VacuumCommand; delta-rs's `DeltaTable.vacuum`).

  1. `full=True`: files listed (or given by `inventory`) older than the cutoff and not valid (`_valid_paths`);
     hidden names (`_`, `.`) are never listed, except `_change_data` and `_delta_index`; `full=False`:
     only the files of tombstones older than the cutoff.
  2. The protocol must be writable by tahoe (what `vacuumProtocolCheck` asks).
  3. A retention below `delta.deletedFileRetentionDuration` raises RetentionTooShortError unless
     `enforce_retention_duration=False` (Spark: `spark.databricks.delta.retentionDurationCheck.enabled`).
  4. A dry run deletes and commits nothing; a real run commits `VACUUM START`, deletes in parallel
     (`max_workers`), then `VACUUM END` (status COMPLETED or FAILED); `log_commits=False` skips both."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable
from urllib.parse import unquote

import pyarrow.compute as pc

from ..errors import InvalidOptionError, RetentionTooShortError
from ..log import DeltaLog, Snapshot
from ..protocol import column_mapping
from ..protocol.deletion_vectors import DeletionVectorDescriptor
from ..protocol.iceberg_compat import uniform_iceberg_enabled
from ..protocol.properties import interval_property_ms
from ..protocol.table_features import check_writable
from ..protocol import timestamps
from ..storage import DirStatus, FileStatus, resolve_data_path
from ..txn import Transaction

__all__ = ["vacuum", "plan_vacuum", "VacuumPlan", "VacuumResult", "is_hidden", "RETENTION_CHECK_CONF"]

RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
HOUR_MS = 3_600_000

Progress = Callable[[str, int, int], None]


def is_hidden(name: str, partition_dirs: Iterable[str] = (), iceberg_metadata: bool = False) -> bool:
    """delta-spark's DeltaTableUtils.isHiddenDirectory for one path component: hidden names
    ("_" or "." first) are never vacuumed — except `_delta_index`, `_change_data` and partition
    directories (`<column>=...`); `metadata` is hidden on UniForm tables."""
    if iceberg_metadata and name == "metadata":
        return True
    if not (name.startswith("_") or name.startswith(".")):
        return False
    if name.startswith("_delta_index") or name.startswith("_change_data"):
        return False
    return not any(name.startswith(c + "=") for c in partition_dirs)


@dataclass
class VacuumPlan:
    """What a VACUUM of one version deletes. `files`: (full path, size); `dirs`: empty
    directories (full paths); `relative_paths` as delta-rs returns them."""

    table_root: str
    version: int
    full: bool
    delete_before_ms: int
    default_retention_ms: int
    specified_retention_ms: int | None
    retention_check_enabled: bool
    files: list[tuple[str, int]] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    dirs_present: int = 1            # directories listed, the table's own included (delta-spark's dirCounts)
    files_and_dirs_present: int = 0

    @property
    def num_files_to_delete(self) -> int:
        return len(self.files) + len(self.dirs)

    @property
    def size_of_data_to_delete(self) -> int:
        return sum(s for _, s in self.files)

    def relative(self, path: str) -> str:
        rel = path[len(self.table_root):].lstrip("/\\")
        return rel.replace(os.sep, "/") if os.sep != "/" else rel

    @property
    def relative_paths(self) -> list[str]:
        return sorted(self.relative(p) for p, _ in self.files) + sorted(self.relative(d) for d in self.dirs)


@dataclass
class VacuumResult:
    """The outcome of `vacuum`: the plan, and for a real run what was deleted and committed."""

    plan: VacuumPlan
    dry_run: bool
    num_deleted: int = 0
    start_version: int | None = None    # the VACUUM START commit
    end_version: int | None = None      # the VACUUM END commit
    seconds: float = 0.0

    @property
    def paths(self) -> list[str]:
        """The files (and empty directories) deleted — or, in a dry run, that would be —
        relative to the table root."""
        return self.plan.relative_paths

    @property
    def num_files(self) -> int:
        return self.plan.num_files_to_delete

    @property
    def size_in_bytes(self) -> int:
        return self.plan.size_of_data_to_delete

    def metrics(self) -> dict[str, Any]:
        p = self.plan
        return {
            "dryRun": self.dry_run,
            "numFilesToDelete": p.num_files_to_delete,
            "sizeOfDataToDelete": p.size_of_data_to_delete,
            "numDeletedFiles": self.num_deleted,
            "numVacuumedDirectories": p.dirs_present,
            "defaultRetentionMillis": p.default_retention_ms,
            "specifiedRetentionMillis": p.specified_retention_ms,
            "minRetainedTimestamp": p.delete_before_ms,
            "filesAndDirsPresentBeforeDelete": p.files_and_dirs_present,
            "startVersion": self.start_version,
            "endVersion": self.end_version,
        }


# --- which files are valid ---------------------------------------------------------------------

def _relativizer(table_root: str) -> Callable[[str], str | None]:
    """Full path (store spelling) → path relative to the table root with "/" separators; None
    when the file is outside the table directory."""
    root = table_root.rstrip("/\\")
    uri_root = "://" in root
    sep = "/" if uri_root else os.sep

    def rel(full: str) -> str | None:
        if not full.startswith(root) or full[len(root):len(root) + 1] not in (sep, "/"):
            return None
        r = full[len(root) + 1:]
        return r.replace(os.sep, "/") if sep != "/" else r

    return rel


def _log_path_relative(table_root: str, rel_of: Callable[[str], str | None]) -> Callable[[str], str | None]:
    def one(path: str) -> str | None:
        if not path.startswith("/") and ":" not in path.split("/", 1)[0]:
            return unquote(path) if "%" in path else path     # the common case: relative, plain
        return rel_of(resolve_data_path(table_root, path))
    return one


def _dv_relative(table_root: str, rel_of, dv: dict) -> str | None:
    d = DeletionVectorDescriptor.from_dict(dv)
    if d.storage_type == "u":
        return d.relative_path()
    if d.storage_type == "p":
        return rel_of(d.absolute_path(table_root) or "")
    return None


def _valid_paths(snapshot: Snapshot, delete_before_ms: int, keep: Iterable[Snapshot] = ()) -> set[str]:
    """Relative paths of the files the table still needs: every active add's, every tombstone's deleted at or
    after `delete_before_ms` (DV tombstones of DROP FEATURE included), the deletion-vector files they
    reference, and with `keep` every file of those versions."""
    root = snapshot.table_root
    rel_of = _relativizer(root)
    log_rel = _log_path_relative(root, rel_of)
    valid: set[str] = set()

    def take(files) -> None:
        for p in files.column("path").to_pylist():
            r = log_rel(p)
            if r is not None:
                valid.add(r)
        dvs = files.column("deletionVector")
        if dvs.null_count < len(dvs):
            for dv in dvs.filter(pc.is_valid(dvs)).to_pylist():
                r = _dv_relative(root, rel_of, dv)
                if r is not None:
                    valid.add(r)

    for snap in [snapshot, *keep]:
        take(snap.files_table(["path", "deletionVector"]))
    tomb = snapshot.tombstones_table(["path", "deletionTimestamp", "deletionVector"])
    if tomb.num_rows:
        ts = pc.fill_null(tomb.column("deletionTimestamp"), 0)
        take(tomb.filter(pc.greater_equal(ts, delete_before_ms)))
    return valid


# --- the plan ------------------------------------------------------------------------------

_LONG_MAX = (1 << 63) - 1


def _retention(snapshot: Snapshot, retention_hours: float | None, enforce: bool,
               now_ms: int) -> tuple[int, int | None, int]:
    """(delete-before timestamp, specified retention ms or None, the table's retention ms)."""
    default_ms = interval_property_ms(snapshot.configuration, "delta.deletedFileRetentionDuration")
    specified = None
    if retention_hours is not None:
        if isinstance(retention_hours, bool) or not isinstance(retention_hours, (int, float)) \
                or math.isnan(retention_hours):
            raise InvalidOptionError(f"retention hours must be a number, got {retention_hours!r}")
        if retention_hours < 0:
            raise InvalidOptionError("Retention for Vacuum can't be less than 0.")
        if math.isinf(retention_hours):
            raise InvalidOptionError(
                f"retention hours must be a finite number of hours, got {retention_hours!r} (to keep every "
                f"file, vacuum with a retention longer than the table's history, e.g. {24 * 365 * 100} hours)")
        # delta-spark rounds to whole hours, and its Long arithmetic saturates: a retention beyond
        # Long.MaxValue ms is Long.MaxValue ms (nothing is old enough to go)
        specified = min(int(round(retention_hours)) * HOUR_MS, _LONG_MAX)
        if enforce and specified < default_ms:
            hours = -(-default_ms // HOUR_MS)
            raise RetentionTooShortError(
                "Are you sure you would like to vacuum files with such a low retention period? If you "
                "have writers that are currently writing to this table, there is a risk that you may "
                "corrupt the state of your Delta table. If you are certain that there are no operations "
                "being performed on this table, such as insert/upsert/delete/optimize, then you may turn "
                f"off this check by setting: {RETENTION_CHECK_CONF} = false (without Spark: "
                "enforce_retention_duration=False; on the command line: --no-retention-check). "
                f"If you are not sure, please use a value not less than \"{hours} hours\" (the table's "
                f"delta.deletedFileRetentionDuration); asked for {retention_hours} hours.")
    retention = specified if specified is not None else default_ms
    return now_ms - retention, specified, default_ms


def plan_vacuum(snapshot: Snapshot, retention_hours: float | None = None, *,
                enforce_retention_duration: bool = True, full: bool = True,
                keep_versions: Iterable[int] | None = None, now_ms: int | None = None,
                progress: Progress | None = None, log: DeltaLog | None = None,
                max_workers: int | None = None, inventory: Iterable[tuple[str, int, bool, int]] | None = None) -> VacuumPlan:
    """What VACUUM of `snapshot` would delete (nothing is deleted here); `inventory` replaces
    the listing: (path, length, isDir, modificationTime ms) entries, those outside the table directory or
    under a hidden name ignored. Never listed: `_delta_log` and other `_`/`.` names (except `_change_data`,
    `_delta_index`), partition directories excepted; a UniForm table's `metadata/`. Directories empty when
    listed and older than the cutoff go too."""
    check_writable(snapshot.protocol)
    now_ms = timestamps.now_ms() if now_ms is None else now_ms
    delete_before, specified, default_ms = _retention(snapshot, retention_hours, enforce_retention_duration, now_ms)
    keep: list[Snapshot] = []
    for v in keep_versions or ():
        if isinstance(v, bool) or not isinstance(v, int):
            raise InvalidOptionError(f"keep_versions must be a list of version numbers, got {v!r}")
        keep.append((log or DeltaLog(snapshot.store, snapshot.table_root)).snapshot(version=v))
    plan = VacuumPlan(snapshot.table_root, snapshot.version, full, delete_before, default_ms, specified,
                      enforce_retention_duration)
    valid = _valid_paths(snapshot, delete_before, keep)
    store = snapshot.store
    root = snapshot.table_root
    rel_of = _relativizer(root)
    if full:
        parts = list(snapshot.partition_columns)
        if snapshot.column_mapping_mode != "none":
            parts += [column_mapping.physical_name(snapshot.schema.field(c)) for c in snapshot.partition_columns]
        iceberg = uniform_iceberg_enabled(snapshot.configuration)

        def skip(name: str) -> bool:
            return is_hidden(name, parts, iceberg)

        listed = 0
        entries = store.walk_tree(root, skip) if inventory is None else _inventory(inventory, root, rel_of, skip)
        for st in entries:
            listed += 1
            if progress is not None and listed % 5000 == 0:
                progress("listing", listed, 0)
            if isinstance(st, DirStatus):
                plan.dirs_present += 1
                if st.empty and st.modification_time < delete_before:
                    plan.dirs.append(st.path)
                continue
            if st.modification_time >= delete_before:
                continue
            r = rel_of(st.path)
            if r is not None and r not in valid:
                plan.files.append((st.path, st.size))
        plan.files_and_dirs_present = listed
        if progress is not None:
            progress("listing", listed, listed)
        return plan
    # lite: the tombstones older than the cutoff
    tomb = snapshot.tombstones_table(["path", "deletionTimestamp", "deletionVector", "size"])
    if tomb.num_rows:
        ts = pc.fill_null(tomb.column("deletionTimestamp"), 0)
        old = tomb.filter(pc.less(ts, delete_before))
        log_rel = _log_path_relative(root, rel_of)
        seen: set[str] = set()
        cands: list[tuple[str, int]] = []
        # a relative path under the root: string work only where "/" is the separator
        prefix = root.rstrip("/") + "/" if ("://" in root or os.sep == "/") else None
        for p, dv, size in zip(old.column("path").to_pylist(), old.column("deletionVector").to_pylist(),
                               old.column("size").to_pylist()):
            for r, sz in ((log_rel(p), size), (_dv_relative(root, rel_of, dv) if dv else None, None)):
                if r is None or r in valid or r in seen:
                    continue
                seen.add(r)
                cands.append((prefix + r if prefix is not None else store.join(root, *r.split("/")), sz))
        there = _existing(snapshot, [c[0] for c in cands], max_workers or 8)
        for (full_path, size), ok in zip(cands, there):
            if ok:
                plan.files.append((full_path, int(size) if size is not None else 0))
        plan.files_and_dirs_present = len(plan.files)
    return plan


_LIST_AT = 1000   # candidates in one directory from which listing it beats asking about each


def _existing(snapshot: Snapshot, paths: list[str], max_workers: int) -> list[bool]:
    """Whether each of `paths` (files of the table's directory) exists. A directory holding many
    of them — at least _LIST_AT, and at least a quarter of the table's active files there, so the
    listing stays within a few times their number — is listed once (one LIST per 1000 keys on an
    object store instead of a request per file); the others are asked about one by one, in
    parallel."""
    from collections import Counter
    from concurrent.futures import ThreadPoolExecutor

    store, root = snapshot.store, snapshot.table_root
    sep = "/" if "://" in root else os.sep
    by_dir: dict[str, list[int]] = {}
    for i, p in enumerate(paths):
        by_dir.setdefault(p.rpartition(sep)[0], []).append(i)
    out = [False] * len(paths)
    ask: list[int] = []
    active: Counter | None = None
    for d, idx in by_dir.items():
        if len(idx) >= _LIST_AT:
            if active is None:   # the table's active files per directory (relative, as the log has them)
                rel_dirs = pc.replace_substring_regex(snapshot.files_table(["path"]).column("path"),
                                                      pattern=r"/?[^/]*$", replacement="")
                active = Counter(dict(zip(*(c.to_pylist() for c in pc.value_counts(rel_dirs).flatten()))))
            rel = _relativizer(root)(d)
            if 4 * len(idx) >= active.get(rel if rel is not None else "", 0):
                try:
                    names = {st.path.rpartition(sep)[2] for st in store.list_dir(d)}
                except FileNotFoundError:
                    names = set()
                for i in idx:
                    name = paths[i].rpartition(sep)[2]
                    if name.startswith("."):   # never listed: asked about below
                        ask.append(i)
                    else:
                        out[i] = name in names
                continue
        ask.extend(idx)
    if ask:
        # one task per chunk of paths (a future per path costs more than a local stat)
        workers = max(1, max_workers)
        size = max(1, min(256, -(-len(ask) // workers)))
        chunks = [ask[i:i + size] for i in range(0, len(ask), size)]
        with ThreadPoolExecutor(max_workers=workers) as ex:
            for chunk, oks in zip(chunks, ex.map(lambda ch: [store.exists(paths[i]) for i in ch], chunks)):
                for i, ok in zip(chunk, oks):
                    out[i] = ok
    return out


def _inventory(inventory: Iterable[tuple[str, int, bool, int]], root: str, rel_of: Callable[[str], str | None],
               skip: Callable[[str], bool]) -> list:
    """The inventory's entries inside the table directory and under no hidden name, as the
    listing's FileStatus / DirStatus."""

    inside: list[tuple[str, str, int, bool, int]] = []
    for entry in inventory:
        try:
            path, length, is_dir, mtime = entry
        except (TypeError, ValueError):
            raise InvalidOptionError(f"an inventory entry must be (path, length, isDir, modificationTime), got "
                                     f"{entry!r}") from None
        if path is None:
            continue
        full = resolve_data_path(root, str(path)).rstrip("/")
        rel = rel_of(full)
        if not rel or any(skip(part) for part in rel.split("/")):
            continue
        inside.append((full, rel, int(length or 0), bool(is_dir), int(mtime or 0)))
    dirs = {rel for _, rel, _, d, _ in inside if d}
    parents = {rel.rsplit("/", 1)[0] for _, rel, _, _, _ in inside if "/" in rel}
    out: list = []
    for full, rel, length, is_dir, mtime in inside:
        if is_dir:
            out.append(DirStatus(full, mtime, rel not in parents))
        elif rel not in dirs:
            out.append(FileStatus(full, length, mtime))
    return out


# --- running it ----------------------------------------------------------------------------------

def _commit_marker(log: DeltaLog, snapshot: Snapshot, operation: str, params: dict, metrics: dict | None) -> int:
    """A commit of only commitInfo, planned on the snapshot VACUUM planned on: it changes nothing,
    so commits that landed since (VACUUM START among them) never conflict with it, and no
    second replay of the log is needed."""
    txn = Transaction(log, operation, params, snapshot=snapshot)
    return txn.commit(operation_metrics=metrics)


def vacuum(table: str | DeltaLog, retention_hours: float | None = None, dry_run: bool = True, *,
           enforce_retention_duration: bool = True, full: bool = True,
           keep_versions: Iterable[int] | None = None, storage_options: dict | None = None,
           max_workers: int | None = None, log_commits: bool = True, progress: Progress | None = None,
           now_ms: int | None = None, inventory: Iterable[tuple[str, int, bool, int]] | None = None) -> VacuumResult:
    """VACUUM the latest version of `table` (see the module docstring). Returns a VacuumResult;
    `dry_run=True` (the default, as delta-rs) only plans; `inventory` (full mode) replaces the
    listing of the table directory."""
    started = time.perf_counter()
    log = table if isinstance(table, DeltaLog) else DeltaLog.for_table(table, storage_options)
    if max_workers is not None and max_workers < 1:
        raise InvalidOptionError(f"max_workers must be >= 1, got {max_workers}")
    snapshot = log.snapshot()
    plan = plan_vacuum(snapshot, retention_hours, enforce_retention_duration=enforce_retention_duration,
                       full=full, keep_versions=keep_versions, now_ms=now_ms, progress=progress, log=log,
                       max_workers=max_workers, inventory=inventory)
    result = VacuumResult(plan, dry_run)
    if dry_run:
        result.seconds = time.perf_counter() - started
        return result
    if log_commits:
        params: dict[str, Any] = {"retentionCheckEnabled": plan.retention_check_enabled,
                                  "defaultRetentionMillis": plan.default_retention_ms}
        if plan.specified_retention_ms is not None:
            params["specifiedRetentionMillis"] = plan.specified_retention_ms
        result.start_version = _commit_marker(log, snapshot, "VACUUM START", params, {
            "numFilesToDelete": plan.num_files_to_delete, "sizeOfDataToDelete": plan.size_of_data_to_delete})
    try:
        paths = [p for p, _ in plan.files]
        total = len(paths) + len(plan.dirs)
        done = 0
        done += log.store.delete_many(paths, max_workers, None if progress is None else (
            lambda n: progress("deleting", n, total)))
        # deepest first: a directory emptied by deleting its empty children is left for next time
        for d in sorted(plan.dirs, key=lambda d: (-d.count("/") - d.count(os.sep), d)):
            try:
                log.store.delete(d)
                done += 1
            except OSError:
                pass   # no longer empty: something was written into it meanwhile
        if progress is not None:
            progress("deleting", total, total)
        result.num_deleted = done
    except BaseException:
        if log_commits:
            try:
                _commit_marker(log, snapshot, "VACUUM END", {"status": "FAILED"}, None)
            except Exception:  # noqa: BLE001 - the deletion error is the one to report
                pass
        raise
    if log_commits:
        result.end_version = _commit_marker(log, snapshot, "VACUUM END", {"status": "COMPLETED"}, {
            "numDeletedFiles": result.num_deleted, "numVacuumedDirectories": plan.dirs_present})
    result.seconds = time.perf_counter() - started
    return result
