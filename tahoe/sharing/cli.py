"""The `tahoe sharing` commands: run the server and manage recipients.

    tahoe sharing serve --config FILE [--host H] [--port P]
    tahoe sharing recipient add NAME --share S [--share S2] [--expires-in-days N] --config FILE
    tahoe sharing recipient list|revoke NAME|rotate NAME --config FILE

`add` and `rotate` print a profile (shareCredentialsVersion 1) holding the new token; the token is
stored only as its SHA-256.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Delta Sharing server and recipients.")
recipient_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Manage recipients.")
app.add_typer(recipient_app, name="recipient")


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


@app.command()
def serve(config: str = typer.Option(..., "--config", "-c", help="sharing server YAML"),
          host: Optional[str] = typer.Option(None, "--host"),
          port: Optional[int] = typer.Option(None, "--port")):
    """Run the sharing server."""
    from .server import serve as run

    run(_load(config), host, port)


@recipient_app.command("add")
def add(name: str, share: list[str] = typer.Option(..., "--share", "-s", help="share to grant (repeatable)"),
        expires_in_days: Optional[float] = typer.Option(None, "--expires-in-days"),
        config: str = typer.Option(..., "--config", "-c")):
    """Create a recipient; print its profile JSON."""
    from .config import profile_for

    cfg = _load(config)
    unknown = [s for s in share if s != "*" and cfg.share(s) is None]
    if unknown:
        typer.echo(f"error: no share named {', '.join(unknown)} in {config}", err=True)
        raise typer.Exit(1)
    r, token = _guard(lambda: _store(cfg).add(name, share, expires_in_days))
    sys.stdout.write(json.dumps(profile_for(cfg, token, r.expires_at), indent=2) + "\n")


@recipient_app.command("list")
def list_(config: str = typer.Option(..., "--config", "-c"), as_json: bool = typer.Option(False, "--json")):
    """Recipients with their shares, expiry and status (never tokens)."""
    cfg = _load(config)
    recs = _store(cfg).all()
    rows = [{"name": r.name, "shares": r.shares, "revoked": r.revoked,
             "expiresAt": None if r.expires_at is None else
             datetime.fromtimestamp(r.expires_at / 1000, tz=timezone.utc).isoformat(),
             "active": r.active()} for r in recs]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    for r in rows:
        typer.echo(f"{r['name']}\tshares={','.join(r['shares'])}\texpires={r['expiresAt'] or '-'}\t"
                   f"{'revoked' if r['revoked'] else ('active' if r['active'] else 'expired')}")


@recipient_app.command("revoke")
def revoke(name: str, config: str = typer.Option(..., "--config", "-c")):
    """Revoke a recipient's token at once."""
    cfg = _load(config)
    _guard(lambda: _store(cfg).revoke(name))
    typer.echo(f"revoked {name}", err=True)


@recipient_app.command("rotate")
def rotate(name: str, expires_in_days: Optional[float] = typer.Option(None, "--expires-in-days"),
           config: str = typer.Option(..., "--config", "-c")):
    """Issue a new token (the old one stops working); print the new profile."""
    from .config import profile_for

    cfg = _load(config)
    r, token = _guard(lambda: _store(cfg).rotate(name, expires_in_days))
    sys.stdout.write(json.dumps(profile_for(cfg, token, r.expires_at), indent=2) + "\n")
