"""CPU per request through an HTTP proxy, this tree against a baseline copy.

    python -m bench.proxied [--requests 300] [--runs 3] [--before DIR]

A loopback origin (``http.server``, plain http and TLS with a throwaway CA) and the
tests' logging proxy (``tests/proxy_support.py``: absolute form, CONNECT tunnels) run
as processes of their own; the Fetcher runs in a fresh process per tree and run, and
only its own CPU (user + system) over ``--requests`` CDN GETs is counted: http:// in
absolute form, https:// through a CONNECT tunnel (the origin closes after each
answer, so every request is a new tunnel and handshake in both trees).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import log, save, summary, tool_env

ROOT = Path(__file__).resolve().parent.parent

ORIGIN = """
import http.server, ssl, sys
host, cert = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"x" * 5000
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer((host, 0), Handler)
if cert:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"""

PROXY = """
import sys, time
sys.path.insert(0, sys.argv[2])
from proxy_support import LoggingProxy
with LoggingProxy(sys.argv[1]) as proxy:
    print(proxy.url, flush=True)
    sys.stdin.read()
"""

CLIENT = """
import asyncio, json, sys, time
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.fetch.proxy import Proxies
from artifactcheck.model.settings import HttpSettings, RetrySettings

async def main(base, proxy, n, ca):
    http = HttpSettings(ca_bundle=ca or None)
    async with Fetcher(http=http, retry=RetrySettings(), proxies=Proxies.single(proxy)) as f:
        first = await f.get_asset(base, "warm.js", host_header="")
        assert first.ok, first.error
        start = time.process_time()
        for i in range(n):
            got = await f.get_asset(base, f"a{i}.js", host_header="")
            assert got.ok, got.error
        return time.process_time() - start

cpu = asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
print(json.dumps({"cpu": cpu, "httpx": "httpx" in sys.modules}))
"""


def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


def _start(argv: list[str]) -> subprocess.Popen[str]:
    """``python -c argv...``, its first line of output read by :func:`_line`."""
    return subprocess.Popen(
        [sys.executable, "-c", *argv], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True
    )


def _client(tree: Path, base: str, proxy: str, n: int, ca: str) -> dict[str, Any]:
    env = tool_env(tree)
    out = subprocess.run(
        [sys.executable, "-c", CLIENT, base, proxy, str(n), ca],
        capture_output=True, text=True, timeout=300, check=True, env=env, cwd=tempfile.gettempdir(),
    )  # fmt: skip
    return dict(json.loads(out.stdout))


def bench(args: argparse.Namespace) -> dict[str, Any]:
    import trustme

    ca = trustme.CA()
    work = Path(tempfile.mkdtemp(prefix="acbench-proxied-"))
    ca_file, cert_file = work / "ca.pem", work / "cert.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    commands = [
        [ORIGIN, "127.0.0.1"],
        [ORIGIN, "127.0.0.1", str(cert_file)],
        [PROXY, "127.0.0.1", str(ROOT / "tests")],
    ]
    procs = [_start(command) for command in commands]
    try:
        plain, tls, proxy = (_line(p) for p in procs)
        bases = {"http": f"http://127.0.0.1:{plain}/", "https": f"https://127.0.0.1:{tls}/"}
        trees = {"after": ROOT} | ({"before": args.before} if args.before else {})
        runs: dict[str, dict[str, list[float]]] = {s: {t: [] for t in trees} for s in bases}
        imports: dict[str, bool] = {}
        for run in range(args.runs):
            for scheme, base in bases.items():
                for tree, path in trees.items():
                    got = _client(path, base, proxy, args.requests, str(ca_file))
                    runs[scheme][tree].append(got["cpu"] / args.requests * 1e6)
                    imports[tree] = got["httpx"]
                    log(f"  run {run + 1} {scheme} {tree}: {runs[scheme][tree][-1]:.0f} µs/request")
    finally:
        for p in procs:
            p.kill()
            p.wait()
    result: dict[str, Any] = {"requests": args.requests, "runs": runs, "imports_httpx": imports}
    result["summary"] = {
        scheme: {tree: summary(values) for tree, values in by_tree.items()}
        for scheme, by_tree in runs.items()
    }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.proxied")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path, help="the baseline copy of the package")
    parser.add_argument("--name", default="proxied")
    args = parser.parse_args(argv)
    started = time.monotonic()
    result = bench(args)
    path = save(args.name, result)
    for scheme, by_tree in result["summary"].items():
        medians = {tree: s["median"] for tree, s in by_tree.items()}
        ratio = medians["after"] / medians["before"] if "before" in medians else None
        log(f"{scheme}: CPU per request (median) {medians}, after/before {ratio}")
    log(f"raw figures: {path} ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
