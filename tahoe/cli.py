"""The `tahoe` command line, for people and scripts: `describe`, `history`, `files`, `export`, `changes`,
`create`, `set-property`, `checkpoint`, `compact-log`, `optimize`, `reorg`, `vacuum`, `restore`, `clone`,
`convert`, `demo` and `sharing ...` (`tahoe.sharing.cli`).

  1. Every argument has a metavar and a description in `--help`, every command an example (`tahoe.cli_help`).
  2. Errors go to stderr as one line `error: ...`, exit code 1 (2 for bad usage), never a traceback.
  3. `--json` prints one JSON document on stdout."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from .version import __version__
from .cli_help import Command, typer_app
from .errors import DeltaError

app = typer_app(help="Delta Lake tables and Delta Sharing from the command line.\n\n"
                     "Run `tahoe COMMAND --help` for a command's options and examples.")
out = Console()
err = Console(stderr=True)

PATH_HELP = ("the table: a directory holding _delta_log/ (local path, file://, s3://, az://, abfss://, gs:// URI; "
             "credentials and endpoints with --storage-option)")
STORAGE_HELP = ("a storage option KEY=VALUE, as delta-rs takes them (e.g. AWS_ENDPOINT_URL=http://127.0.0.1:9000, "
                "AZURE_STORAGE_ACCOUNT_NAME=acct); repeatable, before or after the command")
_STORAGE: dict[str, str] = {}


def _so() -> dict | None:
    """The --storage-option pairs given on the command line (None when none were)."""
    return dict(_STORAGE) or None
VERSION_HELP = "time travel to version N"
TIMESTAMP_HELP = "time travel to the version as of T (ISO 8601, e.g. 2024-05-01T10:00:00Z)"
JSON_HELP = "print one JSON document on stdout instead of tables"


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"tahoe {__version__}\n")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="print tahoe's version and exit"),
          storage_option: list[str] = typer.Option([], "--storage-option", metavar="KEY=VALUE",
                                                   help=STORAGE_HELP)) -> None:
    """Delta Lake tables and Delta Sharing from the command line."""
    for kv in storage_option:
        key, sep, value = kv.partition("=")
        if not sep or not key.strip():
            _fail(f"--storage-option takes KEY=VALUE, not {kv!r}", 2)
        _STORAGE[key.strip()] = value


def _fail(msg: str, code: int = 1) -> None:
    err.print(f"[bold red]error:[/] {escape(msg)}", highlight=False, markup=True, soft_wrap=True)  # one line
    raise typer.Exit(code)


def _open(path: str, version: Optional[int], timestamp: Optional[str]):
    from .table import Table

    if version is not None and timestamp is not None:
        _fail("give --version or --timestamp, not both", 2)
    return Table(path, version=version, timestamp=timestamp, storage_options=_so())


def _run(fn):
    try:
        return fn()
    except typer.Exit:
        raise
    except DeltaError as e:
        _fail(f"{type(e).__name__}: {e}")
    except (ValueError, OSError) as e:  # a path that is a file, a missing directory, permissions, ...
        _fail(str(e))


def _ts(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def describe_dict(table_root: str, snap) -> dict[str, Any]:
    """What `tahoe describe` shows of a snapshot (`tahoe.log.Snapshot`)."""
    p = snap.protocol
    from .protocol.table_features import reader_features_of, writer_features_of

    return {
        "path": table_root,
        "version": snap.version,
        "timestamp": _ts(snap.timestamp),
        "protocol": {
            "minReaderVersion": p.min_reader_version,
            "minWriterVersion": p.min_writer_version,
            "readerFeatures": sorted(reader_features_of(p)),
            "writerFeatures": sorted(writer_features_of(p)),
        },
        "metadata": {
            "id": snap.metadata.id,
            "name": snap.metadata.name,
            "description": snap.metadata.description,
            "createdTime": snap.metadata.created_time,
            "configuration": snap.metadata.configuration,
            "format": snap.metadata.format.provider,
        },
        "partitionColumns": snap.partition_columns,
        "schema": snap.schema.to_json_obj(),
        "numFiles": snap.num_files,
        "sizeInBytes": snap.size_in_bytes,
    }


@app.command(cls=Command)
def describe(path: str = typer.Argument(..., metavar="PATH", help=PATH_HELP),
             version: Optional[int] = typer.Option(None, "--version", "-v", metavar="N", help=VERSION_HELP),
             timestamp: Optional[str] = typer.Option(None, "--timestamp", "-t", metavar="T", help=TIMESTAMP_HELP),
             as_json: bool = typer.Option(False, "--json", help=JSON_HELP)):
    """Version, protocol and features, metadata, schema, partition columns, files and size.

    \b
    Examples:
      tahoe describe /data/events
      tahoe describe /data/events --version 3 --json
    """
    def go():
        from .log import DeltaLog

        if version is not None and timestamp is not None:
            _fail("give --version or --timestamp, not both", 2)
        log = DeltaLog.for_table(path, _so())
        # protocol, metaData, file count and size from the version's .crc when it has them: no
        # replay of the log (and no pyarrow) for a table that keeps checksums
        d = describe_dict(log.table_root, log.snapshot(version, timestamp, from_checksum=True))
        if as_json:
            _print_json(d)
            return
        out.print(f"[bold]{d['path']}[/]  version [cyan]{d['version']}[/]  ({d['timestamp']})", highlight=False)
        p = d["protocol"]
        out.print(f"protocol: reader {p['minReaderVersion']} / writer {p['minWriterVersion']}", highlight=False)
        out.print(f"  reader features: {', '.join(p['readerFeatures']) or '-'}", highlight=False)
        out.print(f"  writer features: {', '.join(p['writerFeatures']) or '-'}", highlight=False)
        m = d["metadata"]
        out.print(f"id: {m['id']}" + (f"  name: {m['name']}" if m["name"] else ""), highlight=False)
        if m["description"]:
            out.print(f"description: {m['description']}", highlight=False)
        out.print(f"partition columns: {', '.join(d['partitionColumns']) or '-'}", highlight=False)
        out.print(f"files: {d['numFiles']}  size: {d['sizeInBytes']} bytes", highlight=False)
        st = RichTable(title="schema")
        st.add_column("column")
        st.add_column("type")
        st.add_column("nullable")
        for f in t_schema_fields(d["schema"]):
            st.add_row(*f)
        out.print(st)
        if m["configuration"]:
            ct = RichTable(title="properties")
            ct.add_column("key")
            ct.add_column("value")
            for k, v in sorted(m["configuration"].items()):
                ct.add_row(k, str(v))
            out.print(ct)
    _run(go)


def t_schema_fields(schema: dict) -> list[tuple[str, str, str]]:
    rows = []
    for f in schema.get("fields", []):
        t = f["type"]
        rows.append((f["name"], t if isinstance(t, str) else json.dumps(t, separators=(",", ":")), str(f.get("nullable", True)).lower()))
    return rows


@app.command(cls=Command)
def history(path: str = typer.Argument(..., metavar="PATH", help=PATH_HELP),
            limit: Optional[int] = typer.Option(None, "--limit", "-n", metavar="N", help="only the newest N versions"),
            as_json: bool = typer.Option(False, "--json", help=JSON_HELP)):
    """The commits of the table, newest first (commitInfo per version).

    \b
    Examples:
      tahoe history /data/events --limit 5
      tahoe history /data/events --json
    """
    def go():
        from .log import DeltaLog

        entries = [e.to_dict() for e in DeltaLog.for_table(path, _so()).history(limit)]
        if as_json:
            _print_json(entries)
            return
        rt = RichTable()
        for c in ("version", "timestamp", "operation", "parameters", "metrics"):
            rt.add_column(c)
        for e in entries:
            rt.add_row(str(e["version"]), _ts(e["timestamp"]), str(e.get("operation", "")),
                       json.dumps(e.get("operationParameters", {}))[:60],
                       json.dumps(e.get("operationMetrics", {}))[:60])
        out.print(rt)
    _run(go)


@app.command(cls=Command)
def files(path: str = typer.Argument(..., metavar="PATH", help=PATH_HELP),
          version: Optional[int] = typer.Option(None, "--version", "-v", metavar="N", help=VERSION_HELP),
          timestamp: Optional[str] = typer.Option(None, "--timestamp", "-t", metavar="T", help=TIMESTAMP_HELP),
          wide: bool = typer.Option(False, "--wide", "-w",
                                    help="one tab-separated line per file with its whole path (the default "
                                         "when the output is not a terminal)"),
          as_json: bool = typer.Option(False, "--json", help=JSON_HELP)):
    """The active files: path, partition values, size, numRecords, deletion-vector cardinality.

    On a terminal a table; piped (or with --wide) a header line and one tab-separated line per
    file, paths whole.

    \b
    Examples:
      tahoe files /data/events
      tahoe files /data/events --version 3 | cut -f1
    """
    def go():
        t = _open(path, version, timestamp)
        ft = t.files(["path", "partitionValues", "size", "stats", "deletionVector"])
        rows = []
        for r in ft.to_pylist():
            nr = None
            if r["stats"]:
                try:
                    nr = json.loads(r["stats"]).get("numRecords")
                except ValueError:
                    nr = None
            pv = r["partitionValues"]
            rows.append({
                "path": r["path"],
                "partitionValues": dict(pv) if pv else {},
                "size": r["size"],
                "numRecords": nr,
                "deletionVectorCardinality": (r["deletionVector"] or {}).get("cardinality") if r["deletionVector"] else None,
            })
        if as_json:
            _print_json({"version": t.version, "files": rows})
            return
        cells = [(r["path"], ",".join(f"{k}={v}" for k, v in r["partitionValues"].items()),
                  str(r["size"]), "" if r["numRecords"] is None else str(r["numRecords"]),
                  "" if r["deletionVectorCardinality"] is None else str(r["deletionVectorCardinality"]))
                 for r in rows]
        _print_rows(("path", "partitionValues", "size", "numRecords", "deletedRows"), cells, plain=wide,
                    title=f"version {t.version}: {len(rows)} files",
                    # the path whole, folded over lines when too long
                    columns=[("path", {"overflow": "fold"}), "partition values", "size", "records", "deleted"])
    _run(go)


@app.command(cls=Command)
def export(path: str = typer.Argument(..., metavar="PATH", help=PATH_HELP),
           out_path: str = typer.Argument(..., metavar="OUT.parquet",
                                          help="the parquet file to write (its directory is created if missing; "
                                               "an existing file is replaced)"),
           version: Optional[int] = typer.Option(None, "--version", "-v", metavar="N", help=VERSION_HELP),
           timestamp: Optional[str] = typer.Option(None, "--timestamp", "-t", metavar="T", help=TIMESTAMP_HELP)):
    """Write the rows of a version as one parquet file (deletion vectors applied).

    \b
    Examples:
      tahoe export /data/events events.parquet
      tahoe export /data/events out/events-v3.parquet --version 3
    """
    def go():
        import os

        import pyarrow.parquet as pq

        if os.path.isdir(out_path):
            _fail(f"{out_path} is a directory: give the path of the parquet file to write", 2)
        t = _open(path, version, timestamp)
        data = t.to_arrow()
        parent = os.path.dirname(os.path.abspath(out_path))
        if not os.path.isdir(parent):
            os.makedirs(parent)   # a file in the way: NotADirectoryError/FileExistsError, reported by _run
            err.print(f"created directory {parent}", highlight=False)
        pq.write_table(data, out_path)
        err.print(f"wrote {data.num_rows} rows of version {t.version} to {out_path}", highlight=False)
    _run(go)


@app.command(cls=Command)
def changes(path: str = typer.Argument(..., metavar="PATH", help=PATH_HELP),
            starting_version: Optional[int] = typer.Option(None, "--starting-version", metavar="N",
                                                           help="the first version whose changes to read "
                                                                "(default 0 unless --starting-timestamp)"),
            starting_timestamp: Optional[str] = typer.Option(None, "--starting-timestamp", metavar="T",
                                                             help="start at the first version committed at or "
                                                                  "after T (ISO 8601)"),
            ending_version: Optional[int] = typer.Option(None, "--ending-version", metavar="N",
                                                         help="the last version whose changes to read "
                                                              "(default: the latest)"),
            ending_timestamp: Optional[str] = typer.Option(None, "--ending-timestamp", metavar="T",
                                                           help="end at the last version committed at or before T"),
            out_path: Optional[str] = typer.Option(None, "--out", "-o", metavar="FILE",
                                                   help="write the rows to this parquet file instead of printing them"),
            as_json: bool = typer.Option(False, "--json", help="print the rows as one JSON document on stdout")):
    """The change data feed: the rows each version inserted, deleted or updated.

    Every row has the table's columns plus _change_type (insert, delete, update_preimage,
    update_postimage), _commit_version and _commit_timestamp. The table needs
    delta.enableChangeDataFeed=true over the whole range. On a terminal a table; piped, a header
    line and one tab-separated line per row.

    \b
    Examples:
      tahoe changes /data/events --starting-version 1
      tahoe changes /data/events --starting-timestamp 2024-05-01T00:00:00Z --out changes.parquet
    """
    def go():
        from .table import Table

        if starting_version is not None and starting_timestamp is not None:
            _fail("give --starting-version or --starting-timestamp, not both", 2)
        if ending_version is not None and ending_timestamp is not None:
            _fail("give --ending-version or --ending-timestamp, not both", 2)
        t = Table(path, storage_options=_so())
        rows = t.changes(starting_version, ending_version, starting_timestamp=starting_timestamp,
                         ending_timestamp=ending_timestamp)
        if out_path is not None:
            import pyarrow.parquet as pq

            pq.write_table(rows, out_path)
            err.print(f"wrote {rows.num_rows} change rows to {out_path}", highlight=False)
            return
        records = rows.to_pylist()
        if as_json:
            _print_json(records)
            return
        header = rows.column_names
        cells = [["" if r[c] is None else (_ts(int(r[c].timestamp() * 1000)) if c == "_commit_timestamp" else str(r[c]))
                  for c in header] for r in records]
        _print_rows(header, cells, title=f"{len(records)} change rows")
    _run(go)


@app.command(cls=Command)
def checkpoint(path: str = typer.Argument(..., metavar="PATH", help=PATH_HELP),
               version: Optional[int] = typer.Option(None, "--version", "-v", metavar="N",
                                                     help="checkpoint version N (default: the latest)"),
               parts: Optional[int] = typer.Option(None, "--parts", metavar="N",
                                                   help="write a multi-part checkpoint of N parts"),
               as_json: bool = typer.Option(False, "--json", help=JSON_HELP)):
    """Write a checkpoint of the table and update _delta_log/_last_checkpoint.

    \b
    Examples:
      tahoe checkpoint /data/events
      tahoe checkpoint /data/events --version 10 --parts 4
    """
    def go():
        from .log import DeltaLog
        from .log.checkpoints import write_checkpoint

        if parts is not None and parts < 1:
            _fail("--parts must be >= 1", 2)
        lc = write_checkpoint(DeltaLog.for_table(path, _so()), version=version, parts=parts)
        if as_json:
            _print_json(lc.to_dict())
            return
        out.print(f"checkpoint of version {lc.version}: {lc.size} actions ({lc.num_of_add_files} files)"
                  f"{f' in {lc.parts} parts' if lc.parts else ''}, {lc.size_in_bytes} bytes", highlight=False)
    _run(go)


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(n)


def _run_maintenance(what: str, run, as_json: bool) -> None:
    """Run an OPTIMIZE-like operation with a progress bar of its bins (stderr, terminals only) and
    print its summary: what was removed and added (files, bytes), or the metrics as JSON."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn(f"[bold]{what}[/] rewriting files"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=err, transient=True, disable=as_json or not err.is_terminal)
    task = None

    def progress(done: int, total: int, _bin) -> None:
        nonlocal task
        if task is None:
            task = bar.add_task(what, total=total)
        bar.update(task, completed=done)

    with bar:
        m = run(progress)
    if as_json:
        _print_json(m)
        return
    rt = RichTable(title=f"{what}: version {m['version']}")
    for c in ("", "files", "bytes", "smallest", "largest"):
        rt.add_column(c, justify="right" if c else "left")
    for label, key in (("removed", "filesRemoved"), ("added", "filesAdded")):
        fs = m[key]
        rt.add_row(label, str(fs["totalFiles"]), _bytes(fs["totalSize"]), _bytes(fs["min"]), _bytes(fs["max"]))
    out.print(rt)
    dv = m.get("deletionVectorStats") or {}
    extra = [f"{m['partitionsOptimized']} partition(s)", f"{m['totalConsideredFiles']} file(s) considered",
             f"{m['totalFilesSkipped']} kept"]
    if dv:
        extra.append(f"{dv['numDeletionVectorsRemoved']} deletion vector(s) and "
                     f"{dv['numDeletionVectorRowsRemoved']} deleted row(s) purged")
    if m["numFilesRemoved"] == 0:
        out.print(f"nothing to rewrite: the table stays at version {m['version']}", highlight=False)
    else:
        out.print(", ".join(extra), highlight=False)


