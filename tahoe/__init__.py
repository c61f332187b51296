"""tahoe: Delta Lake and Delta Sharing in Python.

- `tahoe.Table` — the Spark-free facade: open a table (latest, a version, a timestamp), inspect it,
  read its rows as Arrow/pandas, change it (`delete`, `update`, `merge`, `optimize`, `vacuum`,
  `restore`, DDL), each change one commit.
- `tahoe.DeltaTable`, `tahoe.write_deltalake` — deltalake's (delta-rs's) Python API on the same
  table, Spark-free: a deltalake script runs with `deltalake` replaced by `tahoe`. delta-spark's
  `DeltaTable` (on Spark) is `tahoe.spark.DeltaTable`.
- `tahoe.DeltaLog` — the log core underneath (snapshots, history, time travel).
- `tahoe.write_table` — write Arrow data to a table (append, overwrite, replaceWhere, create).
- `tahoe.convert_to_delta(path, partition_by=...)` — CONVERT TO DELTA (a parquet directory in place);
  VACUUM, RESTORE, CLONE, DROP FEATURE are `Table` methods (`tahoe.maintenance`).
- `tahoe.write_table(...)`, `tahoe.delete(uri, ...)`, `tahoe.update(uri, ...)`, `tahoe.merge(uri, ...)`
  — the Spark-free writer and DML as module functions (the same as `Table(uri).delete(...)` ...).
- `tahoe.errors` — every exception tahoe raises.

Attributes are imported on first use, so `import tahoe` (and every spawned worker that imports a
submodule) stays cheap.
"""

from importlib import import_module
from typing import Any

from .version import __version__

_LAZY = {
    "DeltaLog": ("tahoe.log", "DeltaLog"),
    "Snapshot": ("tahoe.log", "Snapshot"),
    "Table": ("tahoe.table", "Table"),
    "errors": ("tahoe.errors", None),
    "DeltaTable": ("tahoe.delta_rs", "DeltaTable"),     # deltalake's, Spark-free (delta-spark's: tahoe.spark)
    "write_deltalake": ("tahoe.delta_rs", "write_deltalake"),
    "TableMerger": ("tahoe.delta_rs", "TableMerger"),
    "Field": ("tahoe.delta_rs", "Field"),
    "TableFeatures": ("tahoe.delta_rs", "TableFeatures"),
    "write_table": ("tahoe.write", "write_table"),
    "delete": ("tahoe.write.dml", "delete"),
    "convert_to_delta": ("tahoe.maintenance.convert", "convert_to_delta"),
    "update": ("tahoe.write.dml", "update"),
    "merge": ("tahoe.write.dml", "merge"),
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        mod, attr = _LAZY[name]
        m = import_module(mod)
        value = m if attr is None else getattr(m, attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tahoe' has no attribute {name!r}")
