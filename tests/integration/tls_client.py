#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A client that keeps asking a TLS ringd while its certificate is rotated (ringd_reload.sh).

    tls_client.py HOST:PORT CA_FILE OUT STOP_FILE

Until STOP_FILE exists, it asks GET /healthz over two kinds of connection, verifying the
server against CA_FILE each time:
  - a new connection for every request, whose certificate's SHA-256 it notes;
  - one keep-alive connection, opened at the start and used throughout.
Each request appends a line to OUT: "new FINGERPRINT STATUS", "kept FINGERPRINT STATUS",
or "error KIND: WHY" for any failure (a refused handshake, a reset, a status that is not
200). Fingerprints are "AB:CD:..." as openssl x509 -fingerprint -sha256 prints them.
"""
import hashlib
import http.client
import os
import ssl
import sys
import time


def fingerprint(conn):
    der = conn.sock.getpeercert(binary_form=True)
    return ":".join("%02X" % b for b in hashlib.sha256(der).digest())


def ask(conn):
    conn.request("GET", "/healthz")
    r = conn.getresponse()
    r.read()
    return r.status


def main():
    addr, ca, out, stop = sys.argv[1:5]
    host, port = addr.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=ca)
    kept = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)
    with open(out, "a", buffering=1) as log:
        while not os.path.exists(stop):
            try:
                conn = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)
                conn.connect()
                fp = fingerprint(conn)
                status = ask(conn)
                conn.close()
                log.write("new %s %d\n" % (fp, status) if status == 200
                          else "error new: status %d\n" % status)
            except Exception as e:
                log.write("error new: %r\n" % e)
            try:
                status = ask(kept)
                log.write("kept %s %d\n" % (fingerprint(kept), status) if status == 200
                          else "error kept: status %d\n" % status)
            except Exception as e:
                log.write("error kept: %r\n" % e)
            time.sleep(0.01)


if __name__ == "__main__":
    main()
