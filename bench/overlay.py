"""Measure changes proposed for files this benchmark work does not own.

``python -m bench.overlay DIR [--cli-run] [--yaml-c] [--json-compact]`` copies the
package to ``DIR/artifactcheck`` and applies the proposed edits there (each one a
literal replacement that fails loudly when the code has moved on), so a benchmark can
run against it with ``--overlay DIR`` (PYTHONPATH=DIR) without touching the repo:

--cli-run       cli.py: ``asyncio.run(run_check(...))`` returns the Report as the main
                task's result; Python 3.11's asyncio.run then restores the SIGINT
                handler with ``signal.signal``, whose enum conversion formats
                ``repr(main_task)``, result included: the whole Report, every manifest
                entry of every instance (seconds of CPU and hundreds of MB at 1,000
                instances). The edit runs a wrapper coroutine that returns None.
--yaml-c        cli_options.py: parse the spec with libyaml (``yaml.CSafeLoader``), ~10x
                faster than the pure-Python loader for a 1,000-target spec.
--json-compact  act/report.py: ``json.dumps`` without ``indent`` uses the C encoder.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from .common import ROOT

EDITS: dict[str, list[tuple[str, str, str]]] = {
    "cli-run": [
        (
            "cli.py",
            "            return asyncio.run(run_check(spec, **kw))",
            "            return _run_returning(run_check(spec, **kw))",
        ),
        (
            "cli.py",
            "def _run_with_progress(",
            "def _run_returning(coro: Any) -> Any:\n"
            "    box: list[Any] = []\n\n"
            "    async def main() -> None:\n"
            "        box.append(await coro)\n\n"
            "    asyncio.run(main())\n"
            "    return box[0]\n\n\n"
            "def _run_with_progress(",
        ),
    ],
    "yaml-c": [
        (
            "cli_options.py",
            'loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}',
            'loaded = yaml.load(path.read_text(encoding="utf-8"), '
            "Loader=getattr(yaml, 'CSafeLoader', yaml.SafeLoader)) or {}",
        ),
    ],
    "json-compact": [
        (
            "act/report.py",
            "return json.dumps(to_json(report), indent=2, sort_keys=False)",
            "return json.dumps(to_json(report), sort_keys=False)",
        ),
    ],
}


def build(dest: Path, names: list[str]) -> Path:
    """Copy the package to ``dest`` and apply the named edits; returns ``dest``."""
    target = dest / "artifactcheck"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(ROOT / "artifactcheck", target, ignore=shutil.ignore_patterns("__pycache__"))
    for name in names:
        for rel, old, new in EDITS[name]:
            path = target / rel
            text = path.read_text(encoding="utf-8")
            if text.count(old) != 1:
                raise SystemExit(f"overlay {name}: {rel} no longer contains {old!r}")
            path.write_text(text.replace(old, new), encoding="utf-8")
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path)
    for name in EDITS:
        parser.add_argument(f"--{name}", action="store_true")
    args = parser.parse_args(argv)
    names = [n for n in EDITS if getattr(args, n.replace("-", "_"))]
    build(args.dest, names)
    print(f"{args.dest}: {', '.join(names) or 'no edits'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
