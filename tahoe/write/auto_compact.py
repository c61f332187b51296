"""Auto compaction (delta-spark's AutoCompact post-commit hook): after a write commits, the partitions it added
files to are compacted when they hold enough small files.

  1. On when `spark.databricks.delta.autoCompact.enabled` is "true" (when set it wins), else when the table
     property `delta.autoOptimize.autoCompact` is true (or "auto" / "legacy"); off by default.
  2. Only commits that added files, only the partitions they added to.
  3. A partition qualifies with at least `min_num_files` (50) files under `min_file_size` (half of
     `max_file_size`, 128 MiB); confs `...autoCompact.{minNumFiles, minFileSize, maxFileSize}`.
  4. They are compacted by OPTIMIZE's bin-packing in a commit of their own (`auto` true).
  5. A failure never fails the write: it is logged and kept in `post_commit_errors`."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable

from ..log.delta_log import DeltaLog
from ..log.snapshot import Snapshot
from ..protocol.actions import AddFile
from ..protocol.properties import enum_property
from ..txn.transaction import Transaction
from .optimize import ArrowBinExecutor, BinExecutor, OptimizeSettings, plan_optimize, run_optimize
from ..errors import InvalidOptionError
from ..protocol import column_mapping

__all__ = ["AutoCompactSettings", "auto_compact_enabled", "partitions_to_compact", "auto_compact",
           "auto_compact_hook", "SESSION_CONF"]

_log = logging.getLogger(__name__)

MiB = 1024 * 1024
SESSION_CONF = "spark.databricks.delta.autoCompact.enabled"


@dataclasses.dataclass(frozen=True)
class AutoCompactSettings:
    """delta-spark's spark.databricks.delta.autoCompact.{minNumFiles, maxFileSize, minFileSize}."""
    min_num_files: int = 50
    max_file_size: int = 128 * MiB
    min_file_size: int | None = None       # None: max_file_size / 2

    @property
    def small_file_size(self) -> int:
        return self.min_file_size if self.min_file_size is not None else self.max_file_size // 2


def _parse_flag(value: Any, what: str) -> bool | None:
    if value is None:
        return None
    low = str(value).strip().lower()
    if low in ("true", "auto", "legacy"):
        return True
    if low == "false":
        return False

    raise InvalidOptionError(f"{what} must be one of (true,false), got {value!r}")


def auto_compact_enabled(configuration: dict | None, session_value: Any = None) -> bool:
    """Rule 1 of the module docstring."""
    conf = _parse_flag(session_value, SESSION_CONF)
    if conf is not None:
        return conf
    return bool(_parse_flag(enum_property(configuration, "delta.autoOptimize.autoCompact"),
                            "delta.autoOptimize.autoCompact"))


def _key(pv: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in (pv or {}).items()))


def partitions_to_compact(snapshot: Snapshot, touched: list[dict], settings: AutoCompactSettings) -> list[dict]:
    """Rule 3: the touched partitions (partition values as in add actions) holding at least
    `min_num_files` files smaller than the small-file size."""
    wanted = {_key(p): p for p in touched}
    if not wanted:
        return []
    files = snapshot.files_table(["partitionValues", "size"])
    counts: dict[tuple, int] = {}
    small = settings.small_file_size
    for pv, size in zip(files.column("partitionValues").to_pylist(), files.column("size").to_pylist()):
        if size < small:
            k = _key(dict(pv) if pv else {})
            if k in wanted:
                counts[k] = counts.get(k, 0) + 1
    return [wanted[k] for k, n in counts.items() if n >= settings.min_num_files]


def auto_compact(log: DeltaLog, touched: list[dict], executor: BinExecutor,
                 settings: AutoCompactSettings | None = None) -> dict | None:
    """Compact the qualifying partitions among `touched` on the table's latest version (rules
    3-4); the OPTIMIZE metrics, or None when no partition qualifies."""
    settings = settings or AutoCompactSettings()
    snap = log.snapshot()
    parts = partitions_to_compact(snap, touched, settings)
    if not parts:
        return None
    plan = plan_optimize(snap, partitions=parts, auto=True, settings=OptimizeSettings(
        min_file_size=settings.small_file_size, max_file_size=settings.max_file_size))
    if snap.partition_columns:
        plan.parameters["predicate"] = [_partition_sql(p, snap) for p in parts]
    return run_optimize(log, plan, executor)


def _partition_sql(pv: dict, snap: Snapshot) -> str:
    """The predicate delta-spark records for an auto-compacted partition (`col <=> value`)."""
    mode = snap.column_mapping_mode
    phys = {column_mapping.physical_name(f) if mode != "none" else f.name: f.name
            for f in snap.schema.fields if f.name in snap.partition_columns}
    parts = []
    for k, v in sorted(pv.items()):
        name = phys.get(k, k)
        value = "NULL" if v is None else "'" + str(v).replace("'", "\\'") + "'"
        parts.append(f"(`{name}` <=> {value})")
    return " AND ".join(parts)


def auto_compact_hook(executor_factory: Callable[[], BinExecutor] | None = None, session_value: Any = None,
                      settings: AutoCompactSettings | None = None) -> Callable[[Transaction, int], Any]:
    """A post-commit hook (`Transaction.add_post_commit_hook`) that runs auto compaction after
    a write (rules 1-5). `executor_factory` makes the bin executor (the Arrow one when None);
    `session_value`: the session's `spark.databricks.delta.autoCompact.enabled`."""
    def auto_compact_after_write(txn: Transaction, version: int) -> Any:
        md = txn.metadata
        if not auto_compact_enabled(md.configuration if md is not None else {}, session_value):
            return None
        touched = {}
        for a in txn.committed_actions or []:
            if isinstance(a, AddFile) and a.data_change:
                touched[_key(a.partition_values)] = dict(a.partition_values)
        if not touched:
            return None
        executor = executor_factory() if executor_factory is not None else ArrowBinExecutor()
        return auto_compact(txn.log, list(touched.values()), executor, settings)

    return auto_compact_after_write