@app.command(cls=Command)
def optimize(path: str = typer.Argument(..., metavar="PATH", help=PATH_HELP),
             where: Optional[str] = typer.Option(None, "--where", "-w", metavar="SQL",
                                                 help="only the partitions matching this condition on "
                                                      "partition columns, e.g. \"day >= '2024-05-01'\""),
             zorder_by: Optional[list[str]] = typer.Option(
                 None, "--zorder-by", "-z", metavar="COLUMN",
                 help="rewrite in Z-order of these data columns (multi-column skipping); repeat the flag "
                      "for each column"),
             target_size: Optional[str] = typer.Option(
                 None, "--target-size", metavar="SIZE",
                 help="size of the files to write, in bytes or with a unit (256mb, 1g); default: the "
                      "table's delta.targetFileSize, else 1g"),
             min_file_size: Optional[str] = typer.Option(
                 None, "--min-file-size", metavar="SIZE",
                 help="compact only files smaller than this (default: the target size)"),
             max_concurrent_tasks: Optional[int] = typer.Option(
                 None, "--max-concurrent-tasks", metavar="N", help="rewrite at most N groups of files at once "
                                                                   "(default 15)"),
             as_json: bool = typer.Option(False, "--json", help="print the metrics (delta-spark's OPTIMIZE "
                                                                "metrics) as one JSON document")):
    """Compact small files (OPTIMIZE), Z-order them, or cluster a clustered table; one commit.

    Small files of each partition are packed into files of about the target size; files with
    deletion vectors are rewritten without their deleted rows. Rows do not change
    (dataChange=false): concurrent appends still commit. Compacting twice: the second run
    finds nothing to do.

    \b
    Examples:
      tahoe optimize /data/events
      tahoe optimize /data/events --where "day = 'mon'" --target-size 256mb
      tahoe optimize /data/events --zorder-by x --zorder-by y --json
    """
    def go():
        from .table import Table

        from .write.optimize import parse_size

        if max_concurrent_tasks is not None and max_concurrent_tasks < 1:
            _fail("--max-concurrent-tasks must be >= 1", 2)
        try:
            target = parse_size(target_size, "--target-size") if target_size is not None else None
            min_size = parse_size(min_file_size, "--min-file-size") if min_file_size is not None else None
        except DeltaError as e:
            _fail(str(e), 2)
        t = Table(path, storage_options=_so())
        _run_maintenance("OPTIMIZE", lambda progress: t.optimize(
            where=where, zorder_by=zorder_by or None, target_size=target, min_file_size=min_size,
            max_concurrent_tasks=max_concurrent_tasks, progress=progress), as_json)
    _run(go)


