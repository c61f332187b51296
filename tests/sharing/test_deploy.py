"""The container recipe (tahoe/sharing/deploy: Dockerfile, compose.yaml, nginx.conf, sharing.yaml)
checked as far as this machine allows — no container engine runs here:

* compose.yaml is a well-formed compose file: the services, each replica's command identical to
  the image's CMD, the health check on /healthz, the secret the config reads;
* the Dockerfile's command is the one tests/sharing/test_replicas.py runs per replica
  (`python -m tahoe sharing serve --config FILE --port PORT`), and it copies what the package build
  needs (setup.py's and pyproject's inputs);
* nginx.conf passes `nginx -t` (Debian's nginx, with the compose hostnames pointed at 127.0.0.1
  and TLS off), logs no query string, and sets the very proxy headers the replica tests' nginx does;
* the example sharing.yaml loads (its secret file made here).
Where a Docker engine answers (`docker info`), the compose file is also checked by `docker compose
config` and the image is built."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from tahoe.sharing.config import parse_config
from tests.sharing.services import NGINX_CONF, REPO, apt_install

DEPLOY = REPO / "tahoe" / "sharing" / "deploy"


def _cmd(dockerfile: str) -> list[str]:
    line = next(x for x in dockerfile.splitlines() if x.startswith("CMD "))
    return json.loads(line[4:])


def test_compose_file_and_dockerfile_agree_with_the_tested_commands():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    cmd = _cmd(dockerfile)
    assert set(compose["services"]) == {"postgres", "sharing-a", "sharing-b", "proxy"}
    for name in ("sharing-a", "sharing-b"):
        svc = compose["services"][name]
        assert svc["command"] == cmd
        assert svc["environment"]["TAHOE_SHARING_REPLICA_ID"] == name
        assert svc["secrets"] == ["signing_key"] and svc["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert svc["build"]["dockerfile"] == "tahoe/sharing/deploy/Dockerfile"
        assert (DEPLOY / svc["build"]["context"]).resolve() == REPO
    assert compose["secrets"]["signing_key"] == {"environment": "SHARING_SIGNING_KEY"}
    # the replica command tests/sharing/services.start_replica runs: python -m tahoe sharing serve --config F --port P
    assert cmd[:5] == ["python", "-m", "tahoe", "sharing", "serve"]
    assert cmd[cmd.index("--config") + 1] == "/etc/tahoe/sharing.yaml" and cmd[cmd.index("--port") + 1] == "8080"
    services_src = (REPO / "tests" / "sharing" / "services.py").read_text()
    assert '"-m", "tahoe", "sharing", "serve", "--config", config, "--port"' in services_src
    assert "/healthz" in next(x for x in dockerfile.splitlines() if x.startswith("HEALTHCHECK"))
    # what the image copies is what the package build reads
    copied = set(next(x for x in dockerfile.splitlines() if x.startswith("COPY pyproject")).split()[1:-1])
    for f in copied:
        assert (REPO / f).exists(), f
    assert {"pyproject.toml", "setup.py", "README.md"} <= copied


def test_nginx_conf_passes_nginx_t_and_matches_the_tested_proxy(tmp_path):
    text = (DEPLOY / "nginx.conf").read_text()
    directives = lambda t: {re.sub(r"\s+", " ", x.strip()) for x in t.splitlines()  # noqa: E731
                            if x.strip().startswith(("proxy_", "log_format", "'$request_time"))
                            and not x.strip().startswith("proxy_temp_path")}
    assert directives(text) == directives(NGINX_CONF.replace("{{", "{").replace("}}", "}"))
    assert "$request " not in text and "$args" not in text and "$request_uri" not in text
    local = text.replace("sharing-a:8080", "127.0.0.1:1").replace("sharing-b:8080", "127.0.0.1:2")
    local = re.sub(r"listen 443 ssl;", "listen 127.0.0.1:1;", local)
    local = re.sub(r"\s*ssl_certificate\S* [^;]+;", "", local)
    local = local.replace("/var/log/nginx/access.log", str(tmp_path / "access.log"))
    (tmp_path / "nginx.conf").write_text(local)
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(binary).exists():
        apt_install("nginx-light")
    r = subprocess.run([binary, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"),
                        "-g", f"pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "syntax is ok" in r.stderr, r.stderr


def test_example_config_loads(tmp_path):
    raw = yaml.safe_load((DEPLOY / "sharing.yaml").read_text())
    assert raw["signingKeyFile"] == "/run/secrets/signing_key" and raw["replicas"] == 2
    key = tmp_path / "signing_key"
    key.write_text("k" * 64)
    cfg = parse_config({**raw, "signingKeyFile": str(key)}, str(tmp_path / "sharing.yaml"))
    assert cfg.replicas == 2 and cfg.store_url.startswith("postgresql://") and cfg.signing_key == b"k" * 64
    assert cfg.audit.path == "/var/log/tahoe/sharing-audit.jsonl" and cfg.warnings == []


def test_with_a_container_engine_the_image_builds():
    """Runs `docker compose config` and `docker build` where an engine answers; this machine has
    none (the README says how the recipe is checked here), so there the checks above are all."""
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "info"], capture_output=True).returncode != 0:
        return
    r = subprocess.run([docker, "compose", "-f", str(DEPLOY / "compose.yaml"), "config", "-q"],
                       capture_output=True, text=True, env={"SHARING_SIGNING_KEY": "x"})
    assert r.returncode == 0, r.stderr
    r = subprocess.run([docker, "build", "-f", str(DEPLOY / "Dockerfile"), "-t", "tahoe-sharing-test", str(REPO)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
