"""What a DML's executors share once the rows are found (the decisions are `tahoe.write.dml_plan`'s): `Counts`,
`cdc_needed`, delta-spark's operationMetrics (`metrics`, `operation_result`), and `write_and_commit`:

  1. the executor's `write(new_files)` writes the rows, listing each file as soon as it exists;
  2. deletion vectors of the rows marked deleted are written (`stage_deleted_rows`);
  3. everything is staged (`stage`) and committed in one version;
  4. the files of a failed attempt are deleted (a failed write, or a commit that surely did not land)."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..protocol.actions import AddCDCFile, AddFile
from .commit import commit_new_files, delete_data_files
from .deletion_vectors import stage_deleted_rows

if TYPE_CHECKING:  # pragma: no cover
    from ..log.snapshot import Snapshot
    from ..txn import Transaction
    from .dml_plan import DmlPlan

__all__ = ["Counts", "cdc_needed", "metrics", "stage", "write_and_commit", "operation_result"]


@dataclasses.dataclass
class Counts:
    """What an executor did, for the metrics and the commit."""
    source_rows: int = 0
    updated: int = 0
    matched_updated: int = 0
    nmbs_updated: int = 0
    deleted: int = 0
    matched_deleted: int = 0
    nmbs_deleted: int = 0
    inserted: int = 0
    copied: int = 0
    dv_added: int = 0           # files that get their first deletion vector
    dv_updated: int = 0         # files whose deletion vector grows
    dv_removed: int = 0         # files with a deletion vector that are removed
    scan_ms: int = 0
    rewrite_ms: int = 0


def cdc_needed(plan: DmlPlan, counts: Counts, partial_deletes: bool) -> bool:
    """Whether the commit needs change data files (delta-spark's rule): with the change data
    feed on, unless every change can be read from the commit's add / remove actions alone — only
    inserts (added files are inserts), or only whole files removed (removed files are deletes).
    Updates, rows deleted from files that stay (copy-on-write rewrites, deletion vectors) need
    them; then the inserts and whole-file deletes of the same commit go there too."""
    if not plan.cdf:
        return False
    return counts.updated > 0 or partial_deletes


def metrics(plan: DmlPlan, counts: Counts, removed: list[AddFile], added: list[AddFile],
            cdcs: list[AddCDCFile]) -> dict[str, int]:
    """delta-spark's operationMetrics of the DML (DeltaOperationMetrics.DELETE / UPDATE / MERGE;
    deletion-vector counts as its SumMetrics report them: added/removed include updated)."""
    exec_ms = int((time.perf_counter() - plan.start) * 1000)
    removed_bytes = sum(a.size or 0 for a in removed)
    added_bytes = sum(a.size or 0 for a in added)
    dv_add = counts.dv_added + counts.dv_updated
    dv_rem = counts.dv_removed + counts.dv_updated
    if plan.operation == "DELETE":
        return {"numAddedFiles": len(added), "numRemovedFiles": len(removed),
                "numDeletionVectorsAdded": dv_add, "numDeletionVectorsRemoved": dv_rem,
                "numDeletionVectorsUpdated": counts.dv_updated, "numAddedChangeFiles": len(cdcs),
                "numDeletedRows": counts.deleted, "numCopiedRows": counts.copied, "executionTimeMs": exec_ms,
                "scanTimeMs": counts.scan_ms, "rewriteTimeMs": counts.rewrite_ms,
                "numRemovedBytes": removed_bytes, "numAddedBytes": added_bytes}
    if plan.operation == "UPDATE":
        return {"numAddedFiles": len(added), "numRemovedFiles": len(removed), "numAddedChangeFiles": len(cdcs),
                "numDeletionVectorsAdded": dv_add, "numDeletionVectorsRemoved": dv_rem,
                "numDeletionVectorsUpdated": counts.dv_updated, "numUpdatedRows": counts.updated,
                "numCopiedRows": counts.copied, "executionTimeMs": exec_ms, "scanTimeMs": counts.scan_ms,
                "rewriteTimeMs": counts.rewrite_ms, "numRemovedBytes": removed_bytes, "numAddedBytes": added_bytes}
    return {"numSourceRows": counts.source_rows, "numTargetRowsInserted": counts.inserted,
            "numTargetRowsUpdated": counts.updated, "numTargetRowsMatchedUpdated": counts.matched_updated,
            "numTargetRowsNotMatchedBySourceUpdated": counts.nmbs_updated, "numTargetRowsDeleted": counts.deleted,
            "numTargetRowsMatchedDeleted": counts.matched_deleted,
            "numTargetRowsNotMatchedBySourceDeleted": counts.nmbs_deleted, "numTargetRowsCopied": counts.copied,
            "numTargetBytesAdded": added_bytes, "numTargetBytesRemoved": removed_bytes,
            "numOutputRows": counts.inserted + counts.updated + counts.copied,
            "numTargetFilesAdded": len(added), "numTargetFilesRemoved": len(removed),
            "numTargetChangeFilesAdded": len(cdcs), "executionTimeMs": exec_ms, "materializeSourceTimeMs": 0,
            "scanTimeMs": counts.scan_ms, "rewriteTimeMs": counts.rewrite_ms,
            "numTargetDeletionVectorsAdded": dv_add, "numTargetDeletionVectorsRemoved": dv_rem,
            "numTargetDeletionVectorsUpdated": counts.dv_updated}


def stage(plan: DmlPlan, txn: "Transaction", counts: Counts, removed: list[AddFile], added: list[AddFile],
          dv_old: list[AddFile], dv_new: list[AddFile], cdcs: list[AddCDCFile],
          identity_marks: Mapping[str, int] | None = None) -> dict:
    """Stage the DML's actions in `txn` (its reads already recorded): files removed (whole files:
    deleted or rewritten), the files of rows written, deletion-vector replacements (the old
    AddFile removed, the same file with its new DV added), change data files, the evolved schema,
    identity high-water marks. Returns the operation metrics."""
    if plan.new_metadata is not None:
        txn.update_metadata(plan.new_metadata)
    txn.remove_files(list(removed) + list(dv_old))
    txn.add_files(list(dv_new) + list(added))
    if cdcs:
        txn.add_cdc_files(cdcs)
    for name, value in (identity_marks or {}).items():
        txn.update_identity_high_water_mark(name, value)
    return metrics(plan, counts, removed, added, cdcs)


def write_and_commit(plan: DmlPlan, txn: "Transaction", snapshot: "Snapshot", counts: Counts,
                     removed: list[AddFile], dv_rows: Mapping[str, Any],
                     write: Callable[[list], tuple[list[AddFile], list[AddCDCFile], Mapping[str, int]]]) -> dict:
    """The tail every executor shares: `write(new_files)` writes the DML's rows (appending each
    file to `new_files` as soon as it exists; returns the data files added, the change data files
    and the identity high-water marks), then the deletion vectors of `dv_rows` ({path: row
    positions}) are written and everything is staged (`stage`) and committed in one version
    (`commit_new_files`). The files of a failed attempt are deleted (a failed write, or a commit
    that surely did not land). Nothing to change (no new metadata either): no commit, the snapshot's version. Returns the
    operation metrics and `version`."""
    t0 = time.perf_counter()
    new_files: list = []
    try:
        added, cdcs, marks = write(new_files)
        if not removed and not dv_rows and not added and plan.new_metadata is None:
            # (a MERGE whose schema evolution adds columns commits them even when no row changes:
            # delta-spark's commit skips only an empty one, and the new metadata is an action)
            delete_data_files(snapshot.store, snapshot.table_root, new_files)
            return {**metrics(plan, counts, [], [], []), "version": snapshot.version}
        dv_old, dv_new = stage_deleted_rows(snapshot, dv_rows) if dv_rows else ([], [])
    except BaseException:
        delete_data_files(snapshot.store, snapshot.table_root, new_files)
        raise
    counts.rewrite_ms = int((time.perf_counter() - t0) * 1000)
    result: dict[str, Any] = {}

    def do_stage(t: "Transaction") -> dict:
        m = stage(plan, t, counts, removed, added, dv_old, dv_new, cdcs, marks)
        result.update(m)
        return m

    result["version"] = commit_new_files(txn, new_files, do_stage)
    return result


def operation_result(m: Mapping[str, int]) -> dict[str, int]:
    """The row counts delta-spark 4.x's `DeltaMergeBuilder.execute()` returns as a DataFrame
    (num_affected_rows, num_updated_rows, num_deleted_rows, num_inserted_rows) from a MERGE's
    metrics. (delta-spark's `DeltaTable.delete` / `update` return None.)"""
    up, de, ins = (int(m.get(k, 0)) for k in ("numTargetRowsUpdated", "numTargetRowsDeleted", "numTargetRowsInserted"))
    return {"num_affected_rows": up + de + ins, "num_updated_rows": up, "num_deleted_rows": de,
            "num_inserted_rows": ins}