@app.command(cls=Command)
def reorg(path: str = typer.Argument(..., metavar="PATH", help=PATH_HELP),
          purge: bool = typer.Option(False, "--purge", help="APPLY (PURGE): rewrite the files that carry deletion "
                                                            "vectors so the deleted rows are physically gone "
                                                            "(required: the only REORG tahoe does)"),
          where: Optional[str] = typer.Option(None, "--where", "-w", metavar="SQL",
                                              help="only the partitions matching this condition on partition "
                                                   "columns"),
          as_json: bool = typer.Option(False, "--json", help="print the metrics as one JSON document")):
    """REORG TABLE ... APPLY (PURGE): rewrite files with deletion vectors without their deleted rows.

    \b
    Examples:
      tahoe reorg /data/events --purge
      tahoe reorg /data/events --purge --where "day = 'mon'" --json
    """
    def go():
        from .table import Table

        if not purge:
            _fail("give --purge: REORG TABLE ... APPLY (PURGE) is the only REORG tahoe does", 2)
        t = Table(path, storage_options=_so())
        _run_maintenance("REORG", lambda progress: t.reorg(where=where, progress=progress), as_json)
    _run(go)


@app.command("compact-log", cls=Command)
def compact_log_cmd(path: str = typer.Argument(..., metavar="PATH", help=PATH_HELP),
                    start: Optional[int] = typer.Option(None, "--from", metavar="N",
                                                        help="first version to compact (default: the one after "
                                                             "the newest checkpoint)"),
                    end: Optional[int] = typer.Option(None, "--to", metavar="M",
                                                      help="last version to compact (default: the latest)"),
                    as_json: bool = typer.Option(False, "--json", help=JSON_HELP)):
    """Write a log compaction file (N.M.compacted.json): the reconciled actions of commits N..M,
    which readers replay instead of those commits.

    \b
    Examples:
      tahoe compact-log /data/events
      tahoe compact-log /data/events --from 11 --to 19 --json
    """
    def go():
        from .log import DeltaLog
        from .log.compaction import compact_log

        r = compact_log(DeltaLog.for_table(path, _so()), start, end)
        if as_json:
            _print_json(r.to_dict())
            return
        what = "wrote" if r.created else "kept the existing"
        out.print(f"{what} log compaction of versions {r.start_version}..{r.end_version}: "
                  f"{r.num_actions} actions, {r.size_in_bytes} bytes ({r.path})", highlight=False)
    _run(go)


