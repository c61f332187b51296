"""The README's main job: the demo pipeline runs end to end and the recipient reads what was written."""

from __future__ import annotations

import pytest

from tahoe.demo import run_demo
from tahoe.sharing.official_client import ensure_env
from tahoe.table import Table
from tests.sharing.conftest import RECIPIENT_ENV


@pytest.mark.xdist_group("servers")
def test_demo_pipeline(tmp_path, capsys):
    """As `make demo` runs it: the recipient reads with the official client from its own environment."""
    run_demo(str(tmp_path / "demo"), ensure_env(str(RECIPIENT_ENV)))
    out = capsys.readouterr().out
    assert "official delta-sharing 1.4.2 client, own environment" in out
    assert "identical" in out and "DIFFERENT" not in out
    t = Table(str(tmp_path / "demo" / "orders"))
    assert t.version == 3
    assert [h["operation"] for h in t.history()] == ["DELETE", "WRITE", "WRITE", "WRITE"]   # a first save is a WRITE (delta-spark, delta-rs)
    assert (tmp_path / "demo" / "analyst.share").exists()
