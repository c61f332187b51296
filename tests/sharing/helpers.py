"""Comparing what a sharing client returned (pandas) with the oracle `tahoe.Table(path).to_arrow()`."""

from __future__ import annotations

import math
from datetime import date, datetime, timezone
from decimal import Decimal

import numpy as np
import pandas as pd


def _norm(v):
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if v is pd.NaT:
        return None
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, pd.Timestamp):
        v = v.to_pydatetime()
    if isinstance(v, datetime):
        if v.tzinfo is not None:
            v = v.astimezone(timezone.utc).replace(tzinfo=None)
        return ("ts", v.isoformat())
    if isinstance(v, date):
        return ("d", v.isoformat())
    if isinstance(v, Decimal):
        return ("dec", format(v.normalize(), "f") if v == v else "nan")
    if isinstance(v, float):
        return round(v, 9)
    if isinstance(v, bytes):
        return ("b", v.hex())
    if isinstance(v, dict):
        return tuple(sorted((k, _norm(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple, np.ndarray)):
        items = list(v)
        if items and all(isinstance(x, tuple) and len(x) == 2 for x in items):
            return ("map", tuple(sorted((repr(_norm(k)), _norm(x)) for k, x in items)))
        return tuple(_norm(x) for x in items)
    return v


def rows_of_pandas(df: pd.DataFrame, columns=None) -> list:
    cols = list(columns or df.columns)
    out = []
    for rec in df[cols].itertuples(index=False, name=None):
        out.append(tuple(_norm(x) for x in rec))
    return sorted(out, key=repr)


def rows_of_arrow(t, columns=None) -> list:
    cols = list(columns or t.column_names)
    return sorted((tuple(_norm(r[c]) for c in cols) for r in t.to_pylist()), key=repr)


def assert_same_rows(df: pd.DataFrame, oracle, context: str = "") -> None:
    assert sorted(df.columns) == sorted(oracle.column_names), f"{context}: {list(df.columns)} vs {oracle.column_names}"
    a = rows_of_pandas(df, oracle.column_names)
    b = rows_of_arrow(oracle)
    assert len(a) == len(b), f"{context}: {len(a)} rows vs {len(b)}"
    assert a == b, f"{context}: rows differ; first: {[x for x in a if x not in b][:3]} vs {[x for x in b if x not in a][:3]}"
