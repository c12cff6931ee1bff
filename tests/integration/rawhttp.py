# SPDX-License-Identifier: Apache-2.0
"""Sends raw bytes to an HTTP server and reports every response that comes back.

curl cannot send what an attacker sends (two Content-Lengths, a request smuggled after
another, a NUL in a path), so the hostile-input tests speak HTTP/1.1 through this.

usage: rawhttp.py HOST:PORT [--wait SECONDS] < request-bytes
Prints one JSON object per response: {"status", "headers" (lower-case names), "body"},
then {"closed": true|false}: whether the server closed the connection within the wait.
Escapes like \\r\\n and \\x00 in the input are decoded, so requests can be written as text.
"""
import json
import socket
import sys
import time


def parse(buf):
    """Splits complete responses off the front of buf; returns (responses, rest)."""
    out = []
    while True:
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return out, buf
        head = buf[:end].decode("latin-1").split("\r\n")
        status = int(head[0].split()[1]) if len(head[0].split()) > 1 else 0
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers.setdefault(name.strip().lower(), []).append(value.strip())
        rest = buf[end + 4:]
        if "content-length" in headers:
            n = int(headers["content-length"][0])
            if len(rest) < n:
                return out, buf
            body, buf = rest[:n], rest[n:]
        elif headers.get("transfer-encoding", [""])[0].lower() == "chunked":
            body, pos = b"", 0
            while True:
                eol = rest.find(b"\r\n", pos)
                if eol < 0:
                    return out, buf
                size = int(rest[pos:eol].split(b";")[0], 16)
                if len(rest) < eol + 2 + size + 2:
                    return out, buf
                body += rest[eol + 2:eol + 2 + size]
                pos = eol + 2 + size + 2
                if size == 0:
                    break
            buf = rest[pos:]
        else:
            body, buf = rest, b""
        out.append({"status": status, "headers": {k: v[0] if len(v) == 1 else v
                                                  for k, v in headers.items()},
                    "body": body.decode("utf-8", "replace")})


def main():
    host, _, port = sys.argv[1].rpartition(":")
    wait = float(sys.argv[sys.argv.index("--wait") + 1]) if "--wait" in sys.argv else 2.0
    data = sys.stdin.read().encode("latin-1").decode("unicode_escape").encode("latin-1")
    s = socket.create_connection((host, int(port)), timeout=wait)
    s.sendall(data)
    buf, closed, deadline = b"", False, time.monotonic() + wait
    while time.monotonic() < deadline:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        buf += chunk
    responses, rest = parse(buf)
    for r in responses:
        print(json.dumps(r))
    if rest:
        print(json.dumps({"unparsed": rest.decode("latin-1")}))
    print(json.dumps({"closed": closed}))


if __name__ == "__main__":
    main()
