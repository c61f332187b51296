"""delta-spark's `delta.exceptions`, under tahoe: the commit-conflict exceptions by delta-spark's
names, raised by tahoe's commits with delta-spark's conflict rules. They are tahoe's errors
(`tahoe.errors.DeltaError`); delta-spark's derive from PySpark's `PySparkException` instead.
`ConcurrentWriteException` is delta-spark's name for a conflict no more specific class covers;
tahoe raises the specific ones."""

from ..errors import (
    ConcurrentAppendException, ConcurrentDeleteDeleteException, ConcurrentDeleteReadException,
    ConcurrentModificationException as DeltaConcurrentModificationException, ConcurrentTransactionException,
    MetadataChangedException, ProtocolChangedException,
)


class ConcurrentWriteException(DeltaConcurrentModificationException):
    """A concurrent transaction wrote data after this one read the table (delta-spark's name)."""

    error_class = "DELTA_CONCURRENT_WRITE"


__all__ = ["DeltaConcurrentModificationException", "ConcurrentWriteException", "MetadataChangedException",
           "ProtocolChangedException", "ConcurrentAppendException", "ConcurrentDeleteReadException",
           "ConcurrentDeleteDeleteException", "ConcurrentTransactionException"]
