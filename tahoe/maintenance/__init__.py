"""Table maintenance without Spark: the operations that keep a table small and its history
useful, each one module — `vacuum` (VACUUM), `restore` (RESTORE), `clone` (SHALLOW / DEEP
CLONE), `convert` (CONVERT TO DELTA), `features` (DROP FEATURE and the protocol changes around
it). `tahoe.Table`, `tahoe.spark.DeltaTable` and the
`tahoe` command are thin wrappers over them.

Every operation reads and commits through the log core (`tahoe.log`, `tahoe.txn`) and touches
storage only through the table's log store; each takes an optional `progress(stage, done,
total)` callback for long work (the command line draws it as a progress bar).
"""
