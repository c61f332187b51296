"""Identity columns (spec "Identity Columns"), the writer's part at commit: the high-water marks
the transaction recorded (`Transaction.update_identity_high_water_mark`) are written into the
schema's `delta.identity.highWaterMark`, only ever forward.

A commit that changes nothing but a high-water mark carries the commitInfo tag
`IDENTITY_UPDATE_TAG`, which the conflict checker lets through concurrent metadata readers.
"""

from __future__ import annotations

import dataclasses

from ..protocol.properties import advance_identity_high_water_mark
from .attempt import Attempt

__all__ = ["advance_high_water_marks", "IDENTITY_UPDATE_TAG"]

IDENTITY_UPDATE_TAG = "delta.identity.schemaUpdate"


def advance_high_water_marks(a: Attempt) -> None:
    """Move each recorded identity column's high-water mark forward in the attempt's schema."""
    if not a.identity_updates:
        return
    schema = a.metadata.schema
    changed = False
    for col, value in a.identity_updates.items():
        new_schema = advance_identity_high_water_mark(schema, col, value)
        if new_schema is not None:
            schema, changed = new_schema, True
    if changed:
        if a.new_metadata is None:
            a.tags[IDENTITY_UPDATE_TAG] = "true"
        a.set_metadata(dataclasses.replace(a.metadata, schema_string=schema.to_json()))
