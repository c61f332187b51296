"""Clustered tables (spec "Clustered Table", the `clustering` writer feature) and the ZCube tags OPTIMIZE puts
on clustered files (delta-spark's `ZCubeInfo`). Pure.

  1. The `delta.clustering` domain: `clustering_domain` writes delta-spark's form, `clustering_paths` reads it.
  2. Logical ↔ physical column names (`physical_path`, `logical_name`, `clustering_columns`).
  3. Column rules (`check_clustering_columns`).
  4. ZCube tags (`zcube_tags`, `zcube_of`): ZCUBE_ID, ZCUBE_ZORDER_BY, ZCUBE_ZORDER_CURVE;
     `CLUSTERING_PROVIDER` "liquid"."""

from __future__ import annotations

import json
import uuid
from typing import Iterable, Mapping

from ..errors import AnalysisException, InvalidTableOperationError, SchemaError
from . import column_mapping
from .actions import DomainMetadata
from .column_paths import quote_if_needed, split_column_path
from .schema import StructType
from .stats import eligible_for_stats

__all__ = [
    "CLUSTERING_DOMAIN", "CLUSTERING_PROVIDER", "CLUSTERING_FEATURE", "MAX_CLUSTERING_COLUMNS",
    "ZCUBE_ID", "ZCUBE_ZORDER_BY", "ZCUBE_ZORDER_CURVE", "clustering_domain", "clustering_paths",
    "physical_path", "logical_name", "clustering_columns", "check_clustering_columns", "zcube_tags",
    "zcube_of", "split_column_name",
]

CLUSTERING_DOMAIN = "delta.clustering"
CLUSTERING_PROVIDER = "liquid"
CLUSTERING_FEATURE = "clustering"
MAX_CLUSTERING_COLUMNS = 4          # delta-spark's clusteredTable.numClusteringColumnsLimit

ZCUBE_ID = "ZCUBE_ID"
ZCUBE_ZORDER_BY = "ZCUBE_ZORDER_BY"
ZCUBE_ZORDER_CURVE = "ZCUBE_ZORDER_CURVE"


# --- the domain --------------------------------------------------------------------------------

def clustering_domain(paths: Iterable[Iterable[str]]) -> DomainMetadata:
    """The `delta.clustering` domainMetadata action for clustering columns given as physical
    name paths (an empty list: clustering removed, `CLUSTER BY NONE`)."""
    cols = [list(p) for p in paths]
    return DomainMetadata(CLUSTERING_DOMAIN, json.dumps({"clusteringColumns": cols}, separators=(",", ":")))


def clustering_paths(domains: Mapping[str, DomainMetadata]) -> list[list[str]]:
    """The clustering columns (physical name paths) recorded in a snapshot's domains; [] when the
    table is not clustered."""
    dm = domains.get(CLUSTERING_DOMAIN)
    if dm is None or dm.removed or not dm.configuration:
        return []
    try:
        cols = json.loads(dm.configuration).get("clusteringColumns") or []
    except (ValueError, AttributeError):
        raise InvalidTableOperationError(
            f"the {CLUSTERING_DOMAIN} domain holds an invalid configuration: {dm.configuration!r}") from None
    out = []
    for c in cols:
        if isinstance(c, str):
            out.append([c])
        elif isinstance(c, list) and c and all(isinstance(p, str) for p in c):
            out.append(list(c))
        else:
            raise InvalidTableOperationError(
                f"the {CLUSTERING_DOMAIN} domain holds an invalid clustering column: {c!r}")
    return out


# --- names -------------------------------------------------------------------------------------

def split_column_name(name: str) -> list[str]:
    """`a.b` → ["a", "b"]; backticks quote a part holding dots (`` `a.b`.c ``)."""
    parts = split_column_path(name)
    if parts is None:
        raise AnalysisException(f"invalid column name {name!r}")
    return parts


def _resolve(schema: StructType, parts: list[str], name: str):
    current = schema
    fields = []
    for p in parts:
        if not isinstance(current, StructType):
            raise AnalysisException(
                f"[DELTA_COLUMN_NOT_FOUND_IN_SCHEMA] column '{name}' is not in the table's schema: "
                f"'{'.'.join(f.name for f in fields)}' is not a struct")
        f = current.get(p, case_insensitive=True)
        if f is None:
            raise AnalysisException(
                f"[DELTA_COLUMN_NOT_FOUND_IN_SCHEMA] Couldn't find column {name} in: {schema.names}")
        fields.append(f)
        current = f.type
    return fields


def physical_path(schema: StructType, name: str, mode: str = "none") -> list[str]:
    """The physical name parts of logical column `name` (dotted for nested fields)."""
    fields = _resolve(schema, split_column_name(name), name)
    if mode in ("name", "id"):
        return [column_mapping.physical_name(f) for f in fields]
    return [f.name for f in fields]


