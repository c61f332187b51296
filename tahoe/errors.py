"""The exceptions tahoe raises, one class per thing that can go wrong.

Every layer raises these (never bare ValueError/KeyError for a problem in a table or a request), so
callers can tell "this is not a Delta table" from "this log is corrupt" from "another writer won".
Names follow delta-spark where its users already know them (ConcurrentAppendException, ...).
"""

from __future__ import annotations


class DeltaError(Exception):
    """Base class of every tahoe error."""


# --- opening and reading a table -------------------------------------------------------------

class TableNotFoundError(DeltaError):
    """The path holds no Delta table (no `_delta_log`, or no commit in it)."""


class CorruptLogError(DeltaError):
    """The log is malformed: bad JSON, a truncated checkpoint, a version gap, missing
    protocol/metaData. The message names the file and the problem."""


class UnsupportedFeatureError(DeltaError):
    """The table needs a reader/writer version or table feature this client does not support."""


class VersionNotFoundError(DeltaError):
    """Time travel to a version or timestamp the log cannot reconstruct."""


class DeletionVectorError(CorruptLogError):
    """A deletion vector cannot be decoded (bad descriptor, checksum mismatch, bad magic)."""


class SchemaError(DeltaError):
    """A schema cannot be parsed, or a data/schema change is incompatible with the table."""


class InvalidTableOperationError(DeltaError):
    """An operation that the table's properties or state forbid (e.g. a delete on an
    append-only table, an invalid property value)."""


class ConstraintViolationError(DeltaError):
    """New rows violate a CHECK constraint, an invariant, a NOT NULL column or a generated
    column expression."""


# --- committing ------------------------------------------------------------------------------

class ConcurrentModificationException(DeltaError):
    """Another writer committed a change that conflicts with this transaction."""


class ConcurrentAppendException(ConcurrentModificationException):
    """Files were added to data this transaction read."""


class ConcurrentDeleteReadException(ConcurrentModificationException):
    """A file this transaction read was removed by another writer."""


class ConcurrentDeleteDeleteException(ConcurrentModificationException):
    """A file this transaction removes was removed by another writer too."""


class MetadataChangedException(ConcurrentModificationException):
    """Another writer changed the table's metadata."""


class ProtocolChangedException(ConcurrentModificationException):
    """Another writer changed the table's protocol."""


class ConcurrentTransactionException(ConcurrentModificationException):
    """Another writer committed the same application transaction id (txn appId)."""


class CommitFailedException(DeltaError):
    """The commit could not be written after the allowed number of retries."""


class IcebergCompatViolationError(InvalidTableOperationError):
    """A write would break the table's Iceberg compatibility (delta-spark's
    DELTA_ICEBERG_COMPAT_VIOLATION; `error_class` names the sub-condition, e.g.
    `DELTA_ICEBERG_COMPAT_VIOLATION.DELETION_VECTORS_SHOULD_BE_DISABLED`)."""

    def __init__(self, message: str, error_class: str = "DELTA_ICEBERG_COMPAT_VIOLATION"):
        super().__init__(f"[{error_class}] {message}")
        self.error_class = error_class


class UniversalFormatViolationError(InvalidTableOperationError):
    """UniForm is enabled without what it depends on (delta-spark's
    DELTA_UNIVERSAL_FORMAT_VIOLATION)."""

    def __init__(self, message: str, error_class: str = "DELTA_UNIVERSAL_FORMAT_VIOLATION"):
        super().__init__(f"[{error_class}] {message}")
        self.error_class = error_class
