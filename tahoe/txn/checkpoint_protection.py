"""Checkpoint protection (spec "Checkpoint Protection", the `checkpointProtection` writer feature):
a feature drop that protects its history sets `delta.requireCheckpointProtectionBeforeVersion`
to the version it commits as, so that no checkpoint before it is cleaned up piecemeal
(`tahoe.log.metadata_cleanup`).
"""

from __future__ import annotations

import dataclasses

from ..errors import InvalidTableOperationError
from ..protocol.table_features import is_feature_supported
from .attempt import Attempt

__all__ = ["protect_history", "CHECKPOINT_PROTECTION_KEY"]

CHECKPOINT_PROTECTION_KEY = "delta.requireCheckpointProtectionBeforeVersion"


def protect_history(a: Attempt) -> None:
    """Set the protected version to the attempt's own (recomputed when a rebase changes it)."""
    if not a.protect_history:
        return
    if not is_feature_supported(a.protocol, "checkpointProtection"):
        raise InvalidTableOperationError(
            "protecting the history of a feature drop needs the 'checkpointProtection' feature")
    conf = dict(a.metadata.configuration)
    conf[CHECKPOINT_PROTECTION_KEY] = str(a.version)
    a.set_metadata(dataclasses.replace(a.metadata, configuration=conf))
