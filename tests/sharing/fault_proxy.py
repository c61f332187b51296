"""A real HTTP reverse proxy on 127.0.0.1 in front of the sharing server, which injects faults
into chosen requests: a 503 answer, a 429 answer (with a `Retry-After`), a connection dropped
halfway through the body, or a delay.
Requests pass through unchanged (the `Host` header too, so the server's file URLs point back at
the proxy and downloads go through it as well); every request is logged (method, path, headers,
body, the status answered, whether a fault was injected).

With `authenticate`, it is also an authenticating gateway, as deployments put in front of a
server: `authenticate(method, path, headers)` returns the headers to send upstream instead of the
request's (e.g. a Basic login swapped for the server's bearer token), or None to answer 401."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Optional


@dataclass
class Fault:
    kind: str                                   # "503" | "429" | "drop" | "delay"
    match: Callable[[str, str, dict], bool]     # (method, path, headers) -> applies?
    times: int = 1                              # how many requests it hits (-1: all)
    seconds: float = 0.0                        # for "delay"; for "429", the Retry-After (0: none sent)
    hits: int = 0


@dataclass
class Logged:
    method: str
    path: str
    headers: dict
    body: bytes
    status: int = 0
    fault: Optional[str] = None
    at: float = field(default_factory=time.monotonic)   # when the request arrived


@dataclass
class FaultProxy:
    upstream: tuple[str, int]
    faults: list[Fault] = field(default_factory=list)
    log: list[Logged] = field(default_factory=list)
    authenticate: Optional[Callable[[str, str, dict], Optional[dict]]] = None

    def __post_init__(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _handle(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                headers = {k: v for k, v in self.headers.items()}
                entry = Logged(self.command, self.path, headers, body)
                with proxy._lock:
                    proxy.log.append(entry)
                if proxy.authenticate is not None:
                    upstream_headers = proxy.authenticate(self.command, self.path, headers)
                    if upstream_headers is None:
                        entry.status = 401
                        msg = b'{"errorCode":"UNAUTHENTICATED","message":"the gateway refused the credentials"}'
                        self.send_response(401)
                        self.send_header("WWW-Authenticate", 'Basic realm="sharing"')
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(msg)))
                        self.end_headers()
                        self.wfile.write(msg)
                        return
                    headers = upstream_headers
                fault = proxy._take(self.command, self.path, headers)
                if fault is not None and fault.kind == "503":
                    entry.status, entry.fault = 503, "503"
                    msg = b'{"errorCode":"TEMPORARILY_UNAVAILABLE","message":"injected"}'
                    self.send_response(503)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    return
                if fault is not None and fault.kind == "429":
                    entry.status, entry.fault = 429, "429"
                    msg = b'{"errorCode":"RESOURCE_EXHAUSTED","message":"injected"}'
                    self.send_response(429)
                    if fault.seconds:
                        self.send_header("Retry-After", str(int(fault.seconds)))
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    return
                if fault is not None and fault.kind == "delay":
                    entry.fault = "delay"
                    time.sleep(fault.seconds)
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=120)
                try:
                    conn.request(self.command, self.path, body=body or None,
                                 headers={k: v for k, v in headers.items() if k.lower() != "connection"})
                    resp = conn.getresponse()
                    data = resp.read()
                    entry.status = resp.status
                    self.send_response(resp.status)
                    for k, v in resp.getheaders():
                        if k.lower() not in ("transfer-encoding", "connection", "content-length", "date", "server"):
                            self.send_header(k, v)
                    # a HEAD answer has no body: its Content-Length is the upstream's
                    length = resp.getheader("Content-Length") if self.command == "HEAD" else None
                    self.send_header("Content-Length", length if length is not None else str(len(data)))
                    self.end_headers()
                    if fault is not None and fault.kind == "drop" and self.command == "GET" and len(data) > 1:
                        entry.fault = "drop"
                        self.wfile.write(data[: len(data) // 2])
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_POST = do_HEAD = _handle

        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def _take(self, method: str, path: str, headers: dict) -> Optional[Fault]:
        with self._lock:
            for f in self.faults:
                if f.times != 0 and f.match(method, path, headers):
                    if f.times > 0:
                        f.times -= 1
                    f.hits += 1
                    return f
        return None

    def base(self, prefix: str = "/delta-sharing") -> str:
        return f"http://127.0.0.1:{self.port}{prefix}"

    def requests(self, method: str | None = None, contains: str = "") -> list[Logged]:
        with self._lock:
            return [e for e in self.log if (method is None or e.method == method) and contains in e.path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
