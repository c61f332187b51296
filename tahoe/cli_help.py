"""How tahoe's commands describe themselves in `--help` (`tahoe`, `tahoe sharing`).

Owns `Command` (the click command class every tahoe command uses) and `typer_app(...)`: plain-text
help (no Rich panels, the same on a terminal and in a pipe, stable across typer versions) in which
every argument and option shows its metavar (`PATH`, `N`, `KEY=VALUE`) and its description —
never a bare type placeholder such as `<str>` or `<bool>` — and the command's examples (an
`Examples:` paragraph of its docstring, kept verbatim).
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand

__all__ = ["Command", "typer_app"]


class Command(TyperCommand):
    """A command whose help lists arguments by metavar and options by their own help record."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for p in self.get_params(ctx):
            if p.param_type_name == "argument":
                name = p.metavar or p.name.upper()
                pieces.append(name if p.required else f"[{name}]")
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args, opts = [], []
        for p in self.get_params(ctx):
            if getattr(p, "hidden", False):
                continue
            if p.param_type_name == "argument":
                extra = "" if p.required else f"  [default: {p.default}]" if p.default is not None else ""
                args.append((p.metavar or p.name.upper(), (getattr(p, "help", None) or "") + extra))
            else:
                rec = p.get_help_record(ctx)
                if rec is not None:
                    opts.append(rec)
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        if opts:
            with formatter.section("Options"):
                formatter.write_dl(opts)


def typer_app(**kwargs: Any) -> typer.Typer:
    """A Typer app with tahoe's help conventions (its commands use `Command`)."""
    return typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None, **kwargs)
