"""The `tahoe sharing` commands: for a provider `serve`, `recipient add|list|revoke|rotate|grant|ungrant|delete|
set`, `check-config`, `audit`; for a recipient `ls`, `read`, `changes`. Help texts follow `tahoe.cli_help`.

  1. `serve` prints the address, the tables it serves and how to add a recipient before it starts.
  2. `add` / `rotate` print a profile with new credentials (stored only as SHA-256): a bearer token,
     `--oauth` (`oauth_client_credentials`) or `--public-key` (`oauth_jwt_bearer_private_key_jwt`).
  3. Profiles hold secrets: `--profile-out FILE`, or standard output redirected to a file, is made 0600.
  4. `read` / `changes` write the parquet file whole or not at all, with a progress bar on stderr."""

from __future__ import annotations

import json
import os
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
    from .recipients import open_recipients
    from .store import StoreError

    try:
        return open_recipients(cfg)
    except StoreError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1)


def _emit_profile(profile: dict, profile_out: Optional[str]) -> None:
    """Write a profile (it holds a secret) to `profile_out` with mode 0600, or to standard
    output — made 0600 when that is a file the shell redirected it into."""
    import stat

    text = json.dumps(profile, indent=2) + "\n"
    if profile_out:
        fd = os.open(profile_out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, text.encode())
        finally:
            os.close(fd)
        typer.echo(f"wrote the profile to {profile_out} (mode 0600): give it to the recipient", err=True)
        return
    try:
        st = os.fstat(sys.stdout.fileno())
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077:
            os.fchmod(sys.stdout.fileno(), 0o600)
    except (OSError, ValueError, AttributeError):
        pass
    sys.stdout.write(text)


def _guard(fn):
    from .config import ConfigError

    try:
        return fn()
    except ConfigError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1)


