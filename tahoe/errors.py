"""The exceptions tahoe raises, one class per thing that can go wrong.

Every layer raises these (never bare ValueError/KeyError for a problem in a table or a request), so
callers can tell "this is not a Delta table" from "this log is corrupt" from "another writer won".
Names follow delta-spark where its users already know them (ConcurrentAppendException, ...).
"""

from __future__ import annotations


class DeltaError(Exception):
    """Base class of every tahoe error.

    `error_class` is delta-spark's error class (its "condition") for the same failure, None where
    delta-spark has none: given as `error_class=` (or a class attribute), the message starts with
    `[CLASS] `, as delta-spark's do; `getCondition()` / `getErrorClass()` return it, as PySpark's
    exceptions do."""

    error_class: str | None = None

    def __init__(self, *args, error_class: str | None = None):
        if error_class is not None:
            self.error_class = error_class
        cls_name = error_class if error_class is not None else type(self).__dict__.get("error_class") \
            if _prefixes_class(type(self)) else None
        if cls_name and args and isinstance(args[0], str) and not args[0].startswith(f"[{cls_name}]"):
            args = (f"[{cls_name}] {args[0]}",) + args[1:]
        super().__init__(*args)

    def getCondition(self) -> str | None:   # noqa: N802 - PySpark's name
        return self.error_class

    def getErrorClass(self) -> str | None:   # noqa: N802 - PySpark's (deprecated) name
        return self.error_class


def _prefixes_class(cls: type) -> bool:
    """Classes whose class-level `error_class` is put in front of their messages (the
    commit-conflict exceptions keep delta-spark's Java-style messages, unprefixed)."""
    return getattr(cls, "_prefix_class", False)


# --- deltalake's (delta-rs's) exception classes: bases of tahoe's, so that a deltalake script's
# `except` clauses catch what tahoe raises for the same failure (`tahoe.exceptions`) -------------

class DeltaProtocolError(DeltaError):
    """deltalake's DeltaProtocolError: the table needs a protocol feature this reader or writer
    cannot serve (tahoe's UnsupportedFeatureError), or an operation breaks one."""


class SchemaMismatchError(DeltaError):
    """deltalake's SchemaMismatchError: data or a schema change that does not fit the table's
    schema (tahoe's SchemaError)."""


class CommitFailedError(DeltaError):
    """deltalake's CommitFailedError: the commit was refused: another writer won
    (ConcurrentModificationException), the retries ran out (CommitFailedException), or the table
    forbids it (an append-only table: AppendOnlyViolationError)."""


# --- opening and reading a table -------------------------------------------------------------

class TableNotFoundError(DeltaError):
    """The path holds no Delta table (no `_delta_log`, or no commit in it)."""


class CorruptLogError(DeltaError):
    """The log is malformed: bad JSON, a truncated checkpoint, a version gap, missing
    protocol/metaData. The message names the file and the problem."""


class VersionChecksumMismatchError(CorruptLogError):
    """A version's checksum file (`<v>.crc`) disagrees with the state the log replays to (spec
    "State Validation"; delta-spark's DELTA_TXN_LOG_FAILED_INTEGRITY): the message names the
    version and every field that differs."""


class UnsupportedFeatureError(DeltaProtocolError):
    """The table needs a reader/writer version or table feature this client does not support, or
    the caller asks for a Delta feature tahoe does not implement (yet): a delta-spark reader/writer
    option such as `readChangeFeed`, tables by name (a catalog). The message names it and, where
    there is one, what to do instead."""


class InvalidOptionError(DeltaError, ValueError):
    """An option that does not exist, or a value it does not take: a `format("delta")` reader or
    writer option, a keyword argument, a command-line flag. The message names the option and what
    it accepts."""


class VersionNotFoundError(DeltaError):
    """Time travel to a version or timestamp the log cannot reconstruct."""


class DataFilesMissingError(CorruptLogError):
    """Data files a version references are gone from storage (vacuumed, or deleted by hand): that
    version cannot be read, restored or copied. The message names the version or the file."""


class TableAlreadyExistsError(DeltaError):
    """The operation creates a table where one exists (CONVERT TO DELTA of a directory that is
    already a Delta table, CLONE onto an existing table without `replace`)."""


class DeletionVectorError(CorruptLogError):
    """A deletion vector cannot be decoded (bad descriptor, checksum mismatch, bad magic)."""


class SchemaError(SchemaMismatchError):
    """A schema cannot be parsed, a data/schema change is incompatible with the table, or an
    expression names a column the table does not have."""


APPEND_ONLY_MESSAGE = ("This table is configured to only allow appends. If you would like to permit updates or "
                      "deletes, use 'ALTER TABLE <table_name> SET TBLPROPERTIES (delta.appendOnly=false)'.")
"""delta-spark's DELTA_CANNOT_MODIFY_APPEND_ONLY message."""


class InvalidTableOperationError(DeltaError):
    """An operation that the table's properties or state forbid (e.g. a delete on an
    append-only table, an invalid property value)."""


