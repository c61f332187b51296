"""Column names written as Spark SQL writes them: a name part in backticks, and a dotted path
(`` `a.b`.c ``) split into its parts. Every layer quotes and splits names through here.

Pure: no I/O.
"""

from __future__ import annotations

__all__ = ["quote_identifier", "quote_if_needed", "split_column_path"]


def quote_identifier(name: str) -> str:
    """`name` in backticks, a backtick inside it doubled (`` a`b `` → ```` `a``b` ````)."""
    return "`" + name.replace("`", "``") + "`"


def quote_if_needed(part: str) -> str:
    """`part` as one part of a dotted path: in backticks only when it holds a dot or a backtick."""
    return quote_identifier(part) if ("." in part or "`" in part) else part


def split_column_path(text: str) -> list[str] | None:
    """`a.b` → ["a", "b"]; backticks quote a part holding dots (`` `a.b`.c `` → ["a.b", "c"], a
    doubled backtick is one). None when `text` is not a path: an unclosed backtick or an empty
    part. Parts are kept as written (no whitespace is stripped)."""
    parts: list[str] = []
    cur: list[str] = []
    quoted, i, n = False, 0, len(text)
    while i < n:
        c = text[i]
        if quoted:
            if c == "`":
                if i + 1 < n and text[i + 1] == "`":
                    cur.append("`")
                    i += 1
                else:
                    quoted = False
            else:
                cur.append(c)
        elif c == "`":
            quoted = True
        elif c == ".":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    if quoted or any(not p for p in parts):
        return None
    return parts
