"""The README's main job: the demo pipeline runs end to end and the recipient reads what was written."""

from __future__ import annotations

import pytest

from tahoe.demo import run_demo
from tahoe.sharing.official_client import ensure_env
from tahoe.table import Table
from tests.sharing.conftest import RECIPIENT_ENV


@pytest.mark.xdist_group("servers")
def test_demo_pipeline(tmp_path, capsys):
    """As `make demo` runs it (Spark ingest, MERGE / UPDATE / DELETE with deletion vectors): the
    recipient reads with the official client from its own environment."""
    run_demo(str(tmp_path / "demo"), ensure_env(str(RECIPIENT_ENV)))
    out = capsys.readouterr().out
    assert "official delta-sharing 1.4.2 client, own environment" in out
    assert "identical" in out and "DIFFERENT" not in out
    t = Table(str(tmp_path / "demo" / "orders"))
    assert t.version == 4
    # delta-spark's operation names; a first save is a WRITE (delta-spark, delta-rs)
    assert [h["operation"] for h in t.history()] == ["DELETE", "UPDATE", "MERGE", "WRITE", "WRITE"]
    # hand-derived: the MERGE batch holds 20 existing orders and 20 new ones
    assert "updated 20, inserted 20 rows" in out
    # the final rows, derived in plain Python from the demo's data and its three statements
    rows = {}
    for i in range(900):
        rows[i] = ("FR", "DE", "US")[i % 3] if i < 600 else "JP", round(10 + (i * 7.3) % 90, 2)
    for i in list(range(102, 122)) + list(range(2000, 2020)):
        rows[i] = (("FR", "DE", "US")[(i - 102) % 3] if i < 2000 else "DE"), round(10 + (i * 7.3) % 90, 2) + 1000
    rows = {i: (c, a * 0.9 if c == "US" and a > 90 else a) for i, (c, a) in rows.items()}
    rows = {i: ca for i, ca in rows.items() if not ca[1] < 20}
    got = t.to_arrow().select(["order_id", "country", "amount"]).to_pylist()
    assert sorted((r["order_id"], r["country"]) for r in got) == sorted((i, c) for i, (c, _) in rows.items())
    assert sorted(r["amount"] for r in got) == pytest.approx(sorted(a for _, a in rows.values()))
    assert (tmp_path / "demo" / "analyst.share").exists()
