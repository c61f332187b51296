"""Listing routes (spec "List Shares", "Get Share", "List Schemas in a Share", "List Tables in a
Schema", "List all Tables in a Share"): only the shares granted to the caller, paginated with
signed page tokens (`maxResults` 0..500, default 500). Tables carry their `accessModes` (and their
`location` when directory access is allowed: spec "Access Modes")."""

from __future__ import annotations

from typing import Optional

from fastapi import APIRouter, Depends, Query

from ..auth import Principal
from ..config import TableConfig
from ..context import ServerContext, current_principal, get_context

__all__ = ["router"]

router = APIRouter(tags=["listing"])

MaxResults = Query(None, description="0..500, default 500")
PageToken = Query(None, max_length=4096)


def _share_item(s) -> dict:
    return {"name": s.name, **({"id": s.id} if s.id else {})}


def _table_item(ctx: ServerContext, t: TableConfig, share_id: str | None) -> dict:
    d = {"name": t.name, "schema": t.schema, "share": t.share, "id": t.id}
    if share_id:
        d["shareId"] = share_id
    d["accessModes"] = list(t.access_modes)
    if "dir" in t.access_modes:
        d["location"] = ctx.tables[t.key].dir_location
    return d


@router.get("/shares")
def list_shares(maxResults: Optional[int] = MaxResults, pageToken: Optional[str] = PageToken,
                p: Principal = Depends(current_principal), ctx: ServerContext = Depends(get_context)):
    items = [_share_item(s) for s in ctx.config.shares if p.grants(s.name)]
    return ctx.page(p, "shares", items, maxResults, pageToken)


@router.get("/shares/{share}")
def get_share(share: str, p: Principal = Depends(current_principal), ctx: ServerContext = Depends(get_context)):
    return {"share": _share_item(ctx.find_share(p, share))}


@router.get("/shares/{share}/schemas")
def list_schemas(share: str, maxResults: Optional[int] = MaxResults, pageToken: Optional[str] = PageToken,
                 p: Principal = Depends(current_principal), ctx: ServerContext = Depends(get_context)):
    s = ctx.find_share(p, share)
    items = [{"name": sc.name, "share": s.name} for sc in s.schemas]
    return ctx.page(p, f"schemas:{s.name.lower()}", items, maxResults, pageToken)


@router.get("/shares/{share}/schemas/{schema}/tables")
def list_tables(share: str, schema: str, maxResults: Optional[int] = MaxResults,
                pageToken: Optional[str] = PageToken, p: Principal = Depends(current_principal),
                ctx: ServerContext = Depends(get_context)):
    s, sc = ctx.find_schema(p, share, schema)
    items = [_table_item(ctx, t, s.id) for t in sc.tables]
    return ctx.page(p, f"tables:{s.name.lower()}.{sc.name.lower()}", items, maxResults, pageToken)


@router.get("/shares/{share}/all-tables")
def list_all_tables(share: str, maxResults: Optional[int] = MaxResults, pageToken: Optional[str] = PageToken,
                    p: Principal = Depends(current_principal), ctx: ServerContext = Depends(get_context)):
    s = ctx.find_share(p, share)
    items = [_table_item(ctx, t, s.id) for sc in s.schemas for t in sc.tables]
    return ctx.page(p, f"all-tables:{s.name.lower()}", items, maxResults, pageToken)
