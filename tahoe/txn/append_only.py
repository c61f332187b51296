"""Append-only tables (spec "Append-only Tables"): with `delta.appendOnly=true` (and the
`appendOnly` feature) a commit may not remove data — no remove with dataChange=true.
"""

from __future__ import annotations

from ..errors import APPEND_ONLY_MESSAGE, AppendOnlyViolationError
from ..protocol.properties import bool_property
from ..protocol.table_features import is_feature_supported
from .attempt import Attempt

__all__ = ["refuse_data_removal"]


def refuse_data_removal(a: Attempt) -> None:
    """AppendOnlyViolationError (an InvalidTableOperationError) when the attempt removes data from an append-only table."""
    if any(r.data_change for r in a.removes) and bool_property(a.configuration, "delta.appendOnly") and \
            is_feature_supported(a.protocol, "appendOnly"):
        raise AppendOnlyViolationError(
            f"{APPEND_ONLY_MESSAGE} (table {a.table_root}: {a.operation} may not remove or change data)",
            error_class="DELTA_CANNOT_MODIFY_APPEND_ONLY")
