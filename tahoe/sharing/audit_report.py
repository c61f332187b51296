"""`tahoe sharing audit`: the provider's questions answered from the audit log (`audit`).

Owns the selection (table — `share.schema.table` or a part of it —, recipient, a time window given
as ISO 8601 or an age such as `7d`), the groupings (per recipient, table, recipient and table,
UTC day, recipient and day, or the records themselves) with requests, files, bytes, errors and the
last time seen, and their display: a rich table, or JSON; with `--plot`, bytes per day per
recipient as a bar chart drawn by plotext (in the terminal, or saved to a file).
Only API calls count as requests; file downloads (`get_file`/`head_file`) add their bytes.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from typing import Iterable, Optional

from .audit import read_records

__all__ = ["report", "parse_when", "summarize"]

GROUPINGS = ("recipient", "table", "recipient-table", "day", "recipient-day", "none")
_FILE_OPS = ("get_file", "head_file")


def parse_when(v: str, now: Optional[datetime] = None) -> datetime:
    """An ISO 8601 time (UTC when it names no zone) or an age (`7d`, `24h`, `30m`, `90s`) before now."""
    now = now or datetime.now(timezone.utc)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([dhms])\s*", v)
    if m:
        n, unit = float(m.group(1)), m.group(2)
        unit_name = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}[unit]
        return now - timedelta(**{unit_name: n})
    try:
        t = datetime.fromisoformat(v.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not a time: {v!r} (ISO 8601, or an age such as 7d, 24h, 30m)") from None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _time(rec: dict) -> Optional[datetime]:
    try:
        return datetime.fromisoformat(str(rec.get("time")).replace("Z", "+00:00"))
    except ValueError:
        return None


def _table_name(rec: dict) -> Optional[str]:
    if not rec.get("table"):
        return None
    return f"{rec.get('share')}.{rec.get('schema')}.{rec.get('table')}"


def select(records: Iterable[dict], table: Optional[str] = None, recipient: Optional[str] = None,
           since: Optional[datetime] = None, until: Optional[datetime] = None) -> list[dict]:
    out = []
    want = table.lower().split(".") if table else None
    for r in records:
        t = _time(r)
        if t is None or (since and t < since) or (until and t > until):
            continue
        if recipient is not None and r.get("recipient") != recipient:
            continue
        if want is not None:
            name = _table_name(r)
            if name is None or name.lower().split(".")[-len(want):] != want:
                continue
        out.append(r)
    return out


def summarize(records: list[dict], by: str) -> list[dict]:
    """Rows of `records` grouped `by` (see GROUPINGS): requests (API calls), downloads (file URL
    redemptions), files (file lines answered), bytes (response bytes, file bytes included),
    errors (status >= 400), first and last time."""
    if by not in GROUPINGS:
        raise ValueError(f"--by must be one of {', '.join(GROUPINGS)}, got {by!r}")
    groups: dict[tuple, dict] = {}
    for r in records:
        t = _time(r)
        day = t.strftime("%Y-%m-%d")
        key = {"recipient": (r.get("recipient"),), "table": (_table_name(r),),
               "recipient-table": (r.get("recipient"), _table_name(r)), "day": (day,),
               "recipient-day": (r.get("recipient"), day), "none": (id(r),)}[by]
        g = groups.get(key)
        if g is None:
            g = groups[key] = {"requests": 0, "downloads": 0, "files": 0, "bytes": 0, "errors": 0,
                               "first": r.get("time"), "last": r.get("time"), "record": r}
        if r.get("operation") in _FILE_OPS:
            g["downloads"] += 1
        else:
            g["requests"] += 1
        g["files"] += int(r.get("files") or 0)
        g["bytes"] += int(r.get("bytes") or 0)
        g["errors"] += 1 if int(r.get("status") or 0) >= 400 else 0
        g["first"] = min(g["first"], r.get("time"))
        g["last"] = max(g["last"], r.get("time"))
    rows = []
    names = {"recipient": ["recipient"], "table": ["table"], "recipient-table": ["recipient", "table"],
             "day": ["day"], "recipient-day": ["recipient", "day"], "none": []}[by]
    for key, g in sorted(groups.items(), key=lambda kv: [str(x) for x in kv[0]]):
        if by == "none":
            rows.append(g["record"])
            continue
        row = {n: key[i] for i, n in enumerate(names)}
        row.update({k: g[k] for k in ("requests", "downloads", "files", "bytes", "errors", "first", "last")})
        rows.append(row)
    if by == "none":
        rows.sort(key=lambda r: r.get("time") or "")
    return rows


def _bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _plot(records: list[dict], out: Optional[str]) -> None:
    """Bytes per UTC day per recipient as grouped bars (plotext)."""
    import plotext as plt

    per = defaultdict(lambda: defaultdict(int))
    for r in records:
        per[r.get("recipient") or "?"][_time(r).strftime("%Y-%m-%d")] += int(r.get("bytes") or 0)
    days = sorted({d for v in per.values() for d in v})
    names = sorted(per)
    if not days:
        return
    plt.clear_figure()
    if not sys.stdout.isatty() and not (out or "").endswith(".html"):
        plt.theme("clear")     # no colour codes in a pipe or a text file
    scale = max((b for v in per.values() for b in v.values()), default=0)
    unit, div = next(((u, d) for u, d in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)) if scale >= d), ("B", 1))
    plt.multiple_bar(days, [[per[n].get(d, 0) / div for d in days] for n in names], labels=names)
    plt.title(f"bytes per day per recipient ({unit})")
    plt.xlabel("day (UTC)")
    plt.plotsize(100, 25)
    if out:
        plt.save_fig(out, keep_colors=out.endswith(".html"))
        sys.stderr.write(f"wrote the plot to {out}\n")
    else:
        plt.show()


def report(paths: list[str], table: Optional[str] = None, recipient: Optional[str] = None, since: Optional[str] = None,
           until: Optional[str] = None, by: str = "recipient", plot: bool = False, plot_out: Optional[str] = None,
           as_json: bool = False) -> list[dict]:
    skipped: list = []
    recs = select(read_records(paths, skipped), table, recipient, parse_when(since) if since else None,
                  parse_when(until) if until else None)
    rows = summarize(recs, by)
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2, default=str) + "\n")
    else:
        from rich.console import Console
        from rich.table import Table as RichTable

        what = [f"table {table}"] if table else []
        what += [f"recipient {recipient}"] if recipient else []
        what += [f"since {since}"] if since else []
        what += [f"until {until}"] if until else []
        title = f"{len(recs)} audit records" + (f" ({', '.join(what)})" if what else "") + f", by {by}"
        t = RichTable(title=title)
        if by == "none":
            cols = ("time", "recipient", "operation", "table", "version", "files", "bytes", "status", "client")
            for c in cols:
                t.add_column(c, justify="right" if c in ("version", "files", "bytes", "status") else "left")
            for r in rows:
                t.add_row(*[str(_table_name(r) if c == "table" else r.get(c) if r.get(c) is not None else "-")
                            for c in cols])
        else:
            keys = [k for k in rows[0] if k not in ("requests", "downloads", "files", "bytes", "errors", "first",
                                                    "last")] if rows else by.split("-")
            for k in keys:
                t.add_column(k)
            for c in ("requests", "downloads", "files", "bytes", "errors", "last seen"):
                t.add_column(c, justify="right" if c != "last seen" else "left")
            for r in rows:
                t.add_row(*[str(r[k]) if r[k] is not None else "-" for k in keys], str(r["requests"]),
                          str(r["downloads"]), str(r["files"]), _bytes(r["bytes"]), str(r["errors"]), str(r["last"]))
        Console(width=max(120, Console().width)).print(t)
        if skipped:
            sys.stderr.write(f"skipped {len(skipped)} malformed line(s) (first in {skipped[0][0]})\n")
    if plot or plot_out:
        _plot(recs, plot_out)
    return rows
