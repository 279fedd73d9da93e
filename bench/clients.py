"""Where the time of a sampled check goes: HTTP client stacks on the same requests.

Not one of the main benchmarks (bench/stacks.py is the one behind docs/http-stacks.md),
but CPU per request at 1,000 hosts by default for the Fetcher on its lean transport,
against httpx alone and a raw asyncio floor: the same URL list (manifest + 6
assets for each of N instances), every body sha256-hashed, 64 requests in flight,
measured in-process (no interpreter start-up), one stack at a time, each in a fresh
subprocess so they do not share warm state.

    python -m bench.clients [--instances 1000] [--per-host 4]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .common import ROOT, fleet_server, log, machine, save

STACKS = ("raw-asyncio", "httpx-default", "fetcher")


async def _bounded(urls: list[str], limit: int, get: Any) -> int:
    sem = asyncio.Semaphore(limit)
    total = 0

    async def one(url: str) -> None:
        nonlocal total
        async with sem:
            status = await get(url)
        total += status

    async with asyncio.TaskGroup() as tg:
        for url in urls:
            tg.create_task(one(url))
    return total


async def run_httpx(urls: list[str], per_host: int) -> int:
    import httpx

    transport = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=64))
    async with httpx.AsyncClient(transport=transport) as client:

        async def get(url: str) -> int:
            async with client.stream("GET", url) as resp:
                h = hashlib.sha256()
                async for chunk in resp.aiter_raw():
                    h.update(chunk)
                return resp.status_code

        return await _bounded(urls, 64, get)


async def run_fetcher(urls: list[str], per_host: int) -> int:
    from artifactcheck.fetch.fetcher import Fetcher
    from artifactcheck.model.settings import HttpSettings, RetrySettings

    http = HttpSettings(max_per_host=per_host)
    async with Fetcher(http=http, retry=RetrySettings()) as fetcher:

        async def get(url: str) -> int:
            parts = urlsplit(url)
            base = f"{parts.scheme}://{parts.netloc}/"
            got = await fetcher.get_asset(base, parts.path.lstrip("/"))
            return got.status or 0

        return await _bounded(urls, 64, get)


class _Conn(asyncio.Protocol):
    """A minimal HTTP/1.1 keep-alive client connection (Content-Length bodies only)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.waiter: asyncio.Future[tuple[int, str]] | None = None
        self.hasher: Any = None
        self.need = -1
        self.status = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.need < 0:
            self.buf += data
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
            self.status = int(head[0].split(" ", 2)[1])
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            data = bytes(self.buf[end + 4 :])
            self.buf.clear()
            self.need = length
        self.hasher.update(data)
        self.need -= len(data)
        if self.need <= 0 and self.waiter is not None:
            self.need = -1
            self.waiter.set_result((self.status, self.hasher.hexdigest()))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc or ConnectionError("closed"))


async def run_raw(urls: list[str], per_host: int) -> int:
    loop = asyncio.get_running_loop()
    idle: dict[tuple[str, int], list[_Conn]] = {}
    host_sems: dict[tuple[str, int], asyncio.Semaphore] = {}

    async def get(url: str) -> int:
        parts = urlsplit(url)
        key = (parts.hostname or "", parts.port or 80)
        sem = host_sems.setdefault(key, asyncio.Semaphore(per_host))
        async with sem:
            pool = idle.setdefault(key, [])
            if pool:
                conn = pool.pop()
            else:
                _t, conn = await loop.create_connection(_Conn, *key)
            conn.hasher = hashlib.sha256()
            conn.waiter = loop.create_future()
            assert conn.transport is not None
            conn.transport.write(
                f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                "User-Agent: raw\r\nAccept: */*\r\n\r\n".encode()
            )
            status, _digest = await conn.waiter
            conn.waiter = None
            pool.append(conn)
            return status

    try:
        return await _bounded(urls, 64, get)
    finally:
        for pool in idle.values():
            for conn in pool:
                if conn.transport is not None:
                    conn.transport.close()


def child(stack: str, urls_file: str, per_host: int) -> None:
    """Run one stack over the URL list and print its figures as JSON."""
    urls = Path(urls_file).read_text().split()
    runner = {
        "raw-asyncio": lambda: run_raw(urls, per_host),
        "httpx-default": lambda: run_httpx(urls, per_host),
        "fetcher": lambda: run_fetcher(urls, per_host),
    }[stack]
    # imports first, so only the requests are timed
    import httpx  # noqa: F401

    import artifactcheck.fetch.fetcher  # noqa: F401

    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    total = asyncio.run(runner())
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    ok = total == 200 * len(urls)
    print(json.dumps({"stack": stack, "wall": wall, "cpu": cpu, "requests": len(urls), "ok": ok}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="HTTP client stacks on one URL list")
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--per-host", type=int, default=4)
    parser.add_argument("--stacks", default=",".join(STACKS))
    parser.add_argument("--child", nargs=3, metavar=("STACK", "URLS", "PER_HOST"))
    parser.add_argument("--name", help="results file name")
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return 0
    result: dict[str, Any] = {"benchmark": "clients", "machine": machine(), "runs": []}
    with fleet_server(["--instances", str(args.instances), "--drift", "0"]) as server:
        info = server.info
        site = Path(info["site"])
        paths = ["artifactcheck.json", "index.html"] + sorted(
            p.relative_to(site).as_posix() for p in (site / "assets" / "gen").iterdir()
        )[:5]
        urls = [f"http://{h}:{info['port']}/{p}" for h in info["hosts"] for p in paths]
        urls_file = Path(info["work"]) / "client-urls.txt"
        urls_file.write_text("\n".join(urls))
        for stack in args.stacks.split(","):
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.clients",
                    "--child",
                    stack,
                    str(urls_file),
                    str(args.per_host),
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            if out.returncode != 0:
                log(out.stderr[-2000:])
                continue
            row = json.loads(out.stdout.strip().splitlines()[-1])
            row["per_host"] = args.per_host
            row["us_per_request"] = row["cpu"] / row["requests"] * 1e6
            result["runs"].append(row)
            log(
                f"  {stack:14s} {row['wall']:.2f} s wall, {row['cpu']:.2f} s cpu, "
                f"{row['us_per_request']:.0f} us cpu/request, ok={row['ok']}"
            )
    save(args.name or f"clients-per-host-{args.per_host}", result)
    rows = {r["stack"]: r for r in result["runs"]}
    print(
        f"client stacks, {len(urls)} GETs to {args.instances} hosts (per host {args.per_host}): "
        + ", ".join(f"{k} {v['us_per_request']:.0f} us CPU/req" for k, v in rows.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
