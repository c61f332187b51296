"""Real parts the production tests of the sharing server start on 127.0.0.1: a PostgreSQL server
(Debian's postgresql package) and an nginx reverse proxy (Debian's nginx-light) in front of server
replicas — each installed with apt-get when the machine does not have it (CI runs from a fresh
clone) — and server replicas as processes (`python -m tahoe sharing serve`).

nginx's access log is written without query strings (`$uri`, never `$request`): file URLs carry
their signature in the query, and no log may hold one (the README's recipe says the same)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]


def apt_install(*packages: str) -> None:
    """Install Debian packages (root, as on CI); a clear error where that is impossible."""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise RuntimeError(f"{', '.join(packages)} missing and cannot be installed here (needs root and apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    r = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *packages], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:   # the package lists may be missing on a fresh machine
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=True)
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *packages], env=env,
                       capture_output=True, check=True)


def free_port() -> int:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_http(url: str, seconds: float = 120, proc: subprocess.Popen | None = None) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{url}: the process exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {seconds} s")


# --- PostgreSQL -------------------------------------------------------------------------------------------
def _pg_bin() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        apt_install("postgresql")
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1])


@dataclass
class Postgres:
    url: str
    dir: str
    bin: str
    user_cmd: list

    def stop(self) -> None:
        subprocess.run(self.user_cmd + [f"{self.bin}/pg_ctl", "-D", f"{self.dir}/data", "-m", "fast", "-w", "stop"],
                       capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def start_postgres() -> Postgres:
    """A fresh PostgreSQL cluster on a free port of 127.0.0.1 (trust authentication for user
    `tahoe`); run as the `postgres` system user when this process is root (initdb refuses root)."""
    pg = _pg_bin()
    d = tempfile.mkdtemp(prefix="tahoe-pg-")
    user_cmd: list = []
    if os.geteuid() == 0:
        import pwd

        pw = pwd.getpwnam("postgres")
        os.chown(d, pw.pw_uid, pw.pw_gid)
        user_cmd = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    subprocess.run(user_cmd + [f"{pg}/initdb", "-D", f"{d}/data", "-A", "trust", "-U", "tahoe", "--no-sync"],
                   capture_output=True, check=True)
    r = subprocess.run(user_cmd + [f"{pg}/pg_ctl", "-D", f"{d}/data", "-l", f"{d}/log", "-w", "-t", "60", "-o",
                                   f"-p {port} -k {d} -c listen_addresses=127.0.0.1 -c fsync=off", "start"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"PostgreSQL did not start: {r.stdout} {r.stderr}")
    return Postgres(f"postgresql://tahoe@127.0.0.1:{port}/postgres", d, pg, user_cmd)


# --- nginx --------------------------------------------------------------------------------------------------
NGINX_CONF = """
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    # no query strings in the log: file URLs carry their signature there
    log_format noquery '$remote_addr [$time_local] "$request_method $uri" $status $body_bytes_sent '
                       '$request_time "$http_user_agent" $upstream_addr';
    access_log {dir}/access.log noquery;
    upstream sharing {{
{servers}
        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://sharing;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Request-Id $request_id;
            proxy_buffering off;
            proxy_read_timeout 120s;
        }}
    }}
}}
"""


@dataclass
class Nginx:
    base: str
    dir: str
    proc: subprocess.Popen

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def access_log(self) -> str:
        return Path(self.dir, "access.log").read_text()


def start_nginx(upstreams: list[int], balance: str = "", port: int | None = None) -> Nginx:
    """nginx on a free port of 127.0.0.1, proxying to the given ports (round robin, or `balance`
    such as `least_conn;`)."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(binary):
        apt_install("nginx-light")
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
    d = tempfile.mkdtemp(prefix="tahoe-nginx-")
    port = port or free_port()
    servers = (f"        {balance}\n" if balance else "") + "\n".join(
        f"        server 127.0.0.1:{p} max_fails=0;" for p in upstreams)
    Path(d, "nginx.conf").write_text(NGINX_CONF.format(dir=d, port=port, servers=servers))
    proc = subprocess.Popen([binary, "-p", d, "-c", f"{d}/nginx.conf", "-g", "daemon off;"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_http(f"http://127.0.0.1:{port}/healthz", 30, proc)
    return Nginx(f"http://127.0.0.1:{port}", d, proc)


# --- server replicas ------------------------------------------------------------------------------------------
def start_replica(config: str, port: int, replica_id: str, log_path: str, *args: str) -> subprocess.Popen:
    """One replica (`tahoe sharing serve`) with its stdout and stderr in `log_path`."""
    out = open(log_path, "ab")
    proc = subprocess.Popen([sys.executable, "-m", "tahoe", "sharing", "serve", "--config", config, "--port",
                             str(port), *args], cwd=str(REPO), stdout=out, stderr=subprocess.STDOUT,
                            env={**os.environ, "TAHOE_SHARING_REPLICA_ID": replica_id})
    out.close()
    wait_http(f"http://127.0.0.1:{port}/healthz", 180, proc)
    return proc


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
