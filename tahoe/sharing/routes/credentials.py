"""Directory-based access (spec "Generate Temporary Table Credential"): `POST …/tables/{table}/
temporary-table-credentials` answers STS credentials scoped to the table's s3:// directory, or a
SAS of an Azure table's directory (see `vending`), for tables whose configuration lists
`accessModes: [url, dir]`.

Errors: a table shared for URL access only (any table not on S3 among them) → 400
`UNSUPPORTED_OPERATION`; a `location` that is not the table's → 400 `INVALID_PARAMETER_VALUE`; a
malformed body → 400 `MALFORMED_REQUEST`; STS refusing → 500 `INTERNAL_ERROR` (logged)."""

from __future__ import annotations

import re
from typing import Optional

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict

from ..auth import Principal
from ..context import ServerContext, current_principal, get_context
from ..errors import SharingError, bad_request

__all__ = ["router"]

router = APIRouter(tags=["credentials"])


class CredentialsBody(BaseModel):
    """The request body: the location to read (default: the table's root)."""
    model_config = ConfigDict(extra="allow")
    location: Optional[str] = None


def _norm(loc: str) -> str:
    return re.sub(r"(?i)^s3[an]?://", "s3://", loc.strip()).rstrip("/")


def _same_location(given: str, st) -> bool:
    if _norm(given) == st.dir_location:
        return True
    return _norm(given) == _norm(st.cfg.location)


@router.post("/shares/{share}/schemas/{schema}/tables/{table}/temporary-table-credentials")
def generate_temporary_table_credential(share: str, schema: str, table: str, body: Optional[CredentialsBody] = None,
                                        p: Principal = Depends(current_principal),
                                        ctx: ServerContext = Depends(get_context)):
    st = ctx.find_table(p, share, schema, table)
    if "dir" not in st.cfg.access_modes:
        raise SharingError(400, "UNSUPPORTED_OPERATION",
                           f"table {ctx.shared_name(st.cfg)} is shared for URL-based access only (accessModes: "
                           f"{', '.join(st.cfg.access_modes)}): read it with the Query Table API")
    loc = st.dir_location
    if body is not None and body.location is not None and not _same_location(body.location, st):
        raise bad_request(f"{body.location!r} is not the location of table {ctx.shared_name(st.cfg)} "
                          f"(nor one of its auxiliary locations, which it has none of)")
    return {"credentials": ctx.vendor.vend(ctx.guard(st, lambda: st.log.store), loc)}
