#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for systemd's end of sd_notify, for ringd_notify.sh.

    sd_notify.py SOCKET LOG ADDR_FILE

Binds a Unix datagram socket at SOCKET (what NOTIFY_SOCKET names) and appends every
message it gets to LOG, one line per assignment, each datagram ended by a line "--". When
a datagram says READY=1 it asks GET /healthz of the ringd whose address ADDR_FILE holds
(ringd.addr), at once, and logs "healthz=<status>" (or "healthz=down: <why>"): systemd
starts what depends on ringd the moment READY=1 arrives, so ringd must serve by then.
Prints "listening" once bound; runs until killed.
"""
import os
import socket
import sys
import urllib.request


def healthz(addr_file):
    try:
        with open(addr_file) as f:
            addr = f.read().strip()
        with urllib.request.urlopen("http://%s/healthz" % addr, timeout=5) as r:
            return str(r.status)
    except Exception as e:  # any failure is the finding
        return "down: %s" % e


def main():
    path, log, addr_file = sys.argv[1:4]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    print("listening", flush=True)
    while True:
        msg = s.recv(4096).decode("utf-8", "replace")
        lines = msg.split("\n")
        if "READY=1" in lines:
            lines.append("healthz=" + healthz(addr_file))
        with open(log, "a") as f:
            f.write("\n".join(lines) + "\n--\n")
            f.flush()
            os.fsync(f.fileno())


if __name__ == "__main__":
    main()
