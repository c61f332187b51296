"""A skip never hides a failure: a pytest plugin (loaded by tests/conftest.py) that fails the
session when a test was skipped for anything but "the conformance tables are not on this machine"
— and, in CI (`CI=true`), when any test was skipped at all. The skipped tests and their reasons
are listed at the end of the run (pytest's `-ra` summary lists them too).

Allowed outside CI: the `NO_GOLDEN` reason of tests/conftest.py's `conformance` marker. There are
no xfails in the suite; one would count as a skip here."""

from __future__ import annotations

import os

import pytest

__all__ = ["ALLOWED_REASON_START", "SkipGuard", "in_ci", "install"]

# every conformance skip's reason starts so (tests/conftest.py: NO_GOLDEN)
ALLOWED_REASON_START = "the Delta conformance tables are not here"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _reason(report) -> str:
    if getattr(report, "wasxfail", None) is not None:
        return f"xfail: {report.wasxfail}"
    lr = report.longrepr
    text = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr)
    return text[len("Skipped: "):] if text.startswith("Skipped: ") else text


class SkipGuard:
    def __init__(self) -> None:
        self.forbidden: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report) -> None:
        if not report.skipped:
            return
        reason = _reason(report)
        if in_ci() or not reason.startswith(ALLOWED_REASON_START):
            self.forbidden.append((report.nodeid, reason))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus) -> None:
        if hasattr(session.config, "workerinput"):   # an xdist worker: the controller sees every report
            return
        if self.forbidden and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.forbidden:
            return
        why = "CI=true: no test may be skipped" if in_ci() else \
            "only the conformance tables' absence may skip a test"
        terminalreporter.section("forbidden skips", sep="=", red=True, bold=True)
        terminalreporter.line(f"{len(self.forbidden)} test(s) skipped, which fails the run ({why}):", red=True)
        for nodeid, reason in self.forbidden:
            terminalreporter.line(f"  {nodeid}: {reason}")


def install(config) -> None:
    """Register the guard (once) on a pytest config."""
    if not config.pluginmanager.has_plugin("tahoe-skip-guard"):
        config.pluginmanager.register(SkipGuard(), "tahoe-skip-guard")


def pytest_configure(config) -> None:   # when loaded with `-p tests.skip_guard`
    install(config)
