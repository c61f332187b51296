"""A log segment: the exact set of `_delta_log` files that reconstruct one version of a table.

Invariants, checked at construction (`LogSegment.for_version`):
  1. `checkpoint` is the newest complete checkpoint at or below the version (incomplete multi-part skipped);
  2. `commits` are exactly the commit files after it up to the version, contiguous (a gap: CorruptLogError);
  3. without a checkpoint, `commits` start at version 0;
  4. the segment's version is the requested one, or the newest the log holds;
  5. `version_commit` is the version's own commit file when the log still holds it (its timestamp is the
     version's);
  6. `deltas` are `commits` with log compaction files (spec "Log Compaction Files") in place of the commits
     they cover (`with_compactions`); only where every covered commit is listed, never an empty one, and
     one that does not parse is dropped at replay (`without_compaction`)."""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from dataclasses import dataclass, field

from ..errors import CorruptLogError, TableNotFoundError, VersionNotFoundError
from ..protocol.filenames import LOG_DIR, LogFileKind, LogFileName, parse_log_file_name
from ..storage.base import FileStatus, LogStore
from .last_checkpoint import read_last_checkpoint

__all__ = ["LogSegment", "LogFile", "Checkpoint", "list_log", "complete_checkpoints", "with_compactions"]

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LogFile:
    status: FileStatus
    name: LogFileName

    @property
    def path(self) -> str:
        return self.status.path

    @property
    def version(self) -> int:
        return self.name.version


@dataclass(frozen=True)
class Checkpoint:
    version: int
    kind: LogFileKind
    files: tuple[LogFile, ...]   # all parts, in part order


@dataclass(frozen=True)
class LogSegment:
    log_dir: str
    version: int
    checkpoint: Checkpoint | None
    commits: tuple[LogFile, ...] = field(default_factory=tuple)
    version_commit: LogFile | None = None
    deltas: tuple[LogFile, ...] = ()   # commits, with compaction files in place of the ranges they cover
    compactions: tuple[LogFile, ...] = ()   # the usable compaction files listed with the commits

    def __post_init__(self) -> None:
        if not self.deltas and self.commits:
            object.__setattr__(self, "deltas", tuple(self.commits))

    def without_compaction(self, bad: LogFile) -> "LogSegment":
        """This segment with the compaction file `bad` (one that cannot be read) left out: its
        commits, or another compaction, replayed instead."""
        rest = tuple(f for f in self.compactions if f.path != bad.path)
        return dataclasses.replace(self, compactions=rest, deltas=with_compactions(self.commits, list(rest)))

    @property
    def checkpoint_version(self) -> int | None:
        return self.checkpoint.version if self.checkpoint else None

    @property
    def last_commit(self) -> LogFile | None:
        return self.commits[-1] if self.commits else None

    @classmethod
    def for_version(cls, store: LogStore, table_root: str, version: int | None = None) -> "LogSegment":
        """The segment of `version` (None: the latest)."""
        log_dir = store.join(table_root, LOG_DIR)
        hint = read_last_checkpoint(store, log_dir)
        start = 0
        if hint is not None and (version is None or hint.version <= version):
            start = hint.version
        files = list_log(store, log_dir, start)
        seg = _build(log_dir, files, version, allow_retry=start > 0)
        if seg is None:  # the hint pointed at a checkpoint we cannot use: list everything
            seg = _build(log_dir, list_log(store, log_dir, 0), version, allow_retry=False)
        assert seg is not None
        return seg


def list_log(store: LogStore, log_dir: str, start_version: int = 0) -> list[LogFile]:
    """Delta files in `log_dir` from `start_version` on, parsed, in name order."""
    try:
        listing = store.list_from(store.join(log_dir, f"{start_version:020d}"))
        out = []
        for st in listing:
            name = parse_log_file_name(st.path.rsplit("/", 1)[-1])
            if name is not None:
                out.append(LogFile(st, name))
        return out
    except FileNotFoundError:
        root = log_dir.rsplit('/', 1)[0]
        raise TableNotFoundError(f"`{root}` is not a Delta table: there is no {LOG_DIR} directory at {root}",
                                 error_class="DELTA_MISSING_DELTA_TABLE") from None
    except NotADirectoryError:  # the table path (or a parent of it) is a file
        root = log_dir.rsplit('/', 1)[0]
        raise TableNotFoundError(f"`{root}` is not a Delta table: {root} is a file, not a table "
                                 f"directory (a table is a directory holding {LOG_DIR}/)",
                                 error_class="DELTA_MISSING_DELTA_TABLE") from None


def complete_checkpoints(files: list[LogFile]) -> dict[int, Checkpoint]:
    """The usable checkpoint of each version among `files` (a listing of `_delta_log`): a v2
    checkpoint, else a classic single file, else a multi-part set with every part present
    (the set with the fewest parts when several are complete). Versions whose checkpoint files
    are all incomplete sets are left out."""
    by_version: dict[int, list[LogFile]] = defaultdict(list)
    for f in files:
        if f.name.is_checkpoint:
            by_version[f.version].append(f)
    out: dict[int, Checkpoint] = {}
    for v, cps in by_version.items():
        # Preference among complete candidates of one version: v2 (UUID) > classic > multi-part.
        v2 = [c for c in cps if c.name.kind == LogFileKind.V2_CHECKPOINT]
        classic = [c for c in cps if c.name.kind == LogFileKind.CHECKPOINT]
        if v2:
            out[v] = Checkpoint(v, LogFileKind.V2_CHECKPOINT, (sorted(v2, key=lambda c: c.name.name)[0],))
            continue
        if classic:
            out[v] = Checkpoint(v, LogFileKind.CHECKPOINT, (classic[0],))
            continue
        groups: dict[int, dict[int, LogFile]] = defaultdict(dict)
        for c in cps:
            if c.name.kind == LogFileKind.MULTIPART_CHECKPOINT:
                groups[c.name.num_parts or 0][c.name.part or 0] = c
        for n, parts in sorted(groups.items()):
            if n > 0 and set(parts) == set(range(1, n + 1)):
                out[v] = Checkpoint(v, LogFileKind.MULTIPART_CHECKPOINT, tuple(parts[i] for i in range(1, n + 1)))
                break
    return out


