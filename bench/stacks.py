"""The HTTP stacks under the Fetcher, measured in one run (docs/http-stacks.md).

Three parts, each printed as one line and saved to bench/results/stacks.json:

- ``fleet``: the Fetcher on each transport (``http.transport``) against a loopback nginx
  fleet (bench/fleet_server.py): the same URL list (manifest, index and five assets per
  instance, every body sha256-hashed, 64 in flight), one transport per fresh process,
  CPU (user + system) per request and wall time, requests only (imports done first);
  ``http1-llhttp`` is the lean transport reading response heads with httptools;
- ``parsers``: the lean transport's hand-written HTTP/1.1 parser against ``httptools``
  (llhttp, Node's parser) on the same bytes: a parse-heavy micro benchmark (heads with
  20 headers, small chunked bodies) and every hostile byte string the framing suites
  pin, with what each parser makes of it;
- ``suites``: the hostile-bytes suites (tests/fetch/test_fetch_framing.py,
  test_fetch_rawsocket.py, test_fetch_safety.py, tests/e2e/test_hostile.py), passed
  and failed, from pytest's own JUnit report.

    python -m bench.stacks [--instances 200] [--parts parsers,fleet,suites]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .common import ROOT, fleet_server, log, machine, save

SUITES = (
    "tests/fetch/test_fetch_framing.py",
    "tests/fetch/test_fetch_rawsocket.py",
    "tests/fetch/test_fetch_safety.py",
    "tests/e2e/test_hostile.py",
)

# ------------------------------------------------------------------------- fleet


def _llhttp_heads() -> None:
    """Make the lean transport read response heads with llhttp (httptools) instead of
    its own parser, the rest of it unchanged: the fleet figure of the parser swap."""
    import httptools

    from artifactcheck.fetch.connection import closed_error
    from artifactcheck.fetch.http1 import MAX_HEAD, Http1Transport

    class Head:
        def __init__(self) -> None:
            self.headers: list[tuple[bytes, bytes]] = []
            self.reason = b""

        def on_status(self, reason: bytes) -> None:
            self.reason += reason

        def on_header(self, name: bytes, value: bytes) -> None:
            self.headers.append((name, value))

    async def read_head(conn: Any, timeout: float | None) -> Any:
        while (index := conn.find(b"\r\n\r\n", MAX_HEAD)) < 0:
            if conn.eof:
                raise closed_error(conn, "connection closed in the middle of the response head")
            await conn.wait(timeout)
        head = Head()
        parser = httptools.HttpResponseParser(head)
        raw = conn.take(index + 4)
        try:
            parser.feed_data(raw)
        except httptools.HttpParserError as exc:
            raise ValueError(str(exc)) from exc
        version = parser.get_http_version()
        # the same five values as Http1Transport._read_head: the last, whether the whole
        # head is ASCII (its header values are then decoded without a second look)
        return parser.get_status_code(), head.reason, head.headers, version == "1.1", raw.isascii()

    Http1Transport._read_head = staticmethod(read_head)  # type: ignore[method-assign]


async def _fleet_run(urls: list[str], transport: str) -> int:
    from artifactcheck.fetch.fetcher import Fetcher
    from artifactcheck.model.settings import HttpSettings, RetrySettings

    if transport == "http1-llhttp":
        _llhttp_heads()
        transport = "http1"
    http = HttpSettings.model_validate({"max_per_host": 4, "transport": transport})
    ok = 0
    async with Fetcher(http=http, retry=RetrySettings()) as fetcher:
        slots = asyncio.Semaphore(64)

        async def one(url: str) -> None:
            nonlocal ok
            parts = urlsplit(url)
            async with slots:
                got = await fetcher.get_asset(f"http://{parts.netloc}/", parts.path[1:])
            ok += got.status == 200 and got.error is None

        await asyncio.gather(*(one(u) for u in urls))
    return ok


def fleet_child(transport: str, urls_file: str) -> None:
    """One transport over the URL list, in this fresh process; prints one JSON line."""
    urls = Path(urls_file).read_text().split()
    import artifactcheck.fetch.fetcher  # noqa: F401  - imports are not timed

    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    ok = asyncio.run(_fleet_run(urls, transport))
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    row = {"transport": transport, "requests": len(urls), "ok": ok, "wall": wall, "cpu": cpu}
    print(json.dumps(row))


def fleet(instances: int, transports: list[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with fleet_server(["--instances", str(instances), "--drift", "0"]) as server:
        info = server.info
        site = Path(info["site"])
        gen = sorted(p.relative_to(site).as_posix() for p in (site / "assets" / "gen").iterdir())
        paths = ["artifactcheck.json", "index.html", *gen[:5]]
        urls = [f"http://{h}:{info['port']}/{p}" for h in info["hosts"] for p in paths]
        urls_file = Path(info["work"]) / "stack-urls.txt"
        urls_file.write_text("\n".join(urls))
        for transport in transports:
            out = subprocess.run(
                [sys.executable, "-m", "bench.stacks", "--child", transport, str(urls_file)],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            if out.returncode != 0:
                log(f"  {transport}: failed\n{out.stderr[-2000:]}")
                continue
            row = json.loads(out.stdout.strip().splitlines()[-1])
            row["us_cpu_per_request"] = row["cpu"] / row["requests"] * 1e6
            rows.append(row)
            log(
                f"  fleet {transport:8s} {row['wall']:.2f} s wall, {row['cpu']:.2f} s CPU, "
                f"{row['us_cpu_per_request']:.0f} us CPU/request, {row['ok']}/{row['requests']} ok"
            )
    return rows


# ------------------------------------------------------------------------- parsers

HEAD = (
    b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Wed, 02 Dec 2026 00:00:00 GMT\r\n"
    + b"".join(b"X-Header-%d: value-%d-abcdefghijklmnopqrstuvwxyz\r\n" % (i, i) for i in range(17))
)
SIZED = HEAD + b"Content-Length: 5\r\n\r\nhello"
CHUNKED = HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"5\r\nhello\r\n" * 8 + b"0\r\n\r\n"

_CH = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"

# (name, bytes, what the suites require): "ok" = read as the 5 bytes "hello" (for an
# "ok, not reused" case, the connection must also not be reused); "refuse" = a clear error.
HOSTILE: list[tuple[str, bytes, str]] = [
    ("plain", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "ok"),
    ("chunked", _CH + b"5\r\nhello\r\n0\r\n\r\n", "ok"),
    ("chunk-extension", _CH + b"5;ext=1\r\nhello\r\n0\r\n\r\n", "ok"),
    ("trailers", _CH + b"5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n", "ok"),
    ("cl-5,5", b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello", "ok"),
    (
        "cl-twice-same",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        "ok",
    ),
    ("cl-5,6", b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhelloX", "refuse"),
    (
        "cl-two-lines",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhelloX",
        "refuse",
    ),
    ("cl-plus", b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello", "refuse"),
    (
        "cl-5000-digits",
        b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\nbody",
        "refuse",
    ),
    (
        "te+cl",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n0\r\n\r\n",
        "ok, not reused",
    ),
    (
        "te-gzip,chunked",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "refuse",
    ),
    (
        "te-chunked,chunked",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "refuse",
    ),
    ("te-gzip-until-close", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nhello", "refuse"),
    *[
        (f"chunk-size-{size!r}", _CH + size + b"\r\nhello\r\n0\r\n\r\n", "refuse")
        for size in (b"zz", b"-5", b"0x5", b"+5", b"", b"5 5")
    ],
    ("chunk-size-16-digits", _CH + b"1" * 16 + b"\r\nhello\r\n0\r\n\r\n", "refuse"),
    ("chunk-too-long", _CH + b"5\r\nhello, and more\r\n0\r\n\r\n", "refuse"),
    ("no-colon", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nNoColonHere\r\n\r\nhello", "refuse"),
    (
        "space-in-name",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Name value\r\n\r\nhello",
        "refuse",
    ),
    (
        "obs-fold",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n folded: continuation\r\n\r\nhello",
        "refuse",
    ),
    ("space-before-colon", b"HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello", "refuse"),
    ("status-099", b"HTTP/1.1 099 Odd\r\nContent-Length: 5\r\n\r\nhello", "refuse"),
    ("status-2000", b"HTTP/1.1 2000 Odd\r\nContent-Length: 5\r\n\r\nhello", "refuse"),
    ("status-600", b"HTTP/1.1 600 Odd\r\nContent-Length: 5\r\n\r\nhello", "refuse"),
    (
        "101-upgrade",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\n\r\nhello",
        "refuse",
    ),
    ("not-http", b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "refuse"),
    (
        "head-over-64k",
        b"HTTP/1.1 200 OK\r\nX-Big: " + b"b" * (64 * 1024) + b"\r\nContent-Length: 5\r\n\r\nhello",
        "refuse",
    ),
]


class _Collect:
    """httptools callbacks: the message as llhttp reads it."""

    def __init__(self) -> None:
        self.headers: list[tuple[bytes, bytes]] = []
        self.body = b""
        self.complete = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.complete = True


def parse_httptools(wire: bytes) -> tuple[str, str]:
    """(outcome, detail) of llhttp on ``wire``, the connection then closed."""
    import httptools

    got = _Collect()
    parser = httptools.HttpResponseParser(got)
    try:
        parser.feed_data(wire)
        if not got.complete:
            parser.feed_data(b"")  # the close: ends a read-until-close body
    except httptools.HttpParserUpgrade:
        return "refuse", "upgrade"
    except httptools.HttpParserError as exc:
        return "refuse", str(exc)[:60]
    if not got.complete:
        return "incomplete", ""
    reused = parser.should_keep_alive()
    status = parser.get_status_code()
    return (
        "ok" if got.body == b"hello" else "wrong-body"
    ), f"{status} {got.body[:12]!r} keep-alive={reused}"


async def _parse_lean(wire: bytes) -> tuple[str, str]:
    from artifactcheck.fetch.connection import Connection
    from artifactcheck.fetch.http1 import Body, Http1Transport, framing

    conn = Connection(asyncio.get_running_loop(), ("http", "x", 80, None))
    conn.data_received(wire)
    conn.eof_received()
    try:
        for _ in range(9):
            status, _reason, headers, http11, _ascii = await Http1Transport._read_head(conn, 1.0)
            if status >= 200 or status == 101:
                break
        if status == 101:
            return "refuse", "101"
        length, chunked, reusable = framing("GET", status, headers, http11)
        body = Body(None, conn, length=length, chunked=chunked, reusable=reusable, timeout=1.0)  # type: ignore[arg-type]
        data = b"".join([piece async for piece in body])
    except Exception as exc:  # noqa: BLE001 - every refusal is the outcome measured
        return "refuse", f"{type(exc).__name__}: {exc}"[:60]
    return (
        "ok" if data == b"hello" else "wrong-body"
    ), f"{status} {data[:12]!r} keep-alive={reusable}"


def parse_lean(wire: bytes) -> tuple[str, str]:
    return asyncio.run(_parse_lean(wire))


def _verdict(outcome: str, detail: str, want: str) -> bool:
    if want == "ok, not reused":
        return outcome == "ok" and detail.endswith("keep-alive=False")
    return outcome == want


def _bench(parse: Callable[[bytes], Any], wire: bytes, rounds: int) -> float:
    """Microseconds of CPU per message."""
    t0 = time.process_time()
    for _ in range(rounds):
        parse(wire)
    return (time.process_time() - t0) / rounds * 1e6


def parsers(rounds: int) -> dict[str, Any]:
    import httptools

    from artifactcheck.fetch.connection import Connection
    from artifactcheck.fetch.http1 import Body, Http1Transport, framing

    def httptools_once(wire: bytes) -> None:
        parser = httptools.HttpResponseParser(_Collect())
        parser.feed_data(wire)

    loop = asyncio.new_event_loop()

    async def lean_many(wire: bytes, n: int) -> None:
        for _ in range(n):
            conn = Connection(loop, ("http", "x", 80, None))
            conn.data_received(wire)
            status, _r, headers, http11, _ascii = await Http1Transport._read_head(conn, 1.0)
            length, chunked, reusable = framing("GET", status, headers, http11)
            body = Body(None, conn, length=length, chunked=chunked, reusable=reusable, timeout=1.0)  # type: ignore[arg-type]
            async for _piece in body:
                pass

    speed: dict[str, dict[str, float]] = {}
    for name, wire in (("sized", SIZED), ("chunked", CHUNKED)):
        t0 = time.process_time()
        loop.run_until_complete(lean_many(wire, rounds))
        lean = (time.process_time() - t0) / rounds * 1e6
        llhttp = _bench(httptools_once, wire, rounds)
        speed[name] = {"hand-written": lean, "httptools": llhttp}
        log(f"  parse {name:8s} hand-written {lean:.1f} us, httptools {llhttp:.1f} us per message")
    loop.close()
    cases = []
    for name, wire, want in HOSTILE:
        lean_outcome = parse_lean(wire)
        llhttp_outcome = parse_httptools(wire)
        cases.append(
            {
                "case": name,
                "required": want,
                "hand-written": [*lean_outcome, _verdict(*lean_outcome, want)],
                "httptools": [*llhttp_outcome, _verdict(*llhttp_outcome, want)],
            }
        )
    for parser_name in ("hand-written", "httptools"):
        kept = sum(bool(c[parser_name][2]) for c in cases)
        log(f"  hostile cases kept by {parser_name}: {kept}/{len(cases)}")
    for c in cases:
        if not (c["hand-written"][2] and c["httptools"][2]):
            log(
                f"    {c['case']}: required {c['required']}; hand-written {c['hand-written'][:2]}; "
                f"httptools {c['httptools'][:2]}"
            )
    return {"speed_us_per_message": speed, "hostile": cases, "httptools": httptools.__version__}


# ------------------------------------------------------------------------- suites

_PARAM = re.compile(r"\[(.*)\]$")


def suites(transports: list[str]) -> dict[str, dict[str, int]]:
    report = Path(tempfile.mkdtemp(prefix="stacks-")) / "junit.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *SUITES,
            f"--junitxml={report}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    counts: dict[str, Counter[str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        match = _PARAM.search(case.get("name", ""))
        ids = set(match[1].split("-")) if match else set()
        stack = next((t for t in transports if t in ids), "default (http1)")
        outcome = (
            "failed"
            if case.find("failure") is not None or case.find("error") is not None
            else ("skipped" if case.find("skipped") is not None else "passed")
        )
        counts.setdefault(stack, Counter())[outcome] += 1
    for stack, counter in counts.items():
        log(f"  suites {stack:16s} " + ", ".join(f"{k} {v}" for k, v in sorted(counter.items())))
    return {k: dict(v) for k, v in counts.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="HTTP stacks under the Fetcher, one run")
    parser.add_argument("--instances", type=int, default=200)
    parser.add_argument("--transports", default="http1,http1-llhttp")
    parser.add_argument("--name", default="stacks", help="results file name")
    parser.add_argument("--parts", default="parsers,fleet,suites")
    parser.add_argument("--rounds", type=int, default=20_000)
    parser.add_argument("--child", nargs=2, metavar=("TRANSPORT", "URLS"))
    args = parser.parse_args(argv)
    if args.child:
        fleet_child(*args.child)
        return 0
    transports = args.transports.split(",")
    parts = args.parts.split(",")
    result: dict[str, Any] = {"benchmark": "stacks", "machine": machine()}
    if "parsers" in parts:
        result["parsers"] = parsers(args.rounds)
    if "fleet" in parts:
        result["fleet"] = fleet(args.instances, transports)
    if "suites" in parts:
        result["suites"] = suites(transports)
    save(args.name, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
