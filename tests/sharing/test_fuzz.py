"""A bounded schemathesis run over the served `/openapi.json`: no generated request (with a valid
token, and without) may produce a 5xx, and no error body may name where the tables are stored."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings


def test_no_server_errors(server):
    auth = {"Authorization": f"Bearer {server.tokens['alice']}"}
    schema = schemathesis.openapi.from_url(server.base + "/openapi.json", headers=auth)   # docs need a token
    failures = []
    ops = [r.ok() for r in schema.get_all_operations()]
    assert len(ops) >= 10
    for op in ops:
        @settings(max_examples=30, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=op.as_strategy())
        def run(case):
            for headers in (auth, {}):
                resp = case.call(base_url=server.base, headers={**(case.headers or {}), **headers}, timeout=30)
                leaks = resp.status_code >= 400 and str(server.dir) in resp.text
                if resp.status_code >= 500 or leaks:
                    failures.append((op.label, case.path_parameters, case.query, case.body, resp.status_code,
                                     resp.text[:200]))
        run()
    assert not failures, failures[:5]
