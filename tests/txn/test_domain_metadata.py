"""User metadata domains (spec "Domain Metadata"): set, replace, remove (reconciliation: the latest
action per domain wins, a removed one is gone), `delta.*` domains reserved, concurrent changes to
the same domain conflict while different domains commit side by side. Oracles: the committed JSON
lines (read back as text) and hand-derived expected states."""

from __future__ import annotations

import json

import pytest

from tahoe.errors import ConcurrentModificationException, InvalidTableOperationError
from tahoe.log import DeltaLog
from tahoe.protocol.actions import DomainMetadata
from tahoe.txn import Transaction
from tests.txn._helpers import commit_actions


@pytest.fixture
def dlog(table) -> DeltaLog:
    from tahoe import Table

    Table(table).add_feature("domainMetadata")
    return DeltaLog.for_table(table)


def _set(dlog, domain, conf):
    t = Transaction(dlog, "SET DOMAIN")
    t.set_domain_metadata(DomainMetadata(domain, conf))
    return t.commit()


def test_set_replace_remove(dlog):
    _set(dlog, "app.a", '{"x":1}')
    _set(dlog, "app.b", '{"y":2}')
    v = _set(dlog, "app.a", '{"x":3}')
    assert {k: d.configuration for k, d in dlog.snapshot().domain_metadata.items()} == \
        {"app.a": '{"x":3}', "app.b": '{"y":2}'}
    t = Transaction(dlog, "REMOVE DOMAIN")
    t.remove_domain_metadata("app.a")
    v2 = t.commit()
    line = [a["domainMetadata"] for a in commit_actions(dlog.table_root, v2) if "domainMetadata" in a]
    assert line == [{"domain": "app.a", "configuration": '{"x":3}', "removed": True}]
    assert set(dlog.snapshot().domain_metadata) == {"app.b"}
    assert v2 == v + 1
    with pytest.raises(InvalidTableOperationError, match="no such domain"):
        Transaction(dlog, "REMOVE DOMAIN").remove_domain_metadata("app.a")


@pytest.mark.parametrize("domain", ["delta.rowTracking", "delta.clustering", "DELTA.mine"])
def test_delta_domains_reserved(dlog, domain):
    t = Transaction(dlog, "SET DOMAIN")
    with pytest.raises(InvalidTableOperationError, match="reserved"):
        t.set_domain_metadata(DomainMetadata(domain, "{}"))
    with pytest.raises(InvalidTableOperationError, match="reserved"):
        t.remove_domain_metadata(domain)


def test_concurrent_same_domain_conflicts_other_domains_do_not(dlog):
    a = Transaction(dlog, "SET DOMAIN")
    b = Transaction(dlog, "SET DOMAIN")
    c = Transaction(dlog, "SET DOMAIN")
    a.set_domain_metadata(DomainMetadata("app.same", '{"by":"a"}'))
    b.set_domain_metadata(DomainMetadata("app.same", '{"by":"b"}'))
    c.set_domain_metadata(DomainMetadata("app.other", '{"by":"c"}'))
    a.commit()
    with pytest.raises(ConcurrentModificationException, match="app.same"):
        b.commit()
    c.commit()
    got = {k: json.loads(d.configuration) for k, d in dlog.snapshot().domain_metadata.items()}
    assert got == {"app.same": {"by": "a"}, "app.other": {"by": "c"}}
