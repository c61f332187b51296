"""Changing a table's clustering columns: `ALTER TABLE ... CLUSTER BY (c1, c2)` and
`ALTER TABLE ... CLUSTER BY NONE`, one commit each (delta-spark's AlterTableClusterByDeltaCommand).

    cluster_by(log, ["country", "day"])   # clustered from now on (the next OPTIMIZE clusters)
    cluster_by(log, None)                 # CLUSTER BY NONE: the feature stays, no columns

Rules (spec "Clustered Table", `tahoe.protocol.clustering.check_clustering_columns`): a
partitioned table cannot be clustered; columns must exist, be stats-eligible and among the
columns stats are collected on; at most 4. An unclustered, unpartitioned table becomes clustered
(the `clustering` feature is added). CLUSTER BY NONE on a table without the feature changes
nothing. Files already written are not rewritten: OPTIMIZE clusters by the new columns, and files
clustered by other columns are left as they are (their ZCube names the old columns).
The commit: operation "CLUSTER BY" with parameters oldClusteringColumns / newClusteringColumns
(comma-separated logical names), the `delta.clustering` domain.
"""

from __future__ import annotations

from typing import Iterable

from ..log.delta_log import DeltaLog
from ..log.snapshot import Snapshot
from ..protocol.clustering import (
    CLUSTERING_FEATURE, check_clustering_columns, clustering_columns, clustering_domain, physical_path,
)
from ..protocol.properties import data_skipping_settings
from ..protocol.stats import stats_columns
from ..protocol.table_features import is_feature_supported
from .transaction import Transaction

__all__ = ["cluster_by", "table_clustering_columns"]


def table_clustering_columns(snapshot: Snapshot) -> list[str]:
    """The logical names of the snapshot's clustering columns ([] when not clustered)."""
    return clustering_columns(snapshot.schema, snapshot.domain_metadata, snapshot.column_mapping_mode)


def cluster_by(log: DeltaLog | str, columns: Iterable[str] | None, storage_options: dict | None = None) -> Snapshot:
    """Set (or, with None / [], remove) the clustering columns in one commit; returns the snapshot
    after it (the current one when nothing changes)."""
    if not isinstance(log, DeltaLog):
        log = DeltaLog.for_table(log, storage_options)
    snap = log.snapshot()
    cols = [] if columns is None else ([columns] if isinstance(columns, str) else list(columns))
    clustered = is_feature_supported(snap.protocol, CLUSTERING_FEATURE)
    if not cols and not clustered:
        return snap             # CLUSTER BY NONE on a table that never was clustered
    skipping = data_skipping_settings(snap.configuration)
    stats = stats_columns(snap.schema, skipping.num_indexed_cols, skipping.stats_columns, snap.partition_columns)
    names = check_clustering_columns(snap.schema, cols, snap.partition_columns, stats)
    old = table_clustering_columns(snap)
    mode = snap.column_mapping_mode
    txn = Transaction(log, "CLUSTER BY", {"oldClusteringColumns": ",".join(old),
                                          "newClusteringColumns": ",".join(names)}, snapshot=snap)
    txn.set_system_domain_metadata(clustering_domain([physical_path(snap.schema, c, mode) for c in names]))
    version = txn.commit()
    return log.snapshot(version=version)

