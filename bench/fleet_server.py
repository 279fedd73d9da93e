"""A fleet of N instances on loopback, served by ONE server process apart from the client.

``python -m bench.fleet_server --instances 1000`` builds a site (a real Vite fixture
build plus generated ~50 KB hashed assets, listed in a ~500-entry native
``artifactcheck.json``), writes the release manifest CI would publish for it, and
serves the site on N addresses 127.a.b.c, all on one port, with nginx (one worker,
one ``listen`` per address: what users' fleets run) or with the project's own
:class:`~artifactcheck_sim.web.WebFleet` (``--server webfleet``). A fraction of the
instances (``--drift``) serve a rebuild of the same version with different bytes,
so a check has something to find.

``--site DIR`` serves an existing directory instead (the throughput benchmark).

When ready it prints ONE JSON line on stdout (hosts, port, release template, the
PIDs doing the serving, nginx's stub_status URL) and serves until SIGTERM, SIGINT or
EOF on stdin; then it stops nginx (its own child, by PID) and removes its files.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "builds" / "vite-r2"
VERSION = "1.4.2"
STATUS_HOST = "127.199.255.254"


def generate_site(
    root: Path,
    *,
    assets: int,
    asset_size: int,
    seed: int,
    variant: int = 0,
    fixture: Path = FIXTURE,
    page_kb: int = 0,
    style_kb: int = 0,
) -> int:
    """A real fixture build plus ``assets`` generated hashed files; returns entry count.

    ``variant`` > 0 rebuilds the same file names with different bytes in every tenth
    generated asset (a silent rebuild under the same version). ``page_kb`` > 0 makes the
    build's ``index.html`` a server-rendered page of about that many KiB (its scripts
    and stylesheets as built, then product cards: what a shop's landing page holds);
    ``style_kb`` > 0 puts that many KiB of critical CSS inline in its head.
    """
    from artifactcheck.manifests import native

    shutil.copytree(fixture, root, dirs_exist_ok=True)
    if page_kb:
        page = root / "index.html"
        card = (
            '<div class="card"><h3>Product {i}</h3><p>Some <b>text</b> about it, '
            '<a href="/p/{i}">more</a>.</p><span class="price">{i}.99</span></div>\n'
        )
        cards: list[str] = []
        size = 0
        while size < page_kb * 1024:
            cards.append(card.format(i=len(cards)))
            size += len(cards[-1])
        text = page.read_text(encoding="utf-8")
        text = text.replace("</body>", f"<main>{''.join(cards)}</main></body>")
        if style_kb:
            rule = ".card-{i}{{margin:0 {i}px;background:url(/img/bg-{j}.png) no-repeat}}\n"
            rules = [rule.format(i=i, j=i % 8) for i in range(style_kb * 1024 // len(rule))]
            text = text.replace("</head>", f"<style>{''.join(rules)}</style></head>")
        page.write_text(text)
    gen = root / "assets" / "gen"
    gen.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    for i in range(assets):
        raw = rng.randbytes(asset_size * 3 // 4)
        body = b"/* chunk %d */\nexport const d=`" % i + base64.b64encode(raw) + b"`;\n"
        digest = hashlib.sha256(body).hexdigest()[:8]
        if variant and i % 10 == 0:
            body = body.replace(b"export", b"export  ", 1)  # same name, other bytes
        (gen / f"chunk-{i:04d}-{digest}.js").write_bytes(body)
    served = root / "artifactcheck.json"
    served.unlink(missing_ok=True)
    manifest = native.build(root, version=VERSION)
    served.write_bytes(native.dump(manifest))
    # What CI publishes: `manifest build` of the final tree, served manifest included
    # (compare flags a served file the release does not list, the manifest too).
    release = native.build(root, version=VERSION)
    (root.parent / f"{root.name}.release.json").write_bytes(native.dump(release))
    return len(manifest.files)


def loopback_hosts(count: int, first: str) -> list[str]:
    from artifactcheck_sim.web import loopback_hosts as hosts

    return hosts(count, first=first)


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def nginx_conf(
    prefix: Path,
    groups: list[tuple[Path, list[str]]],
    port: int,
    workers: int,
    *,
    entry_page: bool = False,
) -> str:
    """One server block per served root, one ``listen`` line per address; with
    ``entry_page`` the instance's URL itself answers its ``index.html``."""
    servers = []
    entry = "\n    location = / { try_files /index.html =404; }" if entry_page else ""
    for root, hosts in groups:
        listens = "\n".join(f"    listen {h}:{port} backlog=4096;" for h in hosts)
        servers.append(
            f"""  server {{
{listens}
    root {root};{entry}
    location / {{ try_files $uri =404; }}
    location /assets/ {{ add_header Cache-Control "public, max-age=31536000, immutable"; }}
  }}"""
        )
    return f"""worker_processes {workers};
daemon off;
master_process on;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
worker_rlimit_nofile 65536;
events {{ worker_connections 16384; multi_accept on; }}
http {{
  types {{
    text/html html; text/css css; application/javascript js; application/json json;
    image/svg+xml svg; text/plain txt; application/octet-stream bin;
  }}
  default_type application/octet-stream;
  access_log off;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_timeout 65;
  keepalive_requests 100000;
  open_file_cache max=10000 inactive=60s;
  client_body_temp_path {prefix}/tmp/body;
  proxy_temp_path {prefix}/tmp/proxy;
  fastcgi_temp_path {prefix}/tmp/fastcgi;
  uwsgi_temp_path {prefix}/tmp/uwsgi;
  scgi_temp_path {prefix}/tmp/scgi;
  server {{
    listen {STATUS_HOST}:{port};
    location = /nginx_status {{ stub_status; }}
  }}
{chr(10).join(servers)}
}}
"""


