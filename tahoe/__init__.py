"""tahoe: Delta Lake and Delta Sharing in Python. Attributes are imported on first use, so `import tahoe` stays cheap.

  1. `tahoe.Table`: the Spark-free facade (open, inspect, read as Arrow/pandas, change: one commit each).
  2. `tahoe.DeltaTable`, `tahoe.write_deltalake`: deltalake's API (and `tahoe.exceptions`), Spark-free;
     delta-spark's `DeltaTable` is `tahoe.spark.DeltaTable`.
  3. `tahoe.DeltaLog`: the log core (snapshots, history, time travel).
  4. `tahoe.write_table`, `tahoe.convert_to_delta`, and `delete` / `update` / `merge` as module functions
     (the same as `Table(uri).delete(...)`).
  5. `tahoe.errors`: every exception tahoe raises."""

from importlib import import_module
from typing import Any

from .version import __version__

_LAZY = {
    "DeltaLog": ("tahoe.log", "DeltaLog"),
    "Snapshot": ("tahoe.log", "Snapshot"),
    "Table": ("tahoe.table", "Table"),
    "errors": ("tahoe.errors", None),
    "delta_rs": ("tahoe.delta_rs", None),   # deltalake's API: tahoe.delta_rs.AddAction, RemoveAction, ...
    "DeltaTable": ("tahoe.delta_rs", "DeltaTable"),     # deltalake's, Spark-free (delta-spark's: tahoe.spark)
    "write_deltalake": ("tahoe.delta_rs", "write_deltalake"),
    "TableMerger": ("tahoe.delta_rs", "TableMerger"),
    "Field": ("tahoe.delta_rs", "Field"),
    "TableFeatures": ("tahoe.delta_rs", "TableFeatures"),
    "Schema": ("tahoe.delta_rs", "Schema"),
    "DataType": ("tahoe.protocol.schema", "DataType"),
    "Metadata": ("tahoe.protocol.actions", "Metadata"),
    "CommitProperties": ("tahoe.delta_rs", "CommitProperties"),
    "PostCommitHookProperties": ("tahoe.delta_rs", "PostCommitHookProperties"),
    "WriterProperties": ("tahoe.delta_rs", "WriterProperties"),
    "ColumnProperties": ("tahoe.delta_rs", "ColumnProperties"),
    "BloomFilterProperties": ("tahoe.delta_rs", "BloomFilterProperties"),
    "Transaction": ("tahoe.delta_rs", "Transaction"),
    "QueryBuilder": ("tahoe.delta_rs", "QueryBuilder"),
    "VariantType": ("tahoe.delta_rs", "VariantType"),
    "init_tracing": ("tahoe.delta_rs", "init_tracing"),
    "enable_nanosecond_timestamps": ("tahoe.delta_rs", "enable_nanosecond_timestamps"),
    "convert_to_deltalake": ("tahoe.delta_rs", "convert_to_deltalake"),
    "exceptions": ("tahoe.exceptions", None),
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
