"""The skip guard (tests/skip_guard.py) on real pytest sessions run in a subprocess: a skip for
another reason than the conformance tables' absence fails the session; the conformance reason
passes outside CI and fails with CI=true; a session without skips passes either way. Oracle: the
exit codes and summaries of those sessions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.skip_guard import ALLOWED_REASON_START

REPO = Path(__file__).resolve().parent.parent


def _session(tmp_path: Path, body: str, ci: bool) -> subprocess.CompletedProcess:
    (tmp_path / "test_x.py").write_text("import pytest\n\n" + body)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    env["PYTHONPATH"] = str(REPO)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"   # only the guard: a quick session
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.skip_guard",
                           "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path))


CONFORMANCE_SKIP = f"def test_a():\n    pytest.skip({ALLOWED_REASON_START + ' (here)'!r})\n\ndef test_b():\n    pass\n"
OTHER_SKIP = "def test_a():\n    pytest.skip('pyiceberg is missing')\n\ndef test_b():\n    pass\n"
SKIPIF = "@pytest.mark.skipif(True, reason='not on this platform')\ndef test_a():\n    pass\n"
NO_SKIP = "def test_a():\n    pass\n"


@pytest.mark.parametrize("body, ci, ok", [
    (NO_SKIP, False, True), (NO_SKIP, True, True),
    (CONFORMANCE_SKIP, False, True), (CONFORMANCE_SKIP, True, False),
    (OTHER_SKIP, False, False), (OTHER_SKIP, True, False),
    (SKIPIF, False, False),
], ids=["none", "none-ci", "conformance", "conformance-ci", "other", "other-ci", "skipif"])
def test_the_skip_guard_fails_sessions_with_forbidden_skips(tmp_path, body, ci, ok):
    r = _session(tmp_path, body, ci)
    assert (r.returncode == 0) is ok, r.stdout + r.stderr
    if not ok:
        assert "forbidden skips" in r.stdout and "test_x.py::test_a" in r.stdout