class AppendOnlyViolationError(InvalidTableOperationError, CommitFailedError):
    """A change that removes or rewrites data of a `delta.appendOnly` table (delta-spark's
    DELTA_CANNOT_MODIFY_APPEND_ONLY; deltalake raises CommitFailedError)."""


class DeltaUnsupportedOperationException(InvalidTableOperationError):
    """An operation delta-spark refuses with its DeltaUnsupportedOperationException, e.g. a MERGE
    in which several source rows match one target row
    (`DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE`); `error_class` names the
    condition and the message starts with it."""

    def __init__(self, message: str, error_class: str | None = None):
        super().__init__(message, error_class=error_class)


class AnalysisException(DeltaError):
    """An expression (a condition, a filter, a constraint, a SET value) that cannot be analysed:
    a column that cannot be resolved, an ambiguous reference, operands of incompatible types.
    Named as delta-spark's users know it (`pyspark.errors.AnalysisException`); the message
    carries Spark's error class, e.g. `[UNRESOLVED_COLUMN.WITH_SUGGESTION]`."""


class ParseException(AnalysisException):
    """SQL text that does not parse (`pyspark.errors.ParseException`); the message names the
    text and the problem."""


class ArithmeticException(DeltaError):
    """Evaluating an expression overflowed or divided by zero (Spark's ANSI mode raises the same:
    `[ARITHMETIC_OVERFLOW]`, `[DIVIDE_BY_ZERO]`)."""


class NumberFormatException(DeltaError):
    """A CAST of a value that does not parse as the target type (`[CAST_INVALID_INPUT]`, as
    Spark's ANSI mode raises it; `try_cast` gives NULL instead)."""


class RetentionTooShortError(InvalidOptionError):
    """VACUUM was asked to keep removed files for less than the table's
    `delta.deletedFileRetentionDuration` while the retention check is on (delta-spark:
    "Are you sure you would like to vacuum files with such a low retention period?"); turn it off
    with `spark.databricks.delta.retentionDurationCheck.enabled=false` on Spark, or
    `enforce_retention_duration=False` without Spark."""


class DropFeatureError(InvalidTableOperationError):
    """A table feature cannot be dropped (delta-spark's DELTA_FEATURE_DROP_* conditions:
    `error_class` names which, e.g. `DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE`)."""

    def __init__(self, message: str, error_class: str | None = None):
        super().__init__(message, error_class=error_class)

    def __reduce__(self):
        msg = str(self.args[0]) if self.args else ""
        prefix = f"[{self.error_class}] "
        return (type(self), (msg[len(prefix):] if msg.startswith(prefix) else msg, self.error_class))


class ConstraintViolationError(DeltaError):
    """New rows violate a CHECK constraint, an invariant, a NOT NULL column or a generated
    column expression."""


class ReplaceWhereMismatchError(ConstraintViolationError):
    """Rows written with replaceWhere do not satisfy its predicate: delta-spark's
    DELTA_REPLACE_WHERE_MISMATCH (its message word for word, then what tahoe found)."""

    error_class = "DELTA_REPLACE_WHERE_MISMATCH"

    def __init__(self, predicate: str, detail: str):
        super().__init__(f"[DELTA_REPLACE_WHERE_MISMATCH] Written data does not conform to partial table overwrite "
                         f"condition or constraint '{predicate}'.\n{detail}")
        self.predicate = predicate
        self.detail = detail

    def __reduce__(self):
        return (type(self), (self.predicate, self.detail))


class ChangeDataFeedError(DeltaError):
    """A change data feed read that cannot be served, named as delta-spark names it
    (`error_class`, also the message's `[...]` prefix): the feed was not recorded over the range
    (`DELTA_MISSING_CHANGE_DATA`), the range's schema changed in a way its rows cannot be read
    under one schema (`DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE` /
    `..._INCOMPATIBLE_DATA_SCHEMA`)."""

    def __init__(self, message: str, error_class: str = "DELTA_MISSING_CHANGE_DATA"):
        super().__init__(message, error_class=error_class)


class ChangeDataRangeError(DeltaError, ValueError):
    """The versions or timestamps given for a change data feed read do not make a range: no start
    (`DELTA_NO_START_FOR_CDC_READ`), a version and a timestamp for one end
    (`DELTA_MULTIPLE_CDC_BOUNDARY`), an end before the start (`DELTA_INVALID_CDC_RANGE`), a start
    after the latest version (delta-spark's IllegalArgumentException, `error_class` None)."""

    def __init__(self, message: str, error_class: str | None = None):
        super().__init__(message, error_class=error_class)


class StreamingSourceError(DeltaError):
    """A Delta streaming source cannot go on without losing or repeating data: the table lost or
    changed rows (`DELTA_SOURCE_IGNORE_DELETE`, `DELTA_SOURCE_TABLE_IGNORE_CHANGES`), its schema
    changed in a way the stream cannot follow (`DELTA_SCHEMA_CHANGED_WITH_VERSION`,
    `DELTA_SCHEMA_CHANGED_WITH_STARTING_OPTIONS`, and for a column renamed or dropped under column
    mapping `DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG`), the checkpoint belongs to another table
    (`DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE`), or the log versions it needs are gone
    (`DELTA_MISSING_FILES_UNEXPECTED_VERSION`). Named as delta-spark names them (`error_class`, the
    message's `[...]` prefix)."""

    def __init__(self, message: str, error_class: str | None = None):
        super().__init__(message, error_class=error_class)