def _parse_kv(pairs: list[str]) -> dict[str, str]:
    props: dict[str, str] = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            _fail(f"expected KEY=VALUE, got {item!r}", 2)
        props[key.strip()] = value.strip()
    return props


@app.command(cls=Command)
def create(path: str = typer.Argument(..., metavar="PATH", help="where to create the table (a directory)"),
           schema: str = typer.Option(..., "--schema", "-s", metavar="SCHEMA",
                                      help="DDL such as 'id BIGINT, name STRING' or a Delta JSON schema"),
           partition_by: Optional[list[str]] = typer.Option(None, "--partition-by", "-p", metavar="COLUMN",
                                                            help="partition column; repeat the flag for each column"),
           prop: Optional[list[str]] = typer.Option(None, "--property", metavar="KEY=VALUE",
                                                    help="table property; repeat the flag for each property"),
           name: Optional[str] = typer.Option(None, "--name", metavar="NAME", help="the table's name (metadata)"),
           description: Optional[str] = typer.Option(None, "--description", metavar="TEXT",
                                                     help="the table's description (metadata)"),
           mode: str = typer.Option("error", "--mode", metavar="error|ignore|overwrite",
                                    help="when a table exists: fail, leave it, or replace its definition"),
           as_json: bool = typer.Option(False, "--json", help=JSON_HELP)):
    """Create a Delta table (protocol and table features follow from the schema and properties).

    \b
    Examples:
      tahoe create /data/events --schema "id BIGINT, day STRING" --partition-by day
      tahoe create /data/events --schema "id BIGINT" --property delta.enableChangeDataFeed=true \\
          --property delta.appendOnly=true
    """
    def go():
        from .table import Table

        if mode not in ("error", "ignore", "overwrite"):
            _fail(f"--mode must be error, ignore or overwrite, got {mode!r}", 2)
        t = Table.create(path, schema, partition_columns=partition_by or (), properties=_parse_kv(prop or []),
                         name=name, description=description, mode=mode, storage_options=_so())
        d = t.detail()
        if as_json:
            _print_json(d)
            return
        out.print(f"created {d['location']} at version {t.version}: protocol "
                  f"({d['minReaderVersion']}, {d['minWriterVersion']}), features "
                  f"{', '.join(d['tableFeatures']) or '-'}", highlight=False)
    _run(go)


