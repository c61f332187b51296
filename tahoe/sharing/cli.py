"""The `tahoe sharing` commands: run the server and manage recipients (provider), and read shared
tables (recipient).

    tahoe sharing serve --config FILE [--host HOST] [--port PORT] [--log-level LEVEL] [--workers N]
    tahoe sharing recipient add NAME --share SHARE [--share SHARE ...] [--expires-in-days DAYS]
        [--oauth [--token-ttl-seconds SECONDS]] [--public-key FILE [--key-id KID]] --config FILE
    tahoe sharing recipient list --config FILE [--json]
    tahoe sharing recipient revoke NAME --config FILE
    tahoe sharing recipient rotate NAME [--expires-in-days DAYS] --config FILE

    tahoe sharing ls PROFILE [--json]
    tahoe sharing read PROFILE#share.schema.table --out FILE.parquet [--version N | --timestamp T]
        [--limit N] [--predicate JSON] [--format auto|parquet|delta] [--quiet]
    tahoe sharing changes PROFILE#share.schema.table --out FILE.parquet (--starting-version N |
        --starting-timestamp T) [--ending-version N | --ending-timestamp T] [--format ...] [--quiet]

`serve` prints, before it starts, the address it listens on, the tables it serves and how to add a
recipient. `add` and `rotate` print a profile holding the new credentials, stored only as their
SHA-256: version 1 with a bearer token, or with `--oauth` version 2 (`oauth_client_credentials`: the
server's token endpoint, a client id and secret; access tokens live `--token-ttl-seconds`), or with
`--public-key` (the recipient's PEM public key) version 2 `oauth_jwt_bearer_private_key_jwt`: the
recipient's client signs its token requests with the private key, whose path it writes into the
profile's `privateKeyFile`.
`read` and `changes` stream the rows into the parquet file (written whole or not at all) with a
progress bar of the download on stderr. Help texts follow `tahoe.cli_help`.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import Optional

import typer

from ..cli_help import Command, typer_app

app = typer_app(help="Delta Sharing server and recipients.")
recipient_app = typer_app(help="Manage recipients: who may read which shares, with their own tokens.")
app.add_typer(recipient_app, name="recipient")

CONFIG_HELP = "the sharing server's YAML config (shares, schemas, tables; see the README)"
EXPIRES_HELP = "the token expires after DAYS days (fractions allowed; default: never)"
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def _load(config: str):
    from .config import ConfigError, load_config

    try:
        return load_config(config)
    except ConfigError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1)


def _store(cfg):
    from .config import RecipientStore

    return RecipientStore(cfg.recipients_file)


def _guard(fn):
    from .config import ConfigError

    try:
        return fn()
    except ConfigError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1)


def _banner(cfg, config: str, host: str, port: int, log_level: str) -> str:
    """What `serve` says before it starts: where, what, and how to let someone in."""
    from .config import RecipientStore

    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    lines = [f"tahoe sharing server listening on http://{host}:{port}{cfg.endpoint}"
             f"{f'  (profiles point at {cfg.profile_endpoint()})' if cfg.public_url or shown != host else ''}"]
    tables = [(f"{s.name}.{sc.name}.{t.name}", t.location) for s in cfg.shares for sc in s.schemas for t in sc.tables]
    lines.append(f"serving {len(tables)} table(s):")
    lines += [f"  {name}  <-  {location}" for name, location in tables]
    recipients = RecipientStore(cfg.recipients_file).all() if cfg.recipients_file else []
    active = [r.name for r in recipients if r.active()]
    if cfg.bearer_token:
        lines.append("recipients: the config's authorization.bearerToken" +
                     (f" and {len(active)} recipient(s): {', '.join(active)}" if active else ""))
    elif active:
        lines.append(f"recipients: {', '.join(active)}")
    else:
        lines.append("recipients: none yet — every request is allowed until one is added")
    share = cfg.shares[0].name if cfg.shares else "SHARE"
    lines.append(f"add a recipient: tahoe sharing recipient add NAME --share {share} --config {config} > NAME.share")
    lines.append(f"log level: {log_level} (--log-level); stop with Ctrl-C")
    return "\n".join(lines)


@app.command(cls=Command)
def serve(config: str = typer.Option(..., "--config", "-c", metavar="FILE", help=CONFIG_HELP),
          host: Optional[str] = typer.Option(None, "--host", metavar="HOST",
                                             help="address to listen on (default: the config's host, else 127.0.0.1)"),
          port: Optional[int] = typer.Option(None, "--port", metavar="PORT",
                                             help="port to listen on (default: the config's port, else 8080)"),
          log_level: Optional[str] = typer.Option(None, "--log-level", metavar="LEVEL",
                                                  help=f"the server's log level: {', '.join(LOG_LEVELS)} (default: "
                                                       "$TAHOE_SHARING_LOG_LEVEL, else warning; info logs every request)"),
          workers: int = typer.Option(1, "--workers", "-w", metavar="N",
                                      help="worker processes accepting on the port (default 1). They share the "
                                           "signing key, the recipients and the OAuth assertions seen through "
                                           "files; with N > 1 asynchronous queries are answered at once")):
    """Run the sharing server (Delta Sharing protocol) until stopped.

    \b
    Examples:
      tahoe sharing serve --config sharing.yaml
      tahoe sharing serve --config sharing.yaml --port 9000 --log-level info
      tahoe sharing serve --config sharing.yaml --workers 4
    """
    import os

    from .server import serve as run

    level = (log_level or os.environ.get("TAHOE_SHARING_LOG_LEVEL") or "warning").lower()
    if level not in LOG_LEVELS:
        typer.echo(f"error: --log-level must be one of {', '.join(LOG_LEVELS)}, got {level!r}", err=True)
        raise typer.Exit(2)
    if workers < 1:
        typer.echo(f"error: --workers must be at least 1, got {workers}", err=True)
        raise typer.Exit(2)
    os.environ["TAHOE_SHARING_LOG_LEVEL"] = level   # what the server reads
    cfg = _load(config)
    typer.echo(_banner(cfg, config, host or cfg.host, port or cfg.port, level)
               + (f"\n{workers} worker processes (--workers)" if workers > 1 else ""))
    sys.stdout.flush()
    run(cfg, host, port, workers, config)


@recipient_app.command("add", cls=Command)
def add(name: str = typer.Argument(..., metavar="NAME", help="the recipient's name (letters, digits, - and _)"),
        share: list[str] = typer.Option(..., "--share", "-s", metavar="SHARE",
                                        help="a share the recipient may read; repeat the flag for each share "
                                             "('*': every share)"),
        expires_in_days: Optional[float] = typer.Option(None, "--expires-in-days", metavar="DAYS", help=EXPIRES_HELP),
        oauth: bool = typer.Option(False, "--oauth", help="OAuth client credentials (a version-2 profile) "
                                                          "instead of a bearer token"),
        token_ttl_seconds: Optional[int] = typer.Option(None, "--token-ttl-seconds", metavar="SECONDS",
                                                        help="lifetime of the OAuth access tokens (default 3600)"),
        public_key: Optional[str] = typer.Option(None, "--public-key", metavar="FILE",
                                                 help="the recipient's PEM public key: its client authenticates "
                                                      "with JWTs signed by the private key (implies --oauth)"),
        key_id: Optional[str] = typer.Option(None, "--key-id", metavar="KID",
                                             help="the key id (kid) the recipient's JWTs carry"),
        config: str = typer.Option(..., "--config", "-c", metavar="FILE", help=CONFIG_HELP)):
    """Create a recipient with its own token (or OAuth client credentials); print its profile JSON
    (give it to the recipient).

    \b
    Examples:
      tahoe sharing recipient add analyst --share sales --config sharing.yaml > analyst.share
      tahoe sharing recipient add auditor --share sales --share hr --expires-in-days 30 --config sharing.yaml
      tahoe sharing recipient add etl --share sales --oauth --token-ttl-seconds 900 --config sharing.yaml
      tahoe sharing recipient add partner --share sales --public-key partner.pub.pem --config sharing.yaml
    """
    from .config import profile_for

    cfg = _load(config)
    unknown = [s for s in share if s != "*" and cfg.share(s) is None]
    if unknown:
        typer.echo(f"error: no share named {', '.join(unknown)} in {config}", err=True)
        raise typer.Exit(1)
    pem = None
    if public_key is not None:
        try:
            with open(public_key) as f:
                pem = f.read()
        except OSError as e:
            typer.echo(f"error: cannot read {public_key}: {e.strerror or e}", err=True)
            raise typer.Exit(1) from None
    r, token = _guard(lambda: _store(cfg).add(name, share, expires_in_days, oauth=oauth, token_ttl=token_ttl_seconds,
                                              public_key=pem, key_id=key_id))
    sys.stdout.write(json.dumps(profile_for(cfg, token, r.expires_at, r), indent=2) + "\n")


@recipient_app.command("list", cls=Command)
def list_(config: str = typer.Option(..., "--config", "-c", metavar="FILE", help=CONFIG_HELP),
          as_json: bool = typer.Option(False, "--json", help="print one JSON document on stdout")):
    """Recipients with their shares, expiry and status (never tokens).

    \b
    Examples:
      tahoe sharing recipient list --config sharing.yaml
      tahoe sharing recipient list --config sharing.yaml --json
    """
    cfg = _load(config)
    recs = _store(cfg).all()
    rows = [{"name": r.name, "auth": r.auth, "shares": r.shares, "revoked": r.revoked,
             "expiresAt": None if r.expires_at is None else
             datetime.fromtimestamp(r.expires_at / 1000, tz=timezone.utc).isoformat(),
             "active": r.active()} for r in recs]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    for r in rows:
        typer.echo(f"{r['name']}\t{r['auth']}\tshares={','.join(r['shares'])}\texpires={r['expiresAt'] or '-'}\t"
                   f"{'revoked' if r['revoked'] else ('active' if r['active'] else 'expired')}")


@recipient_app.command("revoke", cls=Command)
def revoke(name: str = typer.Argument(..., metavar="NAME", help="the recipient to revoke"),
           config: str = typer.Option(..., "--config", "-c", metavar="FILE", help=CONFIG_HELP)):
    """Revoke a recipient's token at once.

    \b
    Examples:
      tahoe sharing recipient revoke analyst --config sharing.yaml
    """
    cfg = _load(config)
    _guard(lambda: _store(cfg).revoke(name))
    typer.echo(f"revoked {name}", err=True)


@recipient_app.command("rotate", cls=Command)
def rotate(name: str = typer.Argument(..., metavar="NAME", help="the recipient whose token to replace"),
           expires_in_days: Optional[float] = typer.Option(None, "--expires-in-days", metavar="DAYS", help=EXPIRES_HELP),
           config: str = typer.Option(..., "--config", "-c", metavar="FILE", help=CONFIG_HELP)):
    """Issue a new token or client secret (the old one, and OAuth tokens issued with it, stop
    working); print the new profile.

    \b
    Examples:
      tahoe sharing recipient rotate analyst --config sharing.yaml > analyst.share
    """
    from .config import profile_for

    cfg = _load(config)
    r, token = _guard(lambda: _store(cfg).rotate(name, expires_in_days))
    sys.stdout.write(json.dumps(profile_for(cfg, token, r.expires_at, r), indent=2) + "\n")


# --- the recipient's side ---------------------------------------------------------------------------

def _client_guard(fn):
    from ..errors import DeltaError

    try:
        return fn()
    except typer.Exit:
        raise
    except (DeltaError, LookupError, ValueError, OSError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1)


@app.command("ls", cls=Command)
def ls(profile: str = typer.Argument(..., metavar="PROFILE", help="a profile file (.share)"),
       as_json: bool = typer.Option(False, "--json", help="print one JSON document on stdout")):
    """List the tables a profile may read, as share.schema.table.

    \b
    Examples:
      tahoe sharing ls analyst.share
      tahoe sharing ls analyst.share --json
    """
    from .client import SharingClient

    def run():
        c = SharingClient(profile)
        try:
            tables = c.list_all_tables()
        finally:
            c.close()
        if as_json:
            sys.stdout.write(json.dumps([{"share": t.share, "schema": t.schema, "name": t.name} for t in tables],
                                        indent=2) + "\n")
            return
        for t in tables:
            typer.echo(f"{t.share}.{t.schema}.{t.name}")
    _client_guard(run)


def _format_flag(fmt: str) -> Optional[bool]:
    f = fmt.lower()
    if f not in ("auto", "parquet", "delta"):
        typer.echo("error: --format must be auto, parquet or delta", err=True)
        raise typer.Exit(2)
    return None if f == "auto" else f == "delta"


def _write_with_progress(out: str, start, quiet: bool) -> dict:
    """Run `start(on_file, on_bytes)` → (scan, batches) and write the batches to the parquet file
    `out` (a temporary file renamed at the end: nothing is left half-written), with a progress
    bar of the bytes and files downloaded."""
    import os
    import threading

    import pyarrow.parquet as pq
    from rich.console import Console
    from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                               TransferSpeedColumn)

    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(),
                        TransferSpeedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[files]} files"),
                        disable=quiet, console=Console(stderr=True))
    tmp = f"{out}.tmp-{os.getpid()}"
    state = {"task": None, "done": 0, "total": 0}
    lock = threading.Lock()

    def on_bytes(n: int) -> None:
        if state["task"] is not None:
            progress.update(state["task"], advance=n)

    def on_file(_f) -> None:
        with lock:
            state["done"] += 1
            done = state["done"]
        if state["task"] is not None:
            progress.update(state["task"], files=f"{done}/{state['total']}")

    with progress:
        scan, batches = start(on_file, on_bytes)
        state["total"] = len(scan.files)
        state["task"] = progress.add_task(scan.request.table.name, total=sum(f.size for f in scan.files) or None,
                                          files=f"0/{len(scan.files)}")
        schema = scan.reader.change_schema(scan.format == "parquet") if scan.request.kind == "changes" \
            else scan.schema
        rows = 0
        try:
            with pq.ParquetWriter(tmp, schema) as w:
                for b in batches:
                    w.write_batch(b)
                    rows += b.num_rows
            os.replace(tmp, out)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    return {"rows": rows, "version": scan.version, "format": scan.format, **scan.stats()}


@app.command("read", cls=Command)
def read(url: str = typer.Argument(..., metavar="URL", help="the table: PROFILE#share.schema.table"),
         out: str = typer.Option(..., "--out", "-o", metavar="FILE", help="the parquet file to write"),
         version: Optional[int] = typer.Option(None, "--version", metavar="N", help="read this version"),
         timestamp: Optional[str] = typer.Option(None, "--timestamp", metavar="T",
                                                 help="read the version at this time (ISO 8601)"),
         limit: Optional[int] = typer.Option(None, "--limit", metavar="N", help="at most this many rows"),
         predicate: Optional[str] = typer.Option(None, "--predicate", metavar="JSON",
                                                 help="a JSON predicate hint: sent to the server and applied to the rows"),
         fmt: str = typer.Option("auto", "--format", metavar="FORMAT", help="response format: auto, parquet or delta"),
         quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar")):
    """Download a shared table (or a version of it) into one parquet file.

    \b
    Examples:
      tahoe sharing read analyst.share#sales.default.orders --out orders.parquet
      tahoe sharing read analyst.share#sales.default.orders --out orders.parquet --version 0 --limit 2
    """
    from .client import scan_table

    use_delta = _format_flag(fmt)

    def run():
        res = _write_with_progress(out, lambda on_file, on_bytes: scan_table(
            url, limit=limit, version=version, timestamp=timestamp, jsonPredicateHints=predicate,
            use_delta_format=use_delta, on_file=on_file, on_bytes=on_bytes), quiet)
        typer.echo(f"wrote {res['rows']} rows of version {res['version']} to {out} "
                   f"({res['files']} files, {res['bytes']} bytes, {res['format']} format)", err=True)
    _client_guard(run)


@app.command("changes", cls=Command)
def changes(url: str = typer.Argument(..., metavar="URL", help="the table: PROFILE#share.schema.table"),
            out: str = typer.Option(..., "--out", "-o", metavar="FILE", help="the parquet file to write"),
            starting_version: Optional[int] = typer.Option(None, "--starting-version", metavar="N",
                                                           help="the first version whose changes to read"),
            ending_version: Optional[int] = typer.Option(None, "--ending-version", metavar="N",
                                                         help="the last version whose changes to read (default: latest)"),
            starting_timestamp: Optional[str] = typer.Option(None, "--starting-timestamp", metavar="T",
                                                             help="start at the version current at this time"),
            ending_timestamp: Optional[str] = typer.Option(None, "--ending-timestamp", metavar="T",
                                                           help="end at the version current at this time"),
            fmt: str = typer.Option("auto", "--format", metavar="FORMAT", help="response format: auto, parquet or delta"),
            quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar")):
    """Download a shared table's change data feed (CDF rows) into one parquet file.

    \b
    Examples:
      tahoe sharing changes analyst.share#sales.default.orders --starting-version 1 --out changes.parquet
    """
    from .client import scan_changes

    use_delta = _format_flag(fmt)
    if starting_version is None and starting_timestamp is None:
        typer.echo("error: give --starting-version or --starting-timestamp", err=True)
        raise typer.Exit(2)

    def run():
        res = _write_with_progress(out, lambda on_file, on_bytes: scan_changes(
            url, starting_version, ending_version, starting_timestamp, ending_timestamp, use_delta,
            on_file=on_file, on_bytes=on_bytes), quiet)
        typer.echo(f"wrote {res['rows']} change rows to {out} ({res['files']} files, {res['bytes']} bytes, "
                   f"{res['format']} format)", err=True)
    _client_guard(run)
