"""Client of the multi-host service test, run inside the head's namespace: waits for `codefu serve` at
--url, sends --requests /run_code calls from 8 threads, and writes which node answered each.

    python serve_client.py --url http://127.0.0.1:8080 --out result.json [--requests 60]
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

PROGRAM = '#include <cstdio>\nint main(){long long a,b;scanf("%lld %lld",&a,&b);printf("%lld\\n",a+b);}'


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--requests", type=int, default=60)
    args = p.parse_args()
    deadline = time.monotonic() + 300
    while True:
        try:
            with urllib.request.urlopen(args.url + "/ready", timeout=5) as r:
                if json.loads(r.read()).get("ready"):
                    break
        except (urllib.error.URLError, OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise SystemExit("the service never became ready")
        time.sleep(1)

    def call(i: int) -> tuple[str, str, bool]:
        body = json.dumps({"code": PROGRAM, "language": "cpp", "stdin": f"{i} {i}\n"}).encode()
        request = urllib.request.Request(args.url + "/run_code", data=body, method="POST")
        with urllib.request.urlopen(request, timeout=120) as r:
            answer = json.loads(r.read())
            node = r.headers.get("X-Codefu-Node", "")
        return node, answer["status"], answer["run_result"]["stdout"] == f"{2 * i}\n"

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, range(args.requests)))
    with open(args.out, "w") as f:
        json.dump(
            {
                "by_node": Counter(node for node, _, _ in results),
                "statuses": Counter(status for _, status, _ in results),
                "right": sum(ok for _, _, ok in results),
                "requests": len(results),
            },
            f,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