def logical_name(schema: StructType, path: list[str], mode: str = "none") -> str:
    """The logical (dotted, backtick-quoted where needed) name of a physical name path."""
    current = schema
    out = []
    for p in path:
        if not isinstance(current, StructType):
            raise InvalidTableOperationError(f"clustering column {path} is not in the table's schema")
        match = None
        for f in current.fields:
            phys = column_mapping.physical_name(f) if mode in ("name", "id") else f.name
            if phys == p or (mode == "none" and phys.lower() == p.lower()):
                match = f
                break
        if match is None:
            raise InvalidTableOperationError(
                f"clustering column {'.'.join(path)} of the {CLUSTERING_DOMAIN} domain is not in the table's schema")
        out.append(match.name)
        current = match.type
    return ".".join(quote_if_needed(p) for p in out)


def clustering_columns(schema: StructType, domains: Mapping[str, DomainMetadata], mode: str = "none") -> list[str]:
    """The logical names of a table's clustering columns ([] when it is not clustered)."""
    return [logical_name(schema, p, mode) for p in clustering_paths(domains)]


# --- rules -------------------------------------------------------------------------------------

def check_clustering_columns(schema: StructType, columns: Iterable[str], partition_columns: Iterable[str] = (),
                             stats_schema: StructType | None = None) -> list[str]:
    """Validate clustering columns — each a schema column (dotted for nested fields) of a type with stats,
    within the stats columns, none twice, at most 4, never on a partitioned table — and return their logical names as
    the schema spells them. `stats_schema`: the columns stats are collected on
    (`tahoe.protocol.stats.stats_columns` of the table's settings); None skips that check."""
    cols = list(columns)
    if list(partition_columns):
        raise InvalidTableOperationError(
            "[DELTA_CLUSTER_BY_WITH_PARTITIONED_BY] Clustering and partitioning cannot both be specified: "
            f"the table is partitioned by {list(partition_columns)}")
    if len(cols) > MAX_CLUSTERING_COLUMNS:
        raise InvalidTableOperationError(
            f"[DELTA_CLUSTER_BY_INVALID_NUM_COLUMNS] CLUSTER BY supports up to {MAX_CLUSTERING_COLUMNS} "
            f"clustering columns, but the table has {len(cols)} clustering columns")
    out, seen = [], set()
    for c in cols:
        if not isinstance(c, str) or not c.strip():
            raise InvalidTableOperationError(f"a clustering column must be a column name, got {c!r}")
        fields = _resolve(schema, split_column_name(c), c)
        name = ".".join(quote_if_needed(f.name) for f in fields)
        if name.lower() in seen:
            raise InvalidTableOperationError(f"clustering column '{name}' is given twice")
        seen.add(name.lower())
        if not eligible_for_stats(fields[-1].type):
            raise InvalidTableOperationError(
                f"[DELTA_CLUSTERING_COLUMN_MISSING_STATS] clustering column '{name}' has type "
                f"{fields[-1].type.simple_string()}, which data skipping collects no statistics for; "
                f"liquid clustering needs min/max stats on every clustering column")
        if stats_schema is not None and not _in_schema(stats_schema, [f.name for f in fields]):
            raise InvalidTableOperationError(
                f"[DELTA_CLUSTERING_COLUMN_MISSING_STATS] Liquid clustering requires clustering columns to "
                f"have stats. Couldn't find clustering column(s) '{name}' in stats schema "
                f"(delta.dataSkippingNumIndexedCols / delta.dataSkippingStatsColumns decide which columns "
                f"get stats)")
        out.append(name)
    return out


def _in_schema(schema: StructType, parts: list[str]) -> bool:
    current = schema
    for p in parts:
        if not isinstance(current, StructType):
            return False
        f = current.get(p, case_insensitive=True)
        if f is None:
            return False
        current = f.type
    return not isinstance(current, StructType)


# --- ZCubes --------------------------------------------------------------------------------------

def zcube_tags(columns: list[str], curve: str, zcube_id: str | None = None) -> dict[str, str]:
    """The tags of a file written by one clustering job (a ZCube)."""
    return {ZCUBE_ID: zcube_id or str(uuid.uuid4()),
            ZCUBE_ZORDER_BY: json.dumps(list(columns), separators=(",", ":")),
            ZCUBE_ZORDER_CURVE: curve}


def zcube_of(tags: Mapping[str, str | None] | None) -> tuple[str, list[str]] | None:
    """(ZCube id, its clustering columns) of a file's tags; None for a file in no ZCube."""
    if not tags:
        return None
    zid, by = tags.get(ZCUBE_ID), tags.get(ZCUBE_ZORDER_BY)
    if not zid or not by:
        return None
    try:
        cols = json.loads(by)
    except ValueError:
        raise SchemaError(f"a file's {ZCUBE_ZORDER_BY} tag is not a JSON list: {by!r}") from None
    return str(zid), [str(c) for c in cols]
