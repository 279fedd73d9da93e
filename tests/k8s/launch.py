"""The real ``artifactcheck controller`` process against a simulated cluster.

Why: the tests that need the process itself (SIGTERM handling, probe and metrics
ports, log format) start it the same way: as ``python -m artifactcheck controller``,
scoped to the cluster's ``shop`` namespace and holding the Lease there, bound to
loopback, reading the admin configuration from a file. One launcher keeps those
flags in one place; each test adds only the flags it is about.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tenant_support import TenantCluster, admin_config, write_admin_config


def controller_process(
    cluster: TenantCluster,
    tmp_path: Path,
    *,
    health_port: int,
    metrics_port: int,
    identity: str = "proc-1",
    kubeconfig: str | None = None,
    extra: Sequence[str] = (),
) -> subprocess.Popen[str]:
    """Start the controller (``extra``: more flags); stdout and stderr are piped, as text.

    ``kubeconfig`` defaults to one the fake API server writes into ``tmp_path``.
    """
    config = kubeconfig or cluster.api.write_kubeconfig(str(tmp_path / "kubeconfig"))
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "artifactcheck",
            "controller",
            "--kubeconfig",
            config,
            "--namespace-scope",
            "shop",
            "--identity",
            identity,
            "--lease-namespace",
            "shop",
            "--bind",
            "127.0.0.1",
            "--health-port",
            str(health_port),
            "--metrics-port",
            str(metrics_port),
            "--admin-config",
            write_admin_config(admin_config(cluster), tmp_path),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
