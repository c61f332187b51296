"""Deletion vectors (spec "Deletion Vectors"), the writer's part at commit: an add carrying a
deletion vector needs the `deletionVectors` feature and `numRecords` in its stats (readers
count the rows left from it).
"""

from __future__ import annotations

from ..errors import InvalidTableOperationError
from ..protocol.table_features import is_feature_supported
from .attempt import Attempt

__all__ = ["check_adds"]


def check_adds(a: Attempt) -> None:
    """InvalidTableOperationError naming the first add that breaks a rule."""
    dv_adds = [f for f in a.adds if f.deletion_vector is not None]
    if dv_adds and not is_feature_supported(a.protocol, "deletionVectors"):
        raise InvalidTableOperationError(
            f"add {dv_adds[0].path} has a deletion vector but the table does not support the "
            f"'deletionVectors' feature")
    for f in dv_adds:
        if f.num_records is None:
            raise InvalidTableOperationError(
                f"add {f.path} has a deletion vector but no numRecords in its stats")
