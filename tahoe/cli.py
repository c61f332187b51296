"""The `tahoe` command line, for people and scripts.

    tahoe describe PATH [--version N | --timestamp T] [--json]
    tahoe history PATH [--limit N] [--json]
    tahoe files PATH [--version N | --timestamp T] [--json]
    tahoe export PATH OUT.parquet [--version N | --timestamp T]
    tahoe create PATH --schema JSON_OR_DDL [--partition-by C ...] [--property K=V ...]
    tahoe set-property PATH K=V [K=V ...]
    tahoe checkpoint PATH [--version N] [--parts N] [--json]
    tahoe demo [DIR] [--recipient-python PATH]

Errors go to stderr with exit code 1 (2 for bad usage). `--json` prints one JSON document on stdout.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table as RichTable

from .errors import DeltaError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Delta Lake tables and Delta Sharing from the command line.")
out = Console()
err = Console(stderr=True)


def _fail(msg: str, code: int = 1) -> None:
    err.print(f"[bold red]error:[/] {msg}", highlight=False, markup=True)
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
    except (ValueError, FileNotFoundError, PermissionError) as e:
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


@app.command()
def describe(path: str,
             version: Optional[int] = typer.Option(None, "--version", "-v", help="time travel to a version"),
             timestamp: Optional[str] = typer.Option(None, "--timestamp", "-t", help="time travel to a timestamp (ISO 8601)"),
             as_json: bool = typer.Option(False, "--json", help="print JSON")):
    """Version, protocol and features, metadata, schema, partition columns, files and size."""
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


@app.command()
def history(path: str,
            limit: Optional[int] = typer.Option(None, "--limit", "-n", help="newest N versions"),
            as_json: bool = typer.Option(False, "--json", help="print JSON")):
    """The commits of the table, newest first (commitInfo per version)."""
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


@app.command()
def files(path: str,
          version: Optional[int] = typer.Option(None, "--version", "-v"),
          timestamp: Optional[str] = typer.Option(None, "--timestamp", "-t"),
          as_json: bool = typer.Option(False, "--json", help="print JSON")):
    """The active files: path, partition values, size, numRecords, deletion-vector cardinality."""
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
        rt = RichTable(title=f"version {t.version}: {len(rows)} files")
        for c in ("path", "partition values", "size", "records", "deleted"):
            rt.add_column(c)
        for r in rows:
            rt.add_row(r["path"], ", ".join(f"{k}={v}" for k, v in r["partitionValues"].items()),
                       str(r["size"]), "" if r["numRecords"] is None else str(r["numRecords"]),
                       "" if r["deletionVectorCardinality"] is None else str(r["deletionVectorCardinality"]))
        out.print(rt)
    _run(go)


@app.command()
def export(path: str, out_path: str = typer.Argument(..., metavar="OUT.parquet"),
           version: Optional[int] = typer.Option(None, "--version", "-v"),
           timestamp: Optional[str] = typer.Option(None, "--timestamp", "-t")):
    """Write the rows of a version as one parquet file."""
    def go():
        import pyarrow.parquet as pq

        t = _open(path, version, timestamp)
        data = t.to_arrow()
        pq.write_table(data, out_path)
        err.print(f"wrote {data.num_rows} rows of version {t.version} to {out_path}", highlight=False)
    _run(go)


@app.command()
def checkpoint(path: str,
               version: Optional[int] = typer.Option(None, "--version", "-v", help="checkpoint this version (default: latest)"),
               parts: Optional[int] = typer.Option(None, "--parts", help="write a multi-part checkpoint of N parts"),
               as_json: bool = typer.Option(False, "--json", help="print JSON")):
    """Write a checkpoint of the table and update _delta_log/_last_checkpoint."""
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


@app.command()
def create(path: str,
           schema: str = typer.Option(..., "--schema", "-s",
                                      help="Delta JSON schema or DDL such as 'id BIGINT, name STRING'"),
           partition_by: Optional[list[str]] = typer.Option(None, "--partition-by", "-p", help="partition column (repeatable)"),
           prop: Optional[list[str]] = typer.Option(None, "--property", help="table property KEY=VALUE (repeatable)"),
           name: Optional[str] = typer.Option(None, "--name"),
           description: Optional[str] = typer.Option(None, "--description"),
           mode: str = typer.Option("error", "--mode", help="error | ignore | overwrite"),
           as_json: bool = typer.Option(False, "--json", help="print JSON")):
    """Create a Delta table."""
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


@app.command("set-property")
def set_property(path: str, pairs: list[str] = typer.Argument(..., metavar="KEY=VALUE...")):
    """Set table properties (enabling a feature upgrades the protocol)."""
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


@app.command()
def demo(directory: str = typer.Argument("demo-output", help="where to put the demo table"),
         recipient_python: Optional[str] = typer.Option(
             None, "--recipient-python",
             help="a Python that has the official delta-sharing client (`make setup` makes .venv-recipient); "
                  "the recipient reads through it, else through tahoe's own client")):
    """Run the demo pipeline on local disk."""
    from .demo import run_demo

    _run(lambda: run_demo(directory, recipient_python))


# --- Delta Sharing (tahoe/sharing/cli.py) ---------------------------------------------------------
from .sharing.cli import app as _sharing_app  # noqa: E402

app.add_typer(_sharing_app, name="sharing")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
