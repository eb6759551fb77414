"""`codefu launch -- codefu serve` across three hosts (network namespaces on a bridge): the service's
judge replicas land one per host, requests to the head are answered by replicas on every host, and a
SIGTERM to the head stops the service and every host's launcher with nothing left running."""

import json
import signal
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # minutes of Ray start-ups: the slow tier (`-m slow`)

CLIENT = str(Path(__file__).with_name("serve_client.py"))
TIMEOUTS = ["--join-timeout=180", "--nodes-timeout=180", "--head-lost-timeout=30"]


def test_requests_land_on_replicas_on_every_host(netns_cluster, tmp_path):
    cluster = netns_cluster(3)
    serve = [sys.executable, "-m", "codefu", "serve", "--host", "127.0.0.1", "--port", "8080"]
    launched = [
        cluster.launch(h, f"--sagemaker-config={cluster.sagemaker_config(h)}", *TIMEOUTS, entrypoint=serve)
        for h in cluster.hosts
    ]
    head = cluster.hosts[0]
    out = tmp_path / "client.json"
    client = cluster.run(
        head, [sys.executable, CLIENT, "--url", "http://127.0.0.1:8080", "--out", str(out)], "client"
    )
    try:
        code = client.wait(600)
    except Exception:
        raise AssertionError({r.host.name: r.output()[-3000:] for r in [*launched, client]}) from None
    assert code == 0, (client.output(), launched[0].output()[-3000:])
    result = json.loads(out.read_text())
    assert result["requests"] == result["right"] == 60, result
    assert result["statuses"] == {"Success": 60}, result
    assert sorted(result["by_node"]) == sorted(h.ip for h in cluster.hosts), result  # every host judged
    assert "listening on http://127.0.0.1:8080" in launched[0].output()

    launched[0].proc.send_signal(signal.SIGTERM)  # the head forwards it to `codefu serve`
    codes = cluster.wait_all(launched, 180)
    logs = {r.host.name: r.output()[-3000:] for r in launched}
    assert codes == {"algo-1": 0, "algo-2": 0, "algo-3": 0}, logs
    assert "the entrypoint ended with status 0" in logs["algo-1"]
    assert cluster.wait_empty() == {}
