#!/bin/sh
# Re-record docs/examples/investigate.txt and docs/examples/fleet.txt.
#
# Starts a simulated fleet on loopback (14 instances of release 1.4.2, a real Vite
# build; web-5 and web-10 serve release 1.4.1's bytes under 1.4.2's file names; the
# CDN answers 403 for the logo), writes its CheckSpec to a YAML file, and records the
# piped (plain text) output of:
#
#   artifactcheck investigate web-5 -c check.yaml --diff
#   artifactcheck fleet -c check.yaml
#
# Usage, from the repository root:  sh docs/examples/record.sh
# (ARTIFACTCHECK_EXAMPLES_DIR=DIR records into DIR instead: the suite records afresh
# and compares, tests/e2e/test_examples_recorded.py, so the examples show the code as
# it is.)
set -eu
cd "$(dirname "$0")/../.."
exec python - <<'PY'
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from artifactcheck_sim.fleet import SimFleet

OUT = Path(os.environ.get("ARTIFACTCHECK_EXAMPLES_DIR") or "docs/examples")
env = {**os.environ, "COLUMNS": "150"}
for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
    env.pop(name, None)

# ``artifactcheck investigate`` once cli.py registers it, else the module's own group.
probe = subprocess.run(
    [sys.executable, "-m", "artifactcheck", "investigate", "--help"],
    capture_output=True, env=env, check=False,
)
entry = ["-m", "artifactcheck"] if probe.returncode == 0 else ["-m", "artifactcheck.cli.investigate"]

with SimFleet(instances=14, version="1.4.2", first_host="127.95.0.1", cdn_host="127.95.1.1") as fleet:
    fleet.drift(4, serves="1.4.1")
    fleet.drift(9, serves="1.4.1")
    fleet.cdn_missing("assets/logo-m9-UFto3.svg", status=403)
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "check.yaml"
        config.write_text(yaml.safe_dump(fleet.spec()), encoding="utf-8")
        for name, args in (
            ("investigate", ["investigate", "web-5", "-c", str(config), "--diff"]),
            ("fleet", ["fleet", "-c", str(config)]),
        ):
            run = subprocess.run(
                [sys.executable, *entry, *args], capture_output=True, text=True, env=env,
                check=False,
            )
            shown = " ".join(["artifactcheck", *args]).replace(str(config), "check.yaml")
            text = f"$ {shown}\n{run.stdout}{run.stderr}(exit code {run.returncode})\n"
            (OUT / f"{name}.txt").write_text(text, encoding="utf-8")
            print(f"recorded {OUT / f'{name}.txt'} (exit {run.returncode})")
PY
