"""UniForm: other table formats' metadata generated for a Delta table's files (today: Iceberg,
`tahoe.uniform.iceberg`). The rules a UniForm table's commits keep live in
`tahoe.protocol.iceberg_compat`; the post-commit step runs from `tahoe.txn.Transaction`."""

from .iceberg import (
    DELTA_VERSION_PROPERTY, IcebergConversionError, convert_after_commit, latest_metadata_path, sync_iceberg,
)

__all__ = ["convert_after_commit", "sync_iceberg", "latest_metadata_path", "IcebergConversionError",
           "DELTA_VERSION_PROPERTY"]