@app.command("set-property", cls=Command)
def set_property(path: str = typer.Argument(..., metavar="PATH", help=PATH_HELP),
                 pairs: list[str] = typer.Argument(..., metavar="KEY=VALUE...",
                                                   help="the properties to set, one or more")):
    """Set table properties in one commit (enabling a feature upgrades the protocol).

    \b
    Examples:
      tahoe set-property /data/events delta.enableDeletionVectors=true
      tahoe set-property /data/events delta.logRetentionDuration="interval 60 days" owner=sales
    """
    def go():
        from .table import Table

        t = Table(path, storage_options=_so())
        before = t.version
        t.set_properties(_parse_kv(pairs))
        if t.version == before:
            out.print(f"nothing to change (version {before})", highlight=False)
        else:
            out.print(f"committed version {t.version}", highlight=False)
    _run(go)


@app.command(cls=Command)
def demo(directory: str = typer.Argument("demo-output", metavar="DIR",
                                         help="where the demo puts its table, sharing config, profile and log"),
         recipient_python: Optional[str] = typer.Option(
             None, "--recipient-python", metavar="PATH",
             help="a Python that has the official delta-sharing client (`make setup` makes .venv-recipient); "
                  "the recipient reads through it, else through tahoe's own client")):
    """Run the demo pipeline on local disk (write, change, time travel, share, read back).

    \b
    Examples:
      tahoe demo
      tahoe demo /tmp/tahoe-demo --recipient-python .venv-recipient/bin/python
    """
    from .demo import run_demo

    _run(lambda: run_demo(directory, recipient_python))


