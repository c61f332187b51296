"""Other readers' metadata generated for a Delta table's files after its commits:
  1. UniForm's Iceberg metadata (`iceberg`; the rules a UniForm table's commits keep live in
     `tahoe.protocol.iceberg_compat`);
  2. Hive symlink-format manifests for Presto, Athena and Trino's Hive connector
     (`symlink_manifest`, delta-spark's GenerateSymlinkManifest).
Both run as post-commit hooks of `tahoe.txn.Transaction`."""

from .iceberg import (
    DELTA_VERSION_PROPERTY, IcebergConversionError, convert_after_commit, latest_metadata_path, sync_iceberg,
)

__all__ = ["convert_after_commit", "sync_iceberg", "latest_metadata_path", "IcebergConversionError",
           "DELTA_VERSION_PROPERTY"]