def _banner(cfg, config: str, host: str, port: int, log_level: str, workers: int = 1) -> str:
    """What `serve` says before it starts: where, what, who may come in, and where the operator's
    outputs are."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    lines = [f"tahoe sharing server listening on http://{host}:{port}{cfg.endpoint}"
             f"{f'  (profiles point at {cfg.profile_endpoint()})' if cfg.public_url or shown != host else ''}"]
    tables = [(f"{s.name}.{sc.name}.{t.name}", t.location) for s in cfg.shares for sc in s.schemas for t in sc.tables]
    lines.append(f"serving {len(tables)} table(s):")
    lines += [f"  {name}  <-  {location}" for name, location in tables]
    from .store import describe_url

    store = _store(cfg)
    recipients = store.all()
    active = [r.name for r in recipients if r.active()]
    shown_names = ", ".join(active[:10]) + (f" and {len(active) - 10} more" if len(active) > 10 else "")
    if cfg.allow_anonymous:
        lines.append("recipients: anyone — allowAnonymous is true: requests without a token read every share" +
                     (f" (and {len(active)} recipient(s) with tokens)" if active else ""))
    elif cfg.bearer_token:
        lines.append("recipients: the config's authorization.bearerToken" +
                     (f" and {len(active)} recipient(s): {shown_names}" if active else ""))
    elif active:
        lines.append(f"recipients: {len(active)} active: {shown_names}")
    else:
        lines.append("recipients: none yet — every request is refused (401) until one is added")
    if store.last_error:
        lines.append(f"warning: {store.last_error}")
    where = cfg.recipients_file or describe_url(cfg.store_url)
    lines.append(f"recipients and shared state: {where}" +
                 (f" (state: {describe_url(cfg.store_url)})" if cfg.recipients_file else ""))
    lines.append(f"audit log: {cfg.audit.path if cfg.audit.enabled else 'off'}; metrics: "
                 f"{'/metrics' if cfg.metrics_enabled else 'off'}; health: /healthz, /readyz; OpenAPI docs: "
                 f"{ {'off': 'off', 'auth': '/openapi.json for authenticated callers', 'open': '/docs'}[cfg.docs]}")
    if cfg.replicas > 1 or workers > 1:
        lines.append(f"replica {cfg.replica_id} of {cfg.replicas}" + (f", {workers} worker processes" if workers > 1
                                                                      else ""))
    share = cfg.shares[0].name if cfg.shares else "SHARE"
    lines.append(f"add a recipient: tahoe sharing recipient add NAME --share {share} --config {config} "
                 f"--profile-out NAME.share")
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
                                           "signing key and the state store (recipients, OAuth assertions seen, "
                                           "asynchronous queries, usage)")):
    """Run the sharing server (Delta Sharing protocol) until stopped.

    \b
    Examples:
      tahoe sharing serve --config sharing.yaml
      tahoe sharing serve --config sharing.yaml --port 9000 --log-level info
      tahoe sharing serve --config sharing.yaml --workers 4
    """
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
    typer.echo(_banner(cfg, config, host or cfg.host, port or cfg.port, level, workers))
    sys.stdout.flush()
    run(cfg, host, port, workers, config)


PROFILE_OUT_HELP = "write the profile (it holds a secret) to FILE with mode 0600 instead of standard output"


def _properties(values: list[str]) -> dict:
    out = {}
    for kv in values:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            typer.echo(f"error: --property takes KEY=VALUE (KEY= removes KEY), got {kv!r}", err=True)
            raise typer.Exit(2)
        out[k] = v if v != "" else None
    return out


def _check_shares(cfg, config: str, share: list[str]) -> None:
    unknown = [s for s in share if s != "*" and cfg.share(s) is None]
    if unknown:
        typer.echo(f"error: no share named {', '.join(unknown)} in {config}", err=True)
        raise typer.Exit(1)


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
        comment: Optional[str] = typer.Option(None, "--comment", metavar="TEXT", help="a note about the recipient"),
        prop: list[str] = typer.Option([], "--property", metavar="KEY=VALUE",
                                       help="a property of the recipient (repeat the flag for each)"),
        profile_out: Optional[str] = typer.Option(None, "--profile-out", "-o", metavar="FILE", help=PROFILE_OUT_HELP),
        config: str = typer.Option(..., "--config", "-c", metavar="FILE", help=CONFIG_HELP)):
    """Create a recipient with its own token (or OAuth client credentials); write its profile
    (give it to the recipient).

    \b
    Examples:
      tahoe sharing recipient add analyst --share sales --config sharing.yaml --profile-out analyst.share
      tahoe sharing recipient add auditor --share sales --share hr --expires-in-days 30 --config sharing.yaml > auditor.share
      tahoe sharing recipient add etl --share sales --oauth --token-ttl-seconds 900 --config sharing.yaml -o etl.share
      tahoe sharing recipient add partner --share sales --public-key partner.pub.pem --comment "ACME Corp" --config sharing.yaml
    """
    from .recipients import profile_for

    cfg = _load(config)
    _check_shares(cfg, config, share)
    pem = None
    if public_key is not None:
        try:
            with open(public_key) as f:
                pem = f.read()
        except OSError as e:
            typer.echo(f"error: cannot read {public_key}: {e.strerror or e}", err=True)
            raise typer.Exit(1) from None
    props = {k: v for k, v in _properties(prop).items() if v is not None}
    r, token = _guard(lambda: _store(cfg).add(name, share, expires_in_days, oauth=oauth, token_ttl=token_ttl_seconds,
                                              public_key=pem, key_id=key_id, comment=comment, properties=props))
    _emit_profile(profile_for(cfg, token, r.expires_at, r), profile_out)


def _when(ms: Optional[int]) -> Optional[str]:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="seconds")


@recipient_app.command("list", cls=Command)
def list_(config: str = typer.Option(..., "--config", "-c", metavar="FILE", help=CONFIG_HELP),
          as_json: bool = typer.Option(False, "--json", help="print one JSON document on stdout")):
    """Recipients with their shares, expiry, status, last use, limits and notes (never tokens).

    \b
    Examples:
      tahoe sharing recipient list --config sharing.yaml
      tahoe sharing recipient list --config sharing.yaml --json
    """
    cfg = _load(config)
    store = _store(cfg)
    recs = _guard(store.all)
    used = {}
    backend_store = getattr(store.backend, "store", None)
    if backend_store is not None:
        used = backend_store.last_used()
    else:
        from .store import open_store

        try:
            used = open_store(cfg.store_url).last_used()
        except Exception:  # noqa: BLE001 - the listing works without last-used times
            used = {}
    now = int(datetime.now(timezone.utc).timestamp() * 1000)
    rows = [{"name": r.name, "auth": r.auth, "shares": r.shares, "revoked": r.revoked,
             "expiresAt": _when(r.expires_at), "active": r.active(), "createdAt": _when(r.created_at or None),
             "lastUsed": _when(used.get(r.name)),
             "graceTokens": [_when(u) for _, u in r.grace if u > now], "allow": r.allow, "limits": r.limits,
             "comment": r.comment, "properties": r.properties} for r in recs]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    from rich.console import Console
    from rich.table import Table as RichTable

    t = RichTable(title=f"{len(rows)} recipient(s)")
    for col in ("name", "auth", "shares", "status", "expires", "last used", "allow", "limits", "comment"):
        t.add_column(col)
    for r in rows:
        status = "revoked" if r["revoked"] else ("active" if r["active"] else "expired")
        if r["graceTokens"]:
            status += f" (old token until {max(r['graceTokens'])})"
        t.add_row(r["name"], r["auth"], ",".join(r["shares"]), status, r["expiresAt"] or "-", r["lastUsed"] or "never",
                  ",".join(r["allow"]) or "any", ",".join(f"{k}={v}" for k, v in r["limits"].items()) or "-",
                  r["comment"] or "")
    Console(width=200).print(t)


@recipient_app.command("revoke", cls=Command)
def revoke(name: str = typer.Argument(..., metavar="NAME", help="the recipient to revoke"),
           config: str = typer.Option(..., "--config", "-c", metavar="FILE", help=CONFIG_HELP)):
    """Revoke a recipient's token at once (its file URLs stop working too).

    \b
    Examples:
      tahoe sharing recipient revoke analyst --config sharing.yaml
    """
    cfg = _load(config)
    _guard(lambda: _store(cfg).revoke(name))
    typer.echo(f"revoked {name}", err=True)


@recipient_app.command("delete", cls=Command)
def delete(name: str = typer.Argument(..., metavar="NAME", help="the recipient to delete"),
           config: str = typer.Option(..., "--config", "-c", metavar="FILE", help=CONFIG_HELP)):
    """Delete a recipient (its token, file URLs and OAuth tokens stop working at once).

    \b
    Examples:
      tahoe sharing recipient delete analyst --config sharing.yaml
    """
    cfg = _load(config)
    _guard(lambda: _store(cfg).delete(name))
    typer.echo(f"deleted {name}", err=True)


@recipient_app.command("import", cls=Command)
def import_(path: str = typer.Argument(..., metavar="FILE", help="a recipients file ({\"recipients\": [...]})"),
            config: str = typer.Option(..., "--config", "-c", metavar="FILE", help=CONFIG_HELP)):
    """Move the recipients of a JSON recipients file (the layout before the state store) into the
    state store, tokens and grants unchanged; the file is then renamed FILE.imported so the server
    reads the store.

    \b
    Examples:
      tahoe sharing recipient import recipients.json --config sharing.yaml
    """
    from .recipients import FileBackend, Recipients, StoreBackend
    from .store import StoreError, open_store

    cfg = _load(config)
    source = FileBackend(path)
    problems = _guard(source.problems)
    if problems:
        for p in problems:
            typer.echo(f"error: {p}", err=True)
        raise typer.Exit(1)
    recs = _guard(source.load)
    try:
        target = Recipients(StoreBackend(open_store(cfg.store_url)))
    except StoreError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1)

    def change(current):
        names = {r.name for r in recs}
        current[:] = [r for r in current if r.name not in names] + recs
    _guard(lambda: target.update(change))
    os.replace(path, path + ".imported")
    typer.echo(f"imported {len(recs)} recipient(s) into the state store; {path} renamed {path}.imported", err=True)


@recipient_app.command("grant", cls=Command)
def grant(name: str = typer.Argument(..., metavar="NAME", help="the recipient"),
          share: list[str] = typer.Option(..., "--share", "-s", metavar="SHARE",
                                          help="a share to grant; repeat the flag for each share ('*': every share)"),
          config: str = typer.Option(..., "--config", "-c", metavar="FILE", help=CONFIG_HELP)):
    """Let a recipient read more shares.

    \b
    Examples:
      tahoe sharing recipient grant analyst --share hr --config sharing.yaml
    """
    cfg = _load(config)
    _check_shares(cfg, config, share)
    r = _guard(lambda: _store(cfg).grant(name, share))
    typer.echo(f"{name} may read: {', '.join(r.shares)}", err=True)


@recipient_app.command("ungrant", cls=Command)
def ungrant(name: str = typer.Argument(..., metavar="NAME", help="the recipient"),
            share: list[str] = typer.Option(..., "--share", "-s", metavar="SHARE",
                                            help="a share to take away; repeat the flag for each share"),
            config: str = typer.Option(..., "--config", "-c", metavar="FILE", help=CONFIG_HELP)):
    """Stop a recipient from reading shares (its file URLs of them stop working at once).

    \b
    Examples:
      tahoe sharing recipient ungrant analyst --share hr --config sharing.yaml
    """
    cfg = _load(config)
    r = _guard(lambda: _store(cfg).ungrant(name, share))
    typer.echo(f"{name} may read: {', '.join(r.shares) or 'nothing'}", err=True)


@recipient_app.command("rotate", cls=Command)
def rotate(name: str = typer.Argument(..., metavar="NAME", help="the recipient whose token to replace"),
           expires_in_days: Optional[float] = typer.Option(None, "--expires-in-days", metavar="DAYS", help=EXPIRES_HELP),
           grace: float = typer.Option(0, "--grace", metavar="SECONDS",
                                       help="the old token (or client secret) keeps working this long (default 0: "
                                            "it stops at once)"),
           profile_out: Optional[str] = typer.Option(None, "--profile-out", "-o", metavar="FILE", help=PROFILE_OUT_HELP),
           config: str = typer.Option(..., "--config", "-c", metavar="FILE", help=CONFIG_HELP)):
    """Issue a new token or client secret and write the new profile; the old one stops working at
    once, or after --grace SECONDS (time for the recipient to switch).

    \b
    Examples:
      tahoe sharing recipient rotate analyst --config sharing.yaml --profile-out analyst.share
      tahoe sharing recipient rotate analyst --grace 86400 --config sharing.yaml -o analyst.share
    """
    from .recipients import profile_for

    if grace < 0:
        typer.echo("error: --grace must be at least 0 seconds", err=True)
        raise typer.Exit(2)
    cfg = _load(config)
    r, token = _guard(lambda: _store(cfg).rotate(name, expires_in_days, grace))
    _emit_profile(profile_for(cfg, token, r.expires_at, r), profile_out)


@recipient_app.command("set", cls=Command)
def set_(name: str = typer.Argument(..., metavar="NAME", help="the recipient"),
         allow: list[str] = typer.Option([], "--allow", metavar="CIDR",
                                         help="an address or network it may connect from; repeat the flag for each "
                                              "(--allow any: from anywhere)"),
         requests_per_minute: Optional[int] = typer.Option(None, "--requests-per-minute", metavar="N",
                                                           help="requests a minute (0: no limit; -1: the config's)"),
         bytes_per_day: Optional[int] = typer.Option(None, "--bytes-per-day", metavar="N",
                                                     help="bytes of files a UTC day (0: no limit; -1: the config's)"),
         max_streams: Optional[int] = typer.Option(None, "--max-streams", metavar="N",
                                                   help="requests in flight at once (0: no limit; -1: the config's)"),
         comment: Optional[str] = typer.Option(None, "--comment", metavar="TEXT",
                                               help="a note about the recipient ('': none)"),
         prop: list[str] = typer.Option([], "--property", metavar="KEY=VALUE",
                                        help="set a property (KEY= removes it); repeat the flag for each"),
         config: str = typer.Option(..., "--config", "-c", metavar="FILE", help=CONFIG_HELP)):
    """Change a recipient's allow-list, limits, comment or properties.

    \b
    Examples:
      tahoe sharing recipient set partner --allow 203.0.113.0/24 --allow 198.51.100.7 --config sharing.yaml
      tahoe sharing recipient set partner --requests-per-minute 600 --bytes-per-day 50000000000 --config sharing.yaml
      tahoe sharing recipient set partner --comment "renewal due in May" --property team=finance --config sharing.yaml
    """
    cfg = _load(config)
    limits = {k: (None if v == -1 else v) for k, v in (("requestsPerMinute", requests_per_minute),
                                                        ("bytesPerDay", bytes_per_day),
                                                        ("maxConcurrentStreams", max_streams)) if v is not None}
    if any(v is not None and v < 0 for v in limits.values()):
        typer.echo("error: limits are 0 or more (-1: the config's default)", err=True)
        raise typer.Exit(2)
    allowed = None if not allow else ([] if allow == ["any"] else allow)
    r = _guard(lambda: _store(cfg).set(name, allow=allowed, limits=limits, comment=comment,
                                       properties=_properties(prop)))
    typer.echo(f"{name}: allow {','.join(r.allow) or 'any'}; limits "
               f"{', '.join(f'{k}={v}' for k, v in r.limits.items()) or 'the config’s'}", err=True)


@app.command("check-config", cls=Command)
def check_config(config: str = typer.Option(..., "--config", "-c", metavar="FILE", help=CONFIG_HELP)):
    """Check a sharing config and its recipients: every problem is listed in one run (exit 1 when
    there is any); warnings (keys of the reference server that do not apply) too.

    \b
    Examples:
      tahoe sharing check-config --config sharing.yaml
    """
    from .config import ConfigError, load_config

    problems, warnings = [], []
    cfg = None
    try:
        cfg = load_config(config)
        warnings = list(cfg.warnings)
    except ConfigError as e:
        text = str(e)
        problems += [line[4:] for line in text.splitlines()[1:]] if "problems" in text.splitlines()[0] else [text]
    if cfg is not None:
        from .recipients import open_recipients
        from .store import StoreError

        try:
            recs = open_recipients(cfg)
            problems += recs.problems()
            granted = [(r.name, s) for r in (recs.all() if not recs.problems() else []) for s in r.shares]
            for name, s in granted:
                if s != "*" and cfg.share(s) is None:
                    warnings.append(f"recipient {name!r} is granted share {s!r}, which the config does not serve")
        except StoreError as e:
            problems.append(str(e))
    for w in warnings:
        typer.echo(f"warning: {w}", err=True)
    for p in problems:
        typer.echo(f"problem: {p}", err=True)
    if problems:
        typer.echo(f"{config}: {len(problems)} problem(s), {len(warnings)} warning(s)", err=True)
        raise typer.Exit(1)
    typer.echo(f"{config}: OK ({len(warnings)} warning(s))", err=True)


@app.command("audit", cls=Command)
def audit(config: Optional[str] = typer.Option(None, "--config", "-c", metavar="FILE",
                                               help="read the audit log this config writes"),
          log: list[str] = typer.Option([], "--log", metavar="FILE",
                                        help="an audit log file (its rotated copies are read too); repeat the flag "
                                             "for each replica's file"),
          table: Optional[str] = typer.Option(None, "--table", metavar="TABLE",
                                              help="only this table: share.schema.table (or a part of it)"),
          recipient: Optional[str] = typer.Option(None, "--recipient", metavar="NAME", help="only this recipient"),
          since: Optional[str] = typer.Option(None, "--since", metavar="WHEN",
                                              help="from this time: ISO 8601, or an age such as 7d, 24h, 30m"),
          until: Optional[str] = typer.Option(None, "--until", metavar="WHEN", help="up to this time (as --since)"),
          by: str = typer.Option("recipient", "--by", metavar="GROUPING",
                                 help="rows per: recipient, table, recipient-table, day, recipient-day, or none "
                                      "(the records themselves)"),
          plot: bool = typer.Option(False, "--plot", help="also draw bytes per day per recipient in the terminal"),
          plot_out: Optional[str] = typer.Option(None, "--plot-out", metavar="FILE",
                                                 help="save the plot to FILE (text; .html keeps its colours)"),
          as_json: bool = typer.Option(False, "--json", help="print one JSON document on stdout")):
    """Answer questions from the audit log: who read what, when, how much.

    \b
    Examples:
      tahoe sharing audit --config sharing.yaml --table sales.default.orders --since 7d --by recipient
      tahoe sharing audit --config sharing.yaml --by recipient-day --plot
      tahoe sharing audit --log a/sharing-audit.jsonl --log b/sharing-audit.jsonl --by day --plot-out bytes.html
      tahoe sharing audit --config sharing.yaml --recipient analyst --by none --json
    """
    from .audit_report import report

    paths = list(log)
    if config:
        cfg = _load(config)
        if cfg.audit.path and cfg.audit.path != "-":
            paths.append(cfg.audit.path)
    if not paths:
        typer.echo("error: give --config (whose audit.path is a file) or --log FILE", err=True)
        raise typer.Exit(2)
    try:
        report(paths, table=table, recipient=recipient, since=since, until=until, by=by, plot=plot,
               plot_out=plot_out, as_json=as_json)
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2)


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