# --- table maintenance (tahoe.maintenance) ---------------------------------------------------------

QUIET_HELP = "no progress bar"


class _Progress:
    """A rich progress bar on stderr for the `progress(stage, done, total)` callbacks of
    tahoe.maintenance (one bar per stage; a total of 0 is work of unknown size)."""

    def __init__(self, quiet: bool):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._p = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TimeElapsedColumn(), console=err, disable=quiet or not err.is_terminal)
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> "_Progress":
        self._p.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._p.__exit__(*exc)

    def __call__(self, stage: str, done: int, total: int) -> None:
        task = self._tasks.get(stage)
        if task is None:
            task = self._tasks[stage] = self._p.add_task(stage, total=total or None)
        self._p.update(task, completed=done, total=total or None)


def _size(n: int | None) -> str:
    if n is None:
        return ""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _print_rows(header: Any, cells: list, *, title: str, columns: list | None = None, plain: bool = False) -> None:
    """Rows as a rich table on a terminal (`columns`: names, or (name, options) pairs; default the
    header), else — or with `plain` — tab-separated, under a header line."""
    if plain or not out.is_terminal:
        sys.stdout.write("\n".join("\t".join(c) for c in [header, *cells]) + "\n")
        return
    rt = RichTable(title=title)
    for c in columns or header:
        name, options = (c, {}) if isinstance(c, str) else c
        rt.add_column(name, **options)
    for c in cells:
        rt.add_row(*c)
    out.print(rt)


