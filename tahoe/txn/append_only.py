"""Append-only tables (spec "Append-only Tables"): with `delta.appendOnly=true` (and the
`appendOnly` feature) a commit may not remove data — no remove with dataChange=true.
"""

from __future__ import annotations

from ..errors import InvalidTableOperationError
from ..protocol.properties import bool_property
from ..protocol.table_features import is_feature_supported
from .attempt import Attempt

__all__ = ["refuse_data_removal"]


def refuse_data_removal(a: Attempt) -> None:
    """InvalidTableOperationError when the attempt removes data from an append-only table."""
    if any(r.data_change for r in a.removes) and bool_property(a.configuration, "delta.appendOnly") and \
            is_feature_supported(a.protocol, "appendOnly"):
        raise InvalidTableOperationError(
            f"table {a.table_root} is append-only (delta.appendOnly=true): "
            f"{a.operation} may not remove or change data")
