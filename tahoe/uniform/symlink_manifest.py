"""Symlink-format manifests for engines that read a Delta table as a plain Hive table (Presto,
Athena, Trino's Hive connector): delta-spark's `DeltaTable.generate("symlink_format_manifest")`
and its post-commit hook for `delta.compatibility.symlinkFormatManifest.enabled=true`.

    generate_symlink_manifest("/data/events")    # -> {"version": ..., "numManifests": ...}

Layout, as delta-spark writes it: `<table>/_symlink_format_manifest/manifest` for an
unpartitioned table; `<table>/_symlink_format_manifest/<col>=<value>/.../manifest` per partition
(Hive-escaped values, `__HIVE_DEFAULT_PARTITION__` for null), each a text file listing the
absolute URIs of the partition's data files, one a line. Every generation is complete: manifests
of partitions that no longer hold files are deleted. The directory starts with "_", so VACUUM
leaves it alone. Refused (InvalidTableOperationError) on tables whose files a symlink reader
would misread: deletion vectors (enabled or present), column mapping.
"""

from __future__ import annotations

from typing import Any


from ..errors import InvalidOptionError, InvalidTableOperationError
from ..log import DeltaLog, Snapshot
from ..protocol.partition_values import partition_path
from ..protocol.properties import ENABLE_DELETION_VECTORS, bool_property
from ..storage import absolute_uri

__all__ = ["generate", "generate_symlink_manifest", "MANIFEST_DIR", "MODES"]

MANIFEST_DIR = "_symlink_format_manifest"
MODES = ("symlink_format_manifest",)


def _check(snap: Snapshot) -> None:
    if snap.column_mapping_mode != "none":
        raise InvalidTableOperationError(
            "symlink manifests cannot be generated for a table that uses column mapping: its data files "
            "hold physical column names a Hive reader cannot map")
    dvs = snap.files_table(["deletionVector"]).column("deletionVector")
    if bool_property(snap.configuration, ENABLE_DELETION_VECTORS) or dvs.null_count < len(dvs):
        raise InvalidTableOperationError(
            "symlink manifests cannot be generated for a table with deletion vectors (a Hive reader would "
            "return deleted rows): purge them and unset delta.enableDeletionVectors first")


def generate_symlink_manifest(table: str | DeltaLog, version: int | None = None,
                              storage_options: dict | None = None) -> dict[str, Any]:
    """Write the full set of manifests for `version` (default: the latest) and delete stale ones."""
    log = table if isinstance(table, DeltaLog) else DeltaLog.for_table(table, storage_options)
    snap = log.snapshot(version=version)
    _check(snap)
    store, root = log.store, log.table_root
    pcols = snap.partition_columns
    files = snap.files_table(["path", "partitionValues"])
    groups: dict[str, list[str]] = {}
    paths = files.column("path").to_pylist()
    pvs = files.column("partitionValues").to_pylist() if pcols else [None] * len(paths)
    for p, pv in zip(paths, pvs):
        rel = partition_path(list(pcols), dict(pv or [])) if pcols else ""
        groups.setdefault(rel, []).append(absolute_uri(root, p))
    mdir = store.join(root, MANIFEST_DIR)
    written = set()
    for rel, uris in sorted(groups.items()):
        target = store.join(mdir, *([*rel.split("/")] if rel else []), "manifest")
        store.write(target, ("\n".join(sorted(uris)) + "\n").encode("utf-8"), overwrite=True)
        written.add(target)
    stale = []
    try:
        for st in store.walk(mdir):
            if st.path not in written and st.name == "manifest":
                stale.append(st.path)
    except FileNotFoundError:
        pass
    store.delete_many(stale)
    return {"version": snap.version, "numManifests": len(written), "numFiles": len(paths),
            "numStaleManifestsDeleted": len(stale)}


def generate(table: str | DeltaLog, mode: str, storage_options: dict | None = None) -> dict[str, Any]:
    """delta-spark's `generate(mode)`: the only mode is "symlink_format_manifest" (any case)."""
    if not isinstance(mode, str) or mode.lower() not in MODES:
        raise InvalidOptionError(f"Specified mode '{mode}' is not supported. Supported modes are: {', '.join(MODES)}")
    return generate_symlink_manifest(table, storage_options=storage_options)

