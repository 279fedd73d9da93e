"""The raw asyncio floor: fetch and sha256 every URL of a list, and nothing else.

    python bench/floor.py URLS [--connections 64]

One HTTP/1.1 keep-alive connection per host (plain ``asyncio`` streams), each host's
requests one after another on it, ``--connections`` hosts at once; each body is hashed
as it arrives (``Content-Length`` or chunked) and ``SHA256  URL`` printed, like
``sha256sum``. No URL safety, no retries, no manifests, no judgement, no report: the
least a Python program that hashes what a fleet serves must do, so what artifactcheck
spends above it is the price of its checks. Run as a file (not ``-m bench.floor``), so
its start-up is the interpreter's and asyncio's only.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
from urllib.parse import urlsplit

CHUNK = 1 << 16


async def body_sha256(reader: asyncio.StreamReader, head: bytes) -> str:
    """Read one response body after its head and return its sha256."""
    digest = hashlib.sha256()
    lines = head.lower().split(b"\r\n")
    length = next((int(x.split(b":", 1)[1]) for x in lines if x.startswith(b"content-length:")), -1)
    if length >= 0:
        while length > 0:
            piece = await reader.read(min(length, CHUNK))
            if not piece:
                raise ConnectionError("closed inside a body")
            digest.update(piece)
            length -= len(piece)
        return digest.hexdigest()
    if any(x.startswith(b"transfer-encoding:") and b"chunked" in x for x in lines):
        while size := int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16):
            digest.update(await reader.readexactly(size))
            await reader.readexactly(2)
        while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
            pass
        return digest.hexdigest()
    while piece := await reader.read(CHUNK):  # to the close
        digest.update(piece)
    return digest.hexdigest()


async def host(
    name: str, port: int, targets: list[tuple[str, str]], gate: asyncio.Semaphore, out: list[str]
) -> None:
    """Every request of one host on one keep-alive connection."""
    async with gate:
        reader, writer = await asyncio.open_connection(name, port)
        try:
            for url, target in targets:
                writer.write(
                    b"GET %s HTTP/1.1\r\nHost: %s:%d\r\nAccept-Encoding: identity\r\n\r\n"
                    % (target.encode(), name.encode(), port)
                )
                head = await reader.readuntil(b"\r\n\r\n")
                out.append(f"{await body_sha256(reader, head)}  {url}")
        finally:
            writer.close()


async def main(urls: list[str], connections: int) -> list[str]:
    by_host: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for url in urls:
        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        by_host.setdefault((parts.hostname or "", parts.port or 80), []).append((url, target))
    gate = asyncio.Semaphore(connections)
    out: list[str] = []
    await asyncio.gather(*(host(h, p, t, gate, out) for (h, p), t in by_host.items()))
    return out


if __name__ == "__main__":
    connections = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--connections" else 64
    with open(sys.argv[1], encoding="utf-8") as fh:
        listed = [line.strip() for line in fh if line.strip()]
    sys.stdout.write("\n".join(asyncio.run(main(listed, connections))) + "\n")
