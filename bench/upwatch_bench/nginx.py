"""nginx for the internet world (``upwatch bench internet``, ``overload``): installed if
missing, configured, started, stopped.

Why nginx and not Python TLS servers: the targets run on the core the engine does not use,
and a Python TLS server costs ~1.5 ms of CPU per handshake there; 50,000 monitors at 60 s
with 80 % HTTPS ask ~670 handshakes a second, which would saturate that core (shared with
the database, the DNS server and the backend) and make the targets, not the engine, what a
run measures. nginx does a handshake for a fraction of that, and it is what many of the
sites operators probe run: its defaults (session tickets on, no session cache) are the
world's defaults.

One worker process on the non-engine cores. Each TLS server kind listens on its own
loopback address (upwatch_bench/world.py ``ADDRESS``) with ``ssl_protocols`` of its kind;
the same addresses answer plain HTTP with a 301 to HTTPS. Everything else is proxied,
with upstream keep-alive, to the backend (upwatch_bench/roles/worldserver.py), which applies the
think time and writes the body the path asks for.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

from upwatch_bench.install import ensure_installed
from upwatch_bench.world import ADDRESS, PROTOCOL, SERVER_KINDS


def nginx_path() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)),
        None)


async def ensure_nginx() -> str:
    """The nginx executable, installing the Debian package (``nginx-light``, else ``nginx``)
    when there is none; BenchError in one line when that is not possible."""
    return await ensure_installed("nginx", nginx_path, ("nginx-light", "nginx"))


def nginx_conf(
    *,
    prefix: Path,
    https_port: int,
    http_port: int,
    backend: str,
    certs: Mapping[str, tuple[Path, Path]],
    run_as_root: bool,
    worker_connections: int = 20_000,
) -> str:
    """The whole nginx.conf: one worker; per TLS server kind (and ``badcert``) an HTTPS
    server of its protocol and certificate, plus a plain-HTTP server on the same address
    answering 301 to HTTPS; a plain-HTTP server on the ``http`` address; all proxied to
    ``backend`` (``host:port``) over kept-alive upstream connections."""
    proxy = (
        "        location / {\n"
        "            proxy_pass http://backend;\n"
        "            proxy_http_version 1.1;\n"
        '            proxy_set_header Connection "";\n'
        "            proxy_buffering off;\n"
        "            proxy_read_timeout 900s;\n"
        "        }\n"
    )
    servers: list[str] = []
    for kind in (*SERVER_KINDS, "badcert"):
        cert, key = certs[kind]
        addr = ADDRESS[kind]
        servers.append(
            "    server {\n"
            f"        listen {addr}:{https_port} ssl backlog=4096;\n"
            f"        ssl_certificate {cert};\n"
            f"        ssl_certificate_key {key};\n"
            f"        ssl_protocols {PROTOCOL[kind]};\n"
            "        ssl_session_tickets on;  # nginx's default, said out loud\n"
            + proxy + "    }\n")
        if kind != "badcert":
            servers.append(
                "    server {\n"
                f"        listen {addr}:{http_port} backlog=4096;\n"
                f"        return 301 https://$host:{https_port}$request_uri;\n"
                "    }\n")
    servers.append(
        "    server {\n"
        f"        listen {ADDRESS['http']}:{http_port} backlog=4096;\n"
        + proxy + "    }\n")
    user = "user root root;\n" if run_as_root else ""
    return (
        f"{user}"
        "worker_processes 1;\n"
        "worker_rlimit_nofile 65536;\n"
        "daemon off;\n"
        "master_process on;\n"
        f"pid {prefix}/nginx.pid;\n"
        f"error_log {prefix}/error.log crit;\n"
        "events {\n"
        f"    worker_connections {worker_connections};\n"
        "    multi_accept on;\n"
        "}\n"
        "http {\n"
        "    access_log off;\n"
        f"    client_body_temp_path {prefix}/client_body;\n"
        f"    proxy_temp_path {prefix}/proxy;\n"
        f"    fastcgi_temp_path {prefix}/fastcgi;\n"
        f"    uwsgi_temp_path {prefix}/uwsgi;\n"
        f"    scgi_temp_path {prefix}/scgi;\n"
        "    keepalive_timeout 5s;\n"
        "    upstream backend {\n"
        f"        server {backend};\n"
        "        keepalive 1024;\n"
        "        keepalive_requests 1000000;\n"
        "    }\n"
        + "".join(servers)
        + "}\n"
    )


class Nginx:
    """One nginx master (and its worker) started with a configuration; ``stop()`` ends it
    (SIGTERM: a fast shutdown that does not wait for hanging connections, then SIGKILL of
    the process group), bounded in time."""

    def __init__(self, exe: str, prefix: Path) -> None:
        self.exe = exe
        self.prefix = prefix
        self.proc: subprocess.Popen[bytes] | None = None
        self.cpus: set[int] | None = None

    async def start(self, conf: str, cpus: set[int] | None) -> None:
        from upwatch_bench.procs import pin_pid

        self.prefix.mkdir(parents=True, exist_ok=True)
        path = self.prefix / "nginx.conf"
        path.write_text(conf, encoding="utf-8")
        argv = [self.exe, "-p", str(self.prefix), "-c", str(path)]
        test = await asyncio.create_subprocess_exec(
            *argv, "-t", stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(test.communicate(), 30)
        if test.returncode != 0:
            raise RuntimeError("nginx refused its configuration: "
                               + err.decode(errors="replace").strip()[-500:])
        self.proc = await asyncio.to_thread(self._popen, argv)
        pin_pid(self.proc.pid, cpus)
        self.cpus = cpus

    def pin(self) -> None:
        """Pin master and worker to the cores given to ``start`` (the worker may have been
        forked before the master was pinned: call once it listens)."""
        from upwatch_bench.procs import pin_pid

        for pid in self.pids():
            pin_pid(pid, self.cpus)

    def _popen(self, argv: list[str]) -> subprocess.Popen[bytes]:
        with open(self.prefix / "stderr.log", "wb") as err:
            return subprocess.Popen(  # noqa: S603 - a fixed program, arguments built here
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                start_new_session=True)

    def pids(self) -> list[int]:
        """The master and its worker(s)."""
        if self.proc is None:
            return []
        out = [self.proc.pid]
        with contextlib.suppress(OSError):
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
            out += [int(x) for x in children.split()]
        return out

    def log_tail(self) -> str:
        text = ""
        for name in ("stderr.log", "error.log"):
            with contextlib.suppress(OSError):
                text += (self.prefix / name).read_text(errors="replace")[-1500:]
        return text.strip()

    async def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        for _ in range(50):  # 5 s
            if proc.poll() is not None:
                break
            await asyncio.sleep(0.1)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(proc.wait, 5)
