"""The `tahoe` command line, for people and scripts.

    tahoe --version
    tahoe describe PATH [--version N | --timestamp T] [--json]
    tahoe history PATH [--limit N] [--json]
    tahoe files PATH [--version N | --timestamp T] [--wide] [--json]
    tahoe export PATH OUT.parquet [--version N | --timestamp T]
    tahoe changes PATH [--starting-version N | --starting-timestamp T] [--ending-version N | --ending-timestamp T]
                  [--out FILE] [--json]
    tahoe create PATH --schema SCHEMA [--partition-by COLUMN ...] [--property KEY=VALUE ...]
                 [--name NAME] [--description TEXT] [--mode error|ignore|overwrite] [--json]
    tahoe set-property PATH KEY=VALUE [KEY=VALUE ...]
    tahoe checkpoint PATH [--version N] [--parts N] [--json]
    tahoe demo [DIR] [--recipient-python PATH]
    tahoe sharing ...   (tahoe/sharing/cli.py)

Every argument and option has a metavar and a description in `--help`, and every command an
example (`tahoe.cli_help`). Errors go to stderr as one line `error: ...` with exit code 1 (2 for bad
usage), never a traceback. `--json` prints one JSON document on stdout.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from . import __version__
from .cli_help import Command, typer_app
from .errors import DeltaError

app = typer_app(help="Delta Lake tables and Delta Sharing from the command line.\n\n"
                     "Run `tahoe COMMAND --help` for a command's options and examples.")
out = Console()
err = Console(stderr=True)

PATH_HELP = "the table: a directory holding _delta_log/ (local path, file:// or s3:// URI)"
VERSION_HELP = "time travel to version N"
TIMESTAMP_HELP = "time travel to the version as of T (ISO 8601, e.g. 2024-05-01T10:00:00Z)"
JSON_HELP = "print one JSON document on stdout instead of tables"


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"tahoe {__version__}\n")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="print tahoe's version and exit")) -> None:
    """Delta Lake tables and Delta Sharing from the command line."""


def _fail(msg: str, code: int = 1) -> None:
    err.print(f"[bold red]error:[/] {escape(msg)}", highlight=False, markup=True, soft_wrap=True)  # one line
    raise typer.Exit(code)


def _open(path: str, version: Optional[int], timestamp: Optional[str]):
    from .table import Table

    if version is not None and timestamp is not None:
        _fail("give --version or --timestamp, not both", 2)
    return Table(path, version=version, timestamp=timestamp)


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


def describe_dict(t) -> dict[str, Any]:
    snap = t.snapshot
    p = snap.protocol
    from .protocol.table_features import reader_features_of, writer_features_of

    return {
        "path": t.table_root,
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
        d = describe_dict(_open(path, version, timestamp))
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

        entries = [e.to_dict() for e in DeltaLog.for_table(path).history(limit)]
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
        header = ("path", "partitionValues", "size", "numRecords", "deletedRows")
        if wide or not out.is_terminal:
            sys.stdout.write("\n".join("\t".join(c) for c in [header, *cells]) + "\n")
            return
        rt = RichTable(title=f"version {t.version}: {len(rows)} files")
        rt.add_column("path", overflow="fold")   # whole, folded over lines when too long
        for c in ("partition values", "size", "records", "deleted"):
            rt.add_column(c)
        for c in cells:
            rt.add_row(*c)
        out.print(rt)
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
        t = Table(path)
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
        if not out.is_terminal:
            sys.stdout.write("\n".join("\t".join(c) for c in [header, *cells]) + "\n")
            return
        rt = RichTable(title=f"{len(records)} change rows")
        for c in header:
            rt.add_column(c)
        for c in cells:
            rt.add_row(*c)
        out.print(rt)
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
        lc = write_checkpoint(DeltaLog.for_table(path), version=version, parts=parts)
        if as_json:
            _print_json(lc.to_dict())
            return
        out.print(f"checkpoint of version {lc.version}: {lc.size} actions ({lc.num_of_add_files} files)"
                  f"{f' in {lc.parts} parts' if lc.parts else ''}, {lc.size_in_bytes} bytes", highlight=False)
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
                         name=name, description=description, mode=mode)
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

        t = Table(path)
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


# --- Delta Sharing (tahoe/sharing/cli.py) ---------------------------------------------------------
from .sharing.cli import app as _sharing_app  # noqa: E402

app.add_typer(_sharing_app, name="sharing")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
