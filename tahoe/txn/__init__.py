"""Transactions: commits with optimistic concurrency control and conflict detection
(`Transaction`, `conflicts`), and the operations that create and evolve tables (`table_ops`;
`clustering`: ALTER TABLE ... CLUSTER BY)."""

from .clustering import cluster_by, table_clustering_columns
from .conflicts import TransactionSummary, WinningCommit, check_conflicts
from .ddl import parse_ddl, parse_schema
from ..protocol.properties import normalize_properties, parse_interval_ms
from .table_ops import (
    add_constraint, add_feature, create_table, drop_column, drop_constraint, rename_column,
    set_identity_high_water_mark, set_properties, unset_properties, update_schema,
    upgrade_protocol,
)
from .transaction import CommitOutcome, Transaction

__all__ = [
    "Transaction", "CommitOutcome", "TransactionSummary", "WinningCommit", "check_conflicts",
    "create_table", "set_properties", "unset_properties", "upgrade_protocol", "add_feature",
    "add_constraint", "drop_constraint", "update_schema", "rename_column", "drop_column",
    "set_identity_high_water_mark", "normalize_properties", "parse_interval_ms", "parse_ddl",
    "parse_schema", "cluster_by", "table_clustering_columns",
]
