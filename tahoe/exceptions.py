"""deltalake's (delta-rs's) exception classes, as `deltalake.exceptions` names them: bases of
tahoe's own errors (`tahoe.errors`), so a deltalake script's `except` clauses catch what tahoe
raises for the same failure."""

from .errors import CommitFailedError, DeltaError, DeltaProtocolError, SchemaMismatchError, TableNotFoundError

__all__ = ["CommitFailedError", "DeltaError", "DeltaProtocolError", "SchemaMismatchError", "TableNotFoundError"]
