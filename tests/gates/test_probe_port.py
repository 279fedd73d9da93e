"""The probe port serves only the probes (k8s/networkpolicy.yaml opens it to any source,
since kubelet's probes come from the node: k8s/README.md)."""

from __future__ import annotations

from gate_support import GateCluster, raw

from artifactcheck_sim.running import RunningController


def test_a_probe_only_server_serves_no_api_and_no_metrics(
    cluster: GateCluster,
) -> None:
    """The server a separate --health-port starts answers the probes and 404 to the
    verdict API and /metrics: opening it to any source opens nothing else."""
    running = RunningController(cluster, identity="ctl-probes", admin=cluster.admin()).start()
    server = running.controller.serve_health(host="127.0.0.1", port=0, metrics=False)
    try:
        assert raw(server.port, b"GET /healthz HTTP/1.0\r\n\r\n").startswith("HTTP/1.0 200")
        for path in (b"/verdicts/v1/namespaces/shop/artifactchecks/web", b"/metrics"):
            answer = raw(server.port, b"GET " + path + b" HTTP/1.0\r\n\r\n")
            assert answer.startswith("HTTP/1.0 404"), (path, answer[:80])
        body = b'{"name": "web", "namespace": "shop", "metadata": {}}'
        answer = raw(
            server.port,
            b"POST /verdicts/v1/flagger HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body),
        )
        assert answer.startswith("HTTP/1.0 404"), answer[:80]
    finally:
        server.stop()
        running.stop()