def _summary(title: str, rows: list[tuple[str, int | None, int | None]]) -> None:
    """What an operation changed: (what, files, bytes) per row."""
    rt = RichTable(title=title)
    rt.add_column("")
    rt.add_column("files", justify="right")
    rt.add_column("bytes", justify="right")
    rt.add_column("size", justify="right")
    for what, nfiles, nbytes in rows:
        rt.add_row(what, "" if nfiles is None else str(nfiles), "" if nbytes is None else str(nbytes), _size(nbytes))
    out.print(rt)


def _one_of(version: Optional[int], timestamp: Optional[str], required: bool) -> None:
    if version is not None and timestamp is not None:
        _fail("give --version or --timestamp, not both", 2)
    if required and version is None and timestamp is None:
        _fail("give --version N or --timestamp T", 2)


@app.command(cls=Command)
def vacuum(path: str = typer.Argument(..., metavar="PATH", help=PATH_HELP),
           retain_hours: Optional[float] = typer.Option(
               None, "--retain-hours", metavar="N",
               help="keep removed files for N hours (default: the table's delta.deletedFileRetentionDuration, 7 days)"),
           dry_run: bool = typer.Option(False, "--dry-run", help="only list the files that would be deleted"),
           lite: bool = typer.Option(False, "--lite",
                                     help="only files the log removed (no directory listing; misses orphaned files)"),
           no_check: bool = typer.Option(False, "--no-retention-check",
                                         help="allow a retention shorter than the table's (unsafe while others write)"),
           as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
           quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP)):
    """Delete the files no version inside the retention window needs (VACUUM).

    Old data files, orphaned files of failed writes, old deletion-vector and change-data files
    go; the log, and names starting with _ or . (other than _change_data), stay. A real run
    records VACUUM START / VACUUM END in the table's history.

    \b
    Examples:
      tahoe vacuum /data/events --dry-run
      tahoe vacuum /data/events --retain-hours 240
      tahoe vacuum /data/events --retain-hours 0 --no-retention-check
    """
    def go():
        from .log import DeltaLog
        from .maintenance.vacuum import vacuum as run_vacuum

        log = DeltaLog.for_table(path, _so())
        with _Progress(quiet or as_json) as progress:
            r = run_vacuum(log, retain_hours, dry_run, enforce_retention_duration=not no_check, full=not lite,
                           progress=progress)
        if as_json:
            _print_json({**r.metrics(), "files": r.paths})
            return
        if dry_run:
            for p in r.paths:
                sys.stdout.write(p + "\n")
        snap = log.snapshot()
        _summary(f"VACUUM {'(dry run) ' if dry_run else ''}of {log.table_root} at version {r.plan.version}",
                 [("would remove" if dry_run else "removed", r.num_files, r.size_in_bytes),
                  ("kept (active files)", snap.num_files, snap.size_in_bytes)])
    _run(go)


@app.command(cls=Command)
def restore(path: str = typer.Argument(..., metavar="PATH", help=PATH_HELP),
            version: Optional[int] = typer.Option(None, "--version", "-v", metavar="N", help="restore version N"),
            timestamp: Optional[str] = typer.Option(None, "--timestamp", "-t", metavar="T",
                                                    help="restore the version as of T (ISO 8601)"),
            ignore_missing: bool = typer.Option(False, "--ignore-missing-files",
                                                help="restore even when some of the version's files are gone"),
            as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
            quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP)):
    """Bring the table back to an earlier version, in one new commit (RESTORE).

    Refused when the version's files were vacuumed (unless --ignore-missing-files).

    \b
    Examples:
      tahoe restore /data/events --version 3
      tahoe restore /data/events --timestamp 2024-05-01T10:00:00Z --json
    """
    def go():
        from .maintenance.restore import restore as run_restore

        _one_of(version, timestamp, True)
        with _Progress(quiet or as_json) as progress:
            m = run_restore(path, version=version, timestamp=timestamp, ignore_missing_files=ignore_missing, storage_options=_so(),
                            progress=progress)
        if as_json:
            _print_json(m)
            return
        kept_files = m["numOfFilesAfterRestore"] - m["numRestoredFiles"]
        kept_bytes = m["tableSizeAfterRestore"] - m["restoredFilesSize"]
        _summary(f"RESTORE to version {m['restoredVersion']}: committed version {m['version']}",
                 [("removed", m["numRemovedFiles"], m["removedFilesSize"]),
                  ("added back", m["numRestoredFiles"], m["restoredFilesSize"]),
                  ("kept", kept_files, kept_bytes)])
    _run(go)


