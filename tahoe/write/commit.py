"""The commit step every writer shares: the files an executor wrote become one version, or are deleted again
when the commit surely did not land. Never on doubt.

  1. `commit_new_files(txn, new_files, stage)`: stage, commit, and on failure delete `new_files` only when
     `txn.outcome` is NOT_COMMITTED; an UNKNOWN outcome keeps them (CommitOutcomeUnknownError).
  2. `commit_write`: a planned WRITE (a new table with `Transaction(new_table=True)`), the overwrite's
     removes, identity high-water marks, the txn id and delta-spark's WRITE metrics (`write_metrics`).
  3. `commit_micro_batch`: a streaming sink's batch as one `STREAMING UPDATE` version with a `txn` action.
  4. Post-commit hooks (auto compaction) run once the commit landed and never fail it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ..protocol.actions import AddCDCFile, AddFile
from ..protocol.clustering import clustering_domain, clustering_paths, physical_path
from ..storage import resolve_data_path
from ..txn.transaction import CommitOutcome, Transaction
from .replace_where import parse_replace_where, stage_overwrite
from ..errors import SchemaError, TableNotFoundError

if TYPE_CHECKING:  # pragma: no cover
    from ..log.delta_log import DeltaLog
    from ..log.snapshot import Snapshot
    from ..storage.base import LogStore
    from .plan import WritePlan

__all__ = ["commit_write", "commit_new_files", "commit_micro_batch", "write_metrics", "delete_data_files"]

_log = logging.getLogger(__name__)


def delete_data_files(store: LogStore, table_root: str, files: Iterable[AddFile | AddCDCFile]) -> None:
    """Best effort: delete files written for a commit that surely did not land (VACUUM removes
    what is left)."""
    for f in files:
        try:
            store.delete(resolve_data_path(table_root, f.path))
        except Exception:  # noqa: BLE001 - best effort
            _log.debug("could not delete %s after a failed commit", f.path)


def commit_new_files(txn: Transaction, new_files: list[AddFile | AddCDCFile],
                     stage: Callable[[Transaction], dict | None] | None = None,
                     user_metadata: str | None = None,
                     post_commit: Iterable[Callable[[Transaction, int], Any]] = ()) -> int:
    """Stage (`stage(txn)`, which returns the operation metrics) and commit `txn`; returns the
    version. On failure `new_files` (the data / cdc files this operation wrote) are deleted only
    when the commit surely did not land (`CommitOutcome.NOT_COMMITTED`); then the error
    propagates. `post_commit`: hooks run after the commit landed (`Transaction.add_post_commit_hook`:
    e.g. auto compaction); their failures never fail the commit."""
    for hook in post_commit:
        txn.add_post_commit_hook(hook)
    try:
        metrics = stage(txn) if stage is not None else None
        return txn.commit(operation_metrics=metrics, user_metadata=user_metadata)
    except BaseException:
        if txn.outcome is CommitOutcome.NOT_COMMITTED:
            delete_data_files(txn.log.store, txn.log.table_root, new_files)
        else:
            _log.warning("the commit of %s on %s may have landed (outcome %s): its %d new files are kept",
                         txn.operation, txn.log.table_root, txn.outcome.value, len(new_files))
        raise


def write_metrics(plan: WritePlan, adds: list[AddFile], removes: list[AddFile],
                  num_rows: int | None = None, copied_rows: int = 0) -> dict:
    """delta-spark's operationMetrics of a WRITE: numFiles, numOutputRows, numOutputBytes; with a
    replaceWhere predicate also numRemovedFiles, numRemovedBytes, numAddedChangeFiles and — when
    the removed files' stats give their row counts — numDeletedRows / numCopiedRows (the rows of
    removed files written again: `copied_rows`, when a predicate on data columns replaced rows)."""
    rows = num_rows if num_rows is not None else sum(a.num_records or 0 for a in adds)
    if plan.operation == "STREAMING UPDATE":   # delta-spark's DeltaOperationMetrics.STREAMING_UPDATE
        return {"numAddedFiles": len(adds), "numRemovedFiles": len(removes), "numOutputRows": rows,
                "numOutputBytes": sum(a.size for a in adds)}
    metrics: dict = {"numFiles": len(adds), "numOutputRows": rows, "numOutputBytes": sum(a.size for a in adds)}
    if plan.replace_where is not None and plan.read_version >= 0:
        metrics["numRemovedFiles"] = len(removes)
        metrics["numRemovedBytes"] = sum(r.size or 0 for r in removes)
        metrics["numAddedChangeFiles"] = 0
        counts = [r.num_records for r in removes]
        if all(c is not None for c in counts):
            metrics["numDeletedRows"] = sum(counts) - copied_rows   # type: ignore[arg-type]
            metrics["numCopiedRows"] = copied_rows
    return metrics


def commit_write(plan: WritePlan, log: DeltaLog, snapshot: Snapshot | None, adds: list[AddFile],
                 identity_marks: dict[str, int] | None = None, num_rows: int | None = None,
                 post_commit: Iterable[Callable[[Transaction, int], Any]] = (),
                 replaced: tuple[list[AddFile], int] | None = None, cdc_files: Iterable[AddCDCFile] = ()) -> int:
    """ONE transaction for a planned WRITE (see the module docstring): `snapshot` is the one the
    plan was made on (None when the plan creates the table), `adds` the executor's new files,
    `identity_marks` the identity high-water marks its rows reached. `replaced` (a plan that
    replaces rows): (the files holding rows the predicate matched — removed, the table recorded as
    read —, the number of their other rows, which `adds` holds again); `cdc_files` its change data
    (the replaced rows as deletes, the written ones as inserts) on a table with the change data
    feed on. Returns the version; conflicts raise the Concurrent*Exception of the transaction (the
    new files deleted)."""
    cdcs = list(cdc_files)
    try:
        txn = Transaction(log, plan.operation, plan.parameters, snapshot=snapshot, new_table=plan.creates_table)
    except BaseException:
        delete_data_files(log.store, log.table_root, list(adds) + cdcs)
        raise

    def stage(txn: Transaction) -> dict:
        if plan.replaces_table:
            txn.replace_table()
        if plan.new_metadata is not None:
            txn.update_metadata(plan.new_metadata)
        if plan.clustering is not None or (plan.replaces_table and snapshot is not None
                                           and clustering_paths(snapshot.domain_metadata)):
            schema = plan.schema
            txn.set_system_domain_metadata(clustering_domain(
                [physical_path(schema, c, plan.column_mapping_mode) for c in plan.clustering or ()]))
        removes: list[AddFile] = []
        if replaced is not None:
            removes = replaced[0]
            txn.read_whole_table()
            txn.read_files(removes)
            txn.remove_files(removes)
        elif snapshot is not None and plan.mode == "overwrite":
            node = None if plan.replace_where is None else \
                parse_replace_where(plan.replace_where, snapshot.schema, list(snapshot.partition_columns))
            removes = stage_overwrite(txn, snapshot, node, adds if plan.dynamic else None, plan.time_zone)
        txn.add_files(adds)
        if cdcs:
            txn.add_cdc_files(cdcs)
        for name, value in (identity_marks or {}).items():
            txn.update_identity_high_water_mark(name, value)
        if plan.txn_app_id is not None:
            txn.set_txn(plan.txn_app_id, int(plan.txn_version))  # type: ignore[arg-type]
        metrics = write_metrics(plan, adds, removes, num_rows, replaced[1] if replaced is not None else 0)
        if cdcs and "numAddedChangeFiles" in metrics:
            metrics["numAddedChangeFiles"] = len(cdcs)
        return metrics

    return commit_new_files(txn, list(adds) + cdcs, stage, user_metadata=plan.user_metadata, post_commit=post_commit)


def commit_micro_batch(plan: WritePlan, log: DeltaLog, adds: list[AddFile], identity_marks: dict[str, int] | None,
                       query_id: str, batch_id: int, output_mode: str) -> int | None:
    """Commit one micro-batch of a streaming query (see the module docstring): the version, or
    None when the table already records batch `batch_id` of `query_id` (its new files deleted). The batch
    commits on the table as it is now, which must still have the plan's schema and partitioning. `output_mode` is
    "Append" or "Complete" (the plan's mode is then overwrite)."""
    import dataclasses

    try:
        snap = log.snapshot()
    except TableNotFoundError:
        snap = None
    if snap is not None:
        done = snap.txn_version(query_id)
        if done is not None and done >= batch_id:
            _log.info("batch %d of query %s is already in %s (version %d): nothing to commit", batch_id, query_id,
                      log.table_root, snap.version)
            delete_data_files(log.store, log.table_root, adds)
            return None
    params = {"outputMode": output_mode, "queryId": query_id, "epochId": str(batch_id)}
    plan = dataclasses.replace(plan, operation="STREAMING UPDATE", parameters=params, txn_app_id=query_id,
                               txn_version=batch_id)
    if plan.creates_table:
        return commit_write(plan, log, None, adds, identity_marks)   # a table created meanwhile: a conflict
    if snap is None:
        delete_data_files(log.store, log.table_root, adds)
        raise TableNotFoundError(f"the Delta table at {log.table_root} that the stream writes to is gone "
                                 f"(batch {batch_id} of query {query_id} was planned on version {plan.read_version})")
    if snap.version != plan.read_version:
        expected = plan.new_metadata if plan.new_metadata is not None else None
        same = (snap.schema.to_json() == (expected.schema_string if expected is not None else plan.schema_json)
                and [c.lower() for c in snap.partition_columns] == [c.lower() for c in plan.partition_columns]
                and snap.column_mapping_mode == plan.column_mapping_mode)
        if plan.new_metadata is not None or not same:
            delete_data_files(log.store, log.table_root, adds)
            raise SchemaError(
                f"the schema or partitioning of {log.table_root} changed (version {snap.version}) while batch "
                f"{batch_id} of streaming query {query_id} was being written on version {plan.read_version}: the "
                f"batch is not committed; the query fails and, restarted, writes it again on the new table")
        plan = dataclasses.replace(plan, read_version=snap.version)
    return commit_write(plan, log, snap, adds, identity_marks)