# --- committing ------------------------------------------------------------------------------

class ConcurrentModificationException(CommitFailedError):
    """Another writer committed a change that conflicts with this transaction."""


class ConcurrentAppendException(ConcurrentModificationException):
    """Files were added to data this transaction read."""

    error_class = "DELTA_CONCURRENT_APPEND"   # delta-spark's


class ConcurrentDeleteReadException(ConcurrentModificationException):
    """A file this transaction read was removed by another writer."""

    error_class = "DELTA_CONCURRENT_DELETE_READ"   # delta-spark's


class ConcurrentDeleteDeleteException(ConcurrentModificationException):
    """A file this transaction removes was removed by another writer too."""

    error_class = "DELTA_CONCURRENT_DELETE_DELETE"   # delta-spark's


class MetadataChangedException(ConcurrentModificationException):
    """Another writer changed the table's metadata."""

    error_class = "DELTA_METADATA_CHANGED"   # delta-spark's


class ProtocolChangedException(ConcurrentModificationException):
    """Another writer changed the table's protocol."""

    error_class = "DELTA_PROTOCOL_CHANGED"   # delta-spark's


class ConcurrentTransactionException(ConcurrentModificationException):
    """Another writer committed the same application transaction id (txn appId)."""

    error_class = "DELTA_CONCURRENT_TRANSACTION"   # delta-spark's


class CommitFailedException(CommitFailedError):
    """The commit could not be written after the allowed number of retries."""


class CommitOutcomeUnknownError(DeltaError):
    """A commit was sent to the log store but whether it landed could not be found out (the store
    failed after the write was sent, and reading the version back failed too). The version may or
    may not exist: nothing the commit references has been deleted. Read the table to see; VACUUM
    collects the files of a commit that did not land."""


# --- storage ---------------------------------------------------------------------------------

class StorageError(DeltaError):
    """A file system or object store failed a request, or cannot be reached or configured. The
    message names the store (scheme, bucket/container, endpoint) and the cause; `store` holds that
    name and `path` the location asked for (None where the whole store is concerned). Never a
    statement about the table's log: a network failure is a StorageError, never CorruptLogError."""

    # True when the client sent the failed request more than once: for a write, an earlier
    # attempt may have landed even though the last one was refused
    retried: bool = False

    def __init__(self, message: str, store: str | None = None, path: str | None = None):
        super().__init__(message)
        self.store = store
        self.path = path

    def __reduce__(self):
        return (type(self), (str(self.args[0]) if self.args else "", self.store, self.path))


class UnsupportedStorageError(StorageError):
    """The location names storage tahoe cannot use: an unknown URI scheme, or a file system or
    object store that cannot do what the log needs (an atomic put-if-absent of a commit file);
    the message names the storage and what it lacks."""


class StorageConfigError(StorageError, InvalidOptionError):
    """A storage option that does not exist (for any store), a value a store does not take, or
    options that cannot make a store (e.g. an endpoint that is not a URL)."""


class StorageCredentialsError(StorageError):
    """No usable credentials: none configured (options, environment, instance metadata), or
    credentials the store refuses (401, or a 403 that names the signature or the key)."""


class StorageAccessDeniedError(StorageError):
    """The store refused the request (403): the credentials are valid but not allowed to do it."""


class BucketNotFoundError(StorageError, TableNotFoundError):
    """The bucket (S3, GCS) or container / storage account (Azure) does not exist. Also a
    TableNotFoundError: no table can be there."""


class StorageUnreachableError(StorageError):
    """The store could not be reached: connection refused or reset, DNS failure, timeout — after
    the client's retries."""


class StorageThrottledError(StorageError):
    """The store kept answering 503 SlowDown / 429 / ServerBusy after the client's retries with
    backoff."""


class IcebergCompatViolationError(InvalidTableOperationError):
    """A write would break the table's Iceberg compatibility (delta-spark's
    DELTA_ICEBERG_COMPAT_VIOLATION; `error_class` names the sub-condition, e.g.
    `DELTA_ICEBERG_COMPAT_VIOLATION.DELETION_VECTORS_SHOULD_BE_DISABLED`)."""

    def __init__(self, message: str, error_class: str = "DELTA_ICEBERG_COMPAT_VIOLATION"):
        super().__init__(message, error_class=error_class)


class UniversalFormatViolationError(InvalidTableOperationError):
    """UniForm is enabled without what it depends on (delta-spark's
    DELTA_UNIVERSAL_FORMAT_VIOLATION)."""

    def __init__(self, message: str, error_class: str = "DELTA_UNIVERSAL_FORMAT_VIOLATION"):
        super().__init__(message, error_class=error_class)
