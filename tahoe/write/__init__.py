"""Writing Delta tables without Spark, and the write machinery every writer shares: the planner
(`plan`), the Arrow executor (`writer`: `write_table` appends, overwrites or replaces-where Arrow
data in a Delta table, creating it when absent — in the spirit of delta-rs's `write_deltalake`),
the commit step (`commit`), what an overwrite replaces (`replace_where`);
`write_data_files` is the file-writing half used by other operations; `delete_rows` /
`stage_deleted_rows` mark rows deleted with deletion vectors."""

from .deletion_vectors import delete_rows, stage_deleted_rows
from .files import conform_to_schema, write_data_files
from .writer import write_table

__all__ = ["write_table", "write_data_files", "conform_to_schema", "delete_rows", "stage_deleted_rows"]
