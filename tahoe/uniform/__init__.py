"""Other readers' metadata generated for a Delta table's files after its commits:
  1. UniForm's Iceberg metadata (`iceberg`; the rules a UniForm table's commits keep live in
     `tahoe.protocol.iceberg_compat`);
  2. Hive symlink-format manifests for Presto, Athena and Trino's Hive connector
     (`symlink_manifest`, delta-spark's GenerateSymlinkManifest).
Both run as post-commit hooks of `tahoe.txn.Transaction`. The Iceberg names are imported on first
use: Avro (fastavro) loads only for a UniForm table (tests/test_startup.py)."""

from importlib import import_module
from typing import Any

__all__ = ["convert_after_commit", "sync_iceberg", "latest_metadata_path", "IcebergConversionError",
           "DELTA_VERSION_PROPERTY"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        value = getattr(import_module("tahoe.uniform.iceberg"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tahoe.uniform' has no attribute {name!r}")
