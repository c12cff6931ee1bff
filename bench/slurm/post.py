#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""POSTs one JSON body N times, one request after the other on one keep-alive connection,
and prints what it saw as one JSON object: {"n", "ok", "errors", "wall_s", "latency_us":
[...], "ids": [...]}. bench/slurm/run.sh uses it for ringd's POST /v1/jobs and slurmrestd's
POST /slurm/v0.0.38/job/submit, so that both REST servers are measured by the same client.

    post.py URL N BODY_FILE [HEADER: VALUE ...]

An id is taken from each answer: ringd's "id", slurmrestd's "job_id".
"""
import http.client
import json
import sys
import time
import urllib.parse


def main():
    if len(sys.argv) < 4:
        sys.exit("usage: post.py URL N BODY_FILE [HEADER: VALUE ...]")
    url = urllib.parse.urlsplit(sys.argv[1])
    n = int(sys.argv[2])
    with open(sys.argv[3], "rb") as f:
        body = f.read()
    headers = {"Content-Type": "application/json"}
    for h in sys.argv[4:]:
        k, _, v = h.partition(":")
        headers[k.strip()] = v.strip()
    path = url.path + ("?" + url.query if url.query else "")
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    lat, ids, errors, first_error = [], [], 0, None
    start = time.perf_counter()
    for _ in range(n):
        t0 = time.perf_counter()
        try:
            conn.request("POST", path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            errors += 1
            first_error = first_error or str(e)
            conn.close()
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
            continue
        lat.append((time.perf_counter() - t0) * 1e6)
        if resp.status // 100 != 2:
            errors += 1
            first_error = first_error or "%d %s" % (resp.status, data[:200].decode(errors="replace"))
            continue
        doc = json.loads(data)
        ids.append(str(doc.get("id", doc.get("job_id", ""))))
    wall = time.perf_counter() - start
    print(json.dumps({"n": n, "ok": len(ids), "errors": errors, "first_error": first_error,
                      "wall_s": wall, "latency_us": lat, "ids": ids}))


if __name__ == "__main__":
    main()