@app.command("clone", cls=Command)
def clone_cmd(source: str = typer.Argument(..., metavar="SOURCE", help="the table to clone (a path or URI)"),
              target: str = typer.Argument(..., metavar="TARGET", help="where the clone goes (a new table)"),
              version: Optional[int] = typer.Option(None, "--version", "-v", metavar="N", help="clone version N"),
              timestamp: Optional[str] = typer.Option(None, "--timestamp", "-t", metavar="T",
                                                      help="clone the version as of T (ISO 8601)"),
              shallow: bool = typer.Option(False, "--shallow",
                                           help="reference the source's files instead of copying them"),
              replace: bool = typer.Option(False, "--replace", help="replace a table at TARGET"),
              prop: Optional[list[str]] = typer.Option(None, "--property", metavar="KEY=VALUE",
                                                       help="override a table property; repeat the flag for each"),
              as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
              quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP)):
    """Copy a version of a table to a new table (CLONE): deep (files copied) or --shallow.

    \b
    Examples:
      tahoe clone /data/events /data/events_backup
      tahoe clone /data/events /data/events_dev --shallow --version 3 --property delta.appendOnly=false
    """
    def go():
        from .maintenance.clone import clone as run_clone

        _one_of(version, timestamp, False)
        with _Progress(quiet or as_json) as progress:
            m = run_clone(source, target, version=version, timestamp=timestamp, shallow=shallow, replace=replace,
                          properties=_parse_kv(prop or []), progress=progress, storage_options=_so())
        if as_json:
            _print_json(m)
            return
        _summary(f"{'SHALLOW' if shallow else 'DEEP'} CLONE of version {m['sourceVersion']} to {target}: "
                 f"version {m['version']}",
                 [("copied" if not shallow else "referenced", m["numCopiedFiles"] if not shallow else
                   m["sourceNumOfFiles"], m["copiedFilesSize"] if not shallow else m["sourceTableSize"]),
                  ("removed (replaced table)", m["numRemovedFiles"], m["removedFilesSize"])])
    _run(go)


@app.command(cls=Command)
def convert(path: str = typer.Argument(..., metavar="PATH", help="a directory of parquet files (local, file://, s3://, az://, gs://)"),
            partition_schema: Optional[str] = typer.Option(
                None, "--partition-schema", metavar="SCHEMA",
                help="the Hive partition columns and types, e.g. 'day DATE, country STRING'"),
            no_stats: bool = typer.Option(False, "--no-stats", help="do not collect per-file stats from the footers"),
            as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
            quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP)):
    """Make a directory of parquet files a Delta table in place, no data rewritten (CONVERT TO DELTA).

    \b
    Examples:
      tahoe convert /data/raw_events
      tahoe convert /data/raw_events --partition-schema "day DATE, country STRING"
    """
    def go():
        from .maintenance.convert import convert_to_delta

        with _Progress(quiet or as_json) as progress:
            m = convert_to_delta(path, partition_schema, collect_stats=not no_stats, progress=progress,
                                 storage_options=_so())
        if as_json:
            _print_json(m)
            return
        _summary(f"CONVERT of {path}: version {m['version']}, partitioned by "
                 f"{', '.join(m['partitionColumns']) or '-'}",
                 [("added to the log", m["numConvertedFiles"], m.get("sizeInBytes"))])
    _run(go)


# --- Delta Sharing (tahoe/sharing/cli.py) ---------------------------------------------------------
from .sharing.cli import app as _sharing_app  # noqa: E402

app.add_typer(_sharing_app, name="sharing")


def main() -> None:
    app(args=_storage_options_first(sys.argv[1:]))


def _storage_options_first(argv: list[str]) -> list[str]:
    """`--storage-option K=V` may follow the command (`tahoe describe s3://b/t --storage-option
    ...`): such pairs are moved before it, where the top-level option parses them."""
    moved: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            rest.extend(argv[i:])
            break
        if a == "--storage-option" and i + 1 < len(argv):
            moved += [a, argv[i + 1]]
            i += 2
            continue
        if a.startswith("--storage-option="):
            moved.append(a)
        else:
            rest.append(a)
        i += 1
    return moved + rest


if __name__ == "__main__":
    main()