def children_of(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def serve_nginx(
    work: Path,
    groups: list[tuple[Path, list[str]]],
    port: int,
    workers: int,
    *,
    entry_page: bool = False,
) -> subprocess.Popen[bytes]:
    (work / "tmp").mkdir(exist_ok=True)
    conf = work / "nginx.conf"
    conf.write_text(nginx_conf(work, groups, port, workers, entry_page=entry_page))
    probe = next(hosts[-1] for _root, hosts in groups if hosts)  # groups are never all empty
    proc = subprocess.Popen(  # noqa: S603
        ["nginx", "-c", str(conf), "-p", str(work)],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                sys.stderr.write((work / "error.log").read_text(errors="replace"))
                raise RuntimeError(f"nginx exited with {proc.returncode}")
            try:
                with socket.create_connection((probe, port), timeout=0.5):
                    return proc
            except OSError:
                time.sleep(0.05)
        raise TimeoutError("nginx did not start listening")
    except BaseException:
        # the nginx we started must not outlive a failed start (it kept its ports)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        raise


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction between 0 and 1")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--assets", type=int, default=490, help="generated assets per site")
    parser.add_argument("--asset-size", type=int, default=50_000, help="bytes per asset")
    parser.add_argument(
        "--drift", type=_fraction, default=0.01, help="fraction serving a rebuild, 0 to 1"
    )
    parser.add_argument("--server", choices=("nginx", "webfleet"), default="nginx")
    parser.add_argument("--workers", type=int, default=1, help="nginx worker processes")
    parser.add_argument("--first-host", default="127.200.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--site", type=Path, help="serve this directory instead of generating")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--style-kb", type=int, default=0, help="with --page-kb: KiB of inline CSS in it"
    )
    parser.add_argument(
        "--page-kb",
        type=int,
        default=0,
        help="serve a server-rendered index.html of about this many KiB at each "
        "instance's URL (0: the build's own, and the URL itself answers 404)",
    )
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="acbench-fleet-"))
    os.chmod(work, 0o755)  # nginx workers run as nobody
    nginx: subprocess.Popen[bytes] | None = None
    web: Any = None
    try:
        hosts = loopback_hosts(args.instances, args.first_host)
        drifted = hosts[: round(args.instances * args.drift)] if args.site is None else []
        releases = work / "releases"
        releases.mkdir()
        if args.site is not None:
            site = args.site.resolve()
            entries = sum(1 for p in site.rglob("*") if p.is_file())
            groups = [(site, hosts)]
        else:
            site = work / "site"
            entries = generate_site(
                site,
                assets=args.assets,
                asset_size=args.asset_size,
                seed=args.seed,
                page_kb=args.page_kb,
                style_kb=args.style_kb,
            )
            shutil.copy(work / "site.release.json", releases / f"{VERSION}.json")
            groups = [(site, [h for h in hosts if h not in set(drifted)])]
            if drifted:
                rebuilt = work / "site-rebuilt"
                generate_site(
                    rebuilt,
                    assets=args.assets,
                    asset_size=args.asset_size,
                    seed=args.seed,
                    variant=1,
                    page_kb=args.page_kb,
                    style_kb=args.style_kb,
                )
                groups.append((rebuilt, drifted))
        port = args.port or free_port(hosts[0])
        info: dict[str, Any] = {
            "server": args.server,
            "port": port,
            "hosts": hosts,
            "drifted": drifted,
            "version": VERSION,
            "site": str(site),
            "entries": entries,
            "release_template": str(releases / "{version}.json"),
            "work": str(work),
        }
        if args.server == "nginx":
            nginx = serve_nginx(work, groups, port, args.workers, entry_page=args.page_kb > 0)
            info["nginx_pid"] = nginx.pid
            info["serving_pids"] = children_of(nginx.pid) or [nginx.pid]
            info["status_url"] = f"http://{STATUS_HOST}:{port}/nginx_status"
        else:
            from artifactcheck_sim.web import Site, WebFleet

            web = WebFleet(name="bench-webfleet").start()
            pairs = [(Site(root=root), h) for root, hs in groups for h in hs]
            web.add_many(pairs, port=port)
            info["serving_pids"] = [os.getpid()]
        print(json.dumps(info), flush=True)

        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
        while not stop.wait(0.5):
            if nginx is not None and nginx.poll() is not None:
                raise RuntimeError(f"nginx exited with {nginx.returncode}")
        return 0
    finally:
        if nginx is not None and nginx.poll() is None:
            nginx.send_signal(signal.SIGTERM)  # fast stop: the master we started stops its workers
            try:
                nginx.wait(timeout=10)
            except subprocess.TimeoutExpired:
                nginx.kill()
                nginx.wait(timeout=5)
        if web is not None:
            web.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