def _not_found(version: int, earliest: int | None, latest: int) -> str:
    """delta-spark's DELTA_VERSION_NOT_FOUND message (VersionNotFoundException)."""
    return f"Cannot time travel Delta table to version {version}. Available versions: [{earliest}, {latest}]."


def _earliest(commits: dict, checkpoints: dict) -> int | None:
    """The earliest version the log can reconstruct: 0 with its commit, else the oldest
    checkpoint whose later commits are all there (delta-spark's earliest recreatable commit)."""
    if 0 in commits:
        return 0
    for v in sorted(checkpoints):
        return v
    return min(commits) if commits else None


def _build(log_dir: str, files: list[LogFile], version: int | None, allow_retry: bool) -> LogSegment | None:
    commits = {f.version: f for f in files if f.name.kind == LogFileKind.COMMIT}
    checkpoints = complete_checkpoints(files)
    if not commits and not checkpoints:
        if allow_retry:
            return None
        raise TableNotFoundError(f"`{log_dir.rsplit('/', 1)[0]}` is not a Delta table: no commit files in {log_dir}",
                                 error_class="DELTA_MISSING_DELTA_TABLE")
    newest = max(list(commits) + list(checkpoints))
    if version is None:
        version = newest
    elif version > newest:
        if allow_retry:
            return None
        raise VersionNotFoundError(_not_found(version, _earliest(commits, checkpoints), newest),
                                   error_class="DELTA_VERSION_NOT_FOUND")
    elif version < 0:
        raise VersionNotFoundError(_not_found(version, _earliest(commits, checkpoints), newest),
                                   error_class="DELTA_VERSION_NOT_FOUND")
    usable = [v for v in checkpoints if v <= version]
    cp = checkpoints[max(usable)] if usable else None
    first = cp.version + 1 if cp else 0
    if cp is None and 0 not in commits:
        if allow_retry:
            return None
        earliest = min(commits) if commits else None
        raise VersionNotFoundError(
            _not_found(version, _earliest(commits, checkpoints), newest) + f" (cannot reconstruct version {version}: "
            f"no checkpoint at or before it and the log starts at version {earliest}; earlier commits were cleaned up)",
            error_class="DELTA_VERSION_NOT_FOUND")
    missing = [v for v in range(first, version + 1) if v not in commits]
    if missing:
        if allow_retry:
            return None
        raise CorruptLogError(
            f"commit versions have a gap in {log_dir}: version {missing[0]} is missing "
            f"(needed to reconstruct version {version})")
    seg_commits = tuple(commits[v] for v in range(first, version + 1))
    compactions = []
    for f in files:
        if f.name.kind != LogFileKind.COMPACTION:
            continue
        if f.status.size == 0:   # a crashed writer's: the commits it would stand for are read instead
            _logger.warning("ignoring the empty log compaction file %s", f.path)
            continue
        if first <= f.version and (f.name.end_version or 0) <= version:
            compactions.append(f)
    return LogSegment(log_dir, version, cp, seg_commits, commits.get(version),
                      with_compactions(seg_commits, compactions), tuple(compactions))


def with_compactions(commits: tuple[LogFile, ...], compactions: list[LogFile]) -> tuple[LogFile, ...]:
    """`commits` (contiguous, ascending) with compaction files in place of the commits they cover:
    among the compactions lying wholly within the commits' range, the choice that replays the
    fewest files (ties: the earliest-starting, widest compaction). Overlapping compactions are
    never combined, so every version is replayed exactly once."""
    if len(commits) < 2 or not compactions:
        return tuple(commits)
    first, last = commits[0].version, commits[-1].version
    starting: dict[int, list[LogFile]] = defaultdict(list)
    for f in compactions:
        end = f.name.end_version
        if end is not None and first <= f.version < end <= last:
            starting[f.version].append(f)
    if not starting:
        return tuple(commits)
    n = len(commits)
    # cost[i]: fewest files replaying commits[i:]; pick[i]: the file chosen at i
    cost = [0] * (n + 1)
    pick: list[LogFile | None] = [None] * n
    for i in range(n - 1, -1, -1):
        cost[i] = cost[i + 1] + 1
        pick[i] = commits[i]
        for f in sorted(starting.get(commits[i].version, ()), key=lambda f: -(f.name.end_version or 0)):
            j = i + (f.name.end_version or 0) - f.version + 1
            if cost[j] + 1 < cost[i]:
                cost[i], pick[i] = cost[j] + 1, f
    out: list[LogFile] = []
    i = 0
    while i < n:
        f = pick[i]
        assert f is not None
        out.append(f)
        i += 1 if f.name.kind == LogFileKind.COMMIT else (f.name.end_version or 0) - f.version + 1
    return tuple(out)
