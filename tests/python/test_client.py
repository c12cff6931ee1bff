# SPDX-License-Identifier: Apache-2.0
"""ringmaster.client against a real ringd (RINGD, started here with auth, as root mapped to
the user who runs the tests): jobs submitted, followed and waited for; stop, resume and
cancel; events and logs followed, and an event stream that resumes from Last-Event-ID
across a ringd killed and restarted under it; every error typed from its problem; tokens;
the cluster and the scheduler; HTTPS verified with a CA; tokens kept off clear text."""
import getpass
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import threading
import time

import pytest

from ringmaster import client as rc
from ringmaster.client import Client

RINGD = os.environ.get("RINGD")


class Ringd:
    """One ringd on a data directory; restartable on the same address."""

    def __init__(self, tmp, *args, env=None, listen="127.0.0.1:0"):
        if not RINGD:
            pytest.fail("RINGD must name the ringd binary (ctest sets it)")
        self.data = str(tmp / "data")
        self.args, self.extra, self.listen, self.log = args, env or {}, listen, str(tmp / "ringd.log")
        self.proc = None
        self.start()
        self.admin = open(os.path.join(self.data, "admin.token")).read().strip() if "--no-auth" not in args else None

    def start(self):
        os.makedirs(self.data, exist_ok=True)
        addr_file = os.path.join(self.data, "ringd.addr")
        if os.path.exists(addr_file):
            os.remove(addr_file)
        env = dict(os.environ, RINGD_SLOTS="2", RINGD_DEFAULT_USER=getpass.getuser())
        env.pop("LD_PRELOAD", None)  # an ASan runtime for libring.so is not ringd's concern
        records = os.environ.get("RING_CONTRACT_RECORDS")
        if records:  # the contract test checks what ringd answered (tests/contract)
            os.makedirs(records, exist_ok=True)
            env["RINGD_RECORD_RESPONSES"] = os.path.join(records, "python_client.%d.jsonl" % os.getpid())
        env.update(self.extra)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([RINGD, "--listen", self.listen, "--data-dir", self.data, *self.args],
                                         stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        while not (os.path.exists(addr_file) and os.path.getsize(addr_file) > 0):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("ringd did not start: " + open(self.log).read()[-2000:])
            time.sleep(0.05)
        self.addr = open(addr_file).read().strip()
        self.listen = self.addr  # a restart comes back where clients know it

    def client(self, token=None, **kw):
        return Client("http://" + self.addr, token=token or self.admin, **kw)

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        rc_ = self.proc.wait(timeout=60)
        if sig == signal.SIGTERM:
            assert rc_ == 0, "ringd exited %d after SIGTERM: %s" % (rc_, open(self.log).read()[-2000:])


@pytest.fixture(scope="module")
def ringd(tmp_path_factory):
    r = Ringd(tmp_path_factory.mktemp("ringd"))
    yield r
    r.stop()


@pytest.fixture
def rm(ringd):
    return ringd.client()


def job(name, script, **spec):
    return dict({"name": name, "command": ["/bin/sh", "-c", script]}, **spec)


# ---- jobs ----

def test_submit_wait_get_logs_list(rm):
    j = rm.submit(job("hello", "echo hello; echo oops >&2", labels={"suite": "client"}))
    assert j["state"] == "QUEUED" and j["id"].startswith("j-")
    done = rm.wait(j["id"], timeout=60)
    assert done["state"] == "SUCCEEDED" and done["attempts"][0]["exit_status"] == 0
    assert rm.get(j["id"])["spec"]["labels"] == {"suite": "client"}
    assert rm.logs(j["id"]) == "hello\n"
    assert rm.logs(j["id"], stream="stderr") == "oops\n"
    assert rm.logs(j["id"], tail=0) == ""
    assert [x["id"] for x in rm.list(label="suite=client")] == [j["id"]]
    assert j["id"] in [x["id"] for x in rm.list(state="SUCCEEDED")]
    assert j["id"] not in [x["id"] for x in rm.list(state="QUEUED")]


def test_list_follows_every_page(rm):
    ids = [rm.submit(job("page%d" % i, "true", labels={"paging": "yes"}))["id"] for i in range(5)]
    assert [x["id"] for x in rm.list(label="paging=yes", page_size=2)] == ids
    for i in ids:
        rm.wait(i, timeout=60)


def test_idempotency_key_returns_the_first_job(rm):
    spec = job("idem", "true")
    a = rm.submit(spec, idempotency_key="client-idem-1")
    b = rm.submit(spec, idempotency_key="client-idem-1")
    assert a["id"] == b["id"]
    with pytest.raises(rc.Invalid) as e:
        rm.submit(job("idem", "false"), idempotency_key="client-idem-1")
    assert e.value.kind == "idempotency-key-reused" and e.value.status == 422
    rm.wait(a["id"], timeout=60)


def test_stop_resume_cancel(rm):
    # A worker that checkpoints on SIGTERM: exit 75, "stopped, resumable".
    j = rm.submit(job("stoppable", "trap 'exit 75' TERM; while :; do sleep 0.05; done"))
    assert rm.wait(j["id"], states={"RUNNING"}, timeout=60)["state"] == "RUNNING"
    assert rm.stop(j["id"])["id"] == j["id"]
    assert rm.wait(j["id"], timeout=60)["state"] == "STOPPED"
    with pytest.raises(rc.Conflict) as e:
        rm.stop(j["id"])
    assert e.value.kind == "job-finished"
    assert rm.resume(j["id"])["state"] == "QUEUED"
    rm.wait(j["id"], states={"RUNNING"}, timeout=60)
    with pytest.raises(rc.Conflict) as e:
        rm.delete(j["id"])
    assert e.value.kind == "job-active"
    rm.cancel(j["id"])
    assert rm.wait(j["id"], timeout=60)["state"] == "CANCELLED"
    with pytest.raises(rc.Conflict) as e:
        rm.cancel(j["id"])
    assert e.value.kind == "job-finished" and "already CANCELLED" in e.value.detail
    with pytest.raises(rc.Conflict) as e:
        rm.resume(j["id"])
    assert e.value.kind == "job-not-stopped"
    rm.delete(j["id"])
    with pytest.raises(rc.NotFound):
        rm.get(j["id"])


def test_wait_times_out(rm):
    j = rm.submit(job("sleeper", "sleep 30"))
    t = time.monotonic()
    with pytest.raises(TimeoutError):
        rm.wait(j["id"], timeout=1.5)
    assert time.monotonic() - t < 10
    rm.cancel(j["id"])
    rm.wait(j["id"], timeout=60)
    with pytest.raises(rc.RingmasterError, match="will not become RUNNING"):
        rm.wait(j["id"], states={"RUNNING"})


# ---- events and logs ----

def test_events_history_and_follow(rm):
    j = rm.submit(job("evented", "sleep 0.5"))
    followed = list(rm.events(j["id"], follow=True))
    types = [e["type"] for e in followed]
    assert types[0] == "submitted" and types[-1] == "succeeded", types
    ids = [e["id"] for e in followed]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert rm.events(j["id"]) == followed
    assert rm.events(j["id"], after=ids[1]) == followed[2:]
    assert list(rm.events(j["id"], after=ids[1], follow=True)) == followed[2:]


def test_logs_follow_from_the_start_and_from_a_tail(rm):
    j = rm.submit(job("talker", "for i in 1 2 3 4 5 6; do echo line $i; sleep 0.2; done; printf 'é'"))
    text = "".join(rm.logs(j["id"], follow=True))
    assert text == "".join("line %d\n" % i for i in range(1, 7)) + "é"
    assert "".join(rm.logs(j["id"], tail=2, follow=True)) == "line 6\né"
    assert rm.logs(j["id"], offset=len("line 1\n")).startswith("line 2\n")


def test_event_stream_resumes_from_last_event_id_across_a_ringd_restart(tmp_path):
    """ringd is killed under a follower and started again on the same address: the follower
    reconnects with Last-Event-ID and sees every event once, in order."""
    r = Ringd(tmp_path)
    try:
        c = r.client()
        j = c.submit(job("survivor", "sleep 2"))
        seen, stream = [], c.events(j["id"], follow=True)
        seen.append(next(stream))  # submitted: the stream is open
        r.stop(signal.SIGKILL)
        killed_at = time.monotonic()
        r.start()
        seen += list(stream)
        assert time.monotonic() - killed_at < 60
        ids = [e["id"] for e in seen]
        assert ids == sorted(ids) and len(set(ids)) == len(ids), ids
        assert c.events(j["id"]) == seen
        assert seen[-1]["state"] in rc.FINISHED
    finally:
        r.stop()


def test_a_token_gets_its_share_of_streams(tmp_path):
    r = Ringd(tmp_path, env={"RINGD_STREAMS_PER_TOKEN": "1"})
    try:
        c = r.client()
        j = c.submit(job("watched", "sleep 30"))
        first = c.events(j["id"], follow=True)
        next(first)
        with pytest.raises(rc.TooManyRequests) as e:
            next(iter(c.events(j["id"], follow=True)))
        assert e.value.kind == "too-many-streams" and e.value.retry_after == 30
        first.close()
        c.cancel(j["id"])  # its events reach the closed stream, which ringd then ends
        deadline = time.monotonic() + 30
        while True:
            try:
                assert list(c.events(j["id"], follow=True))[-1]["state"] == "CANCELLED"
                break
            except rc.TooManyRequests:
                assert time.monotonic() < deadline, "the closed stream still holds its slot"
                time.sleep(0.2)
    finally:
        r.stop()


# ---- errors ----

def test_errors_are_typed_from_their_problem(ringd, rm):
    with pytest.raises(rc.NotFound) as e:
        rm.get("j-0000000000000000")
    assert (e.value.status, e.value.kind) == (404, "job-not-found")
    assert e.value.problem["instance"] == "/v1/jobs/j-0000000000000000"
    assert "there is no job j-0000000000000000" in str(e.value)
    with pytest.raises(rc.NotFound):
        rm.get("../tokens")  # one path segment, escaped: not another resource
    with pytest.raises(rc.Invalid) as e:
        rm.submit({"name": "bad", "command": ["/bin/true"], "workers": {"min": 3, "max": 2},
                   "gpu_per_worker": 1})
    assert sorted(e.value.fields) == ["gpu_per_worker", "workers.max"], e.value.errors
    assert e.value.kind == "validation-error"
    with pytest.raises(rc.BadRequest) as e:
        rm.list(page_size=0)
    assert e.value.kind == "bad-parameter"
    with pytest.raises(rc.Unauthorized) as e:
        ringd.client(token="ringd_000000000000_nope").list()
    assert e.value.kind == "unauthorized" and not isinstance(e.value, rc.TokenExpired)
    assert isinstance(e.value, rc.ApiError) and isinstance(e.value, rc.RingmasterError)


def test_the_mapping_of_kinds_and_statuses():
    def err(status, kind, headers=None):
        body = json.dumps({"type": "urn:ringmaster:problem:" + kind, "title": "t", "status": status,
                           "detail": "d", "instance": "/x"}).encode()
        return rc._error(status, body, headers)
    busy = err(503, "scheduler-busy", {"Retry-After": "2"})
    assert type(busy) is rc.SchedulerBusy and isinstance(busy, rc.ServiceUnavailable) and busy.retry_after == 2
    assert type(err(503, "busy")) is rc.ServiceUnavailable
    assert type(err(500, "internal")) is rc.ServerError and type(err(507, "no-space")) is rc.ServerError
    assert type(err(401, "token-expired")) is rc.TokenExpired
    assert type(err(413, "body-too-large")) is rc.ContentTooLarge
    assert type(err(405, "method-not-allowed")) is rc.ApiError
    odd = rc._error(502, b"<html>bad gateway</html>")
    assert type(odd) is rc.ServerError and "bad gateway" in odd.detail


def test_unreachable(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nobody listens there now
    with pytest.raises(rc.Unreachable, match="cannot reach ringd at http://127.0.0.1:%d" % port):
        Client("127.0.0.1:%d" % port).cluster()


# ---- tokens, the cluster, the scheduler, backups ----

def test_tokens(ringd, rm):
    t = rm.create_token("client-user", user=getpass.getuser(), expires_in=3600)
    assert t["token"].startswith("ringd_") and t["user"] == getpass.getuser() and "expires_at" in t
    assert t["id"] in [x["id"] for x in rm.tokens()]
    user = ringd.client(token=t["token"])
    assert [x["id"] for x in user.tokens()] == [t["id"]]
    with pytest.raises(rc.Forbidden) as e:
        user.create_token("sneaky")
    assert e.value.kind == "forbidden"
    with pytest.raises(rc.Forbidden):
        user.set_policy("dynamic")
    with pytest.raises(rc.Conflict) as e:
        rm.create_token("client-user", admin=True)
    assert e.value.kind == "token-name-taken"
    assert rm.revoke_token(t["id"])["revoked_at"]
    with pytest.raises(rc.Unauthorized):
        user.list()
    short = rm.create_token("client-brief", expires_in=1)
    time.sleep(2.1)
    with pytest.raises(rc.TokenExpired) as e:
        ringd.client(token=short["token"]).list()
    assert e.value.status == 401 and e.value.kind == "token-expired"


def test_cluster_scheduler_and_policy(rm):
    c = rm.cluster()
    assert c["backend"] == "local" and c["nodes"][0]["slots"] == 2
    s = rm.scheduler()
    assert s["policy"] in s["policies"]
    assert rm.set_policy("priority")["policy"] == "priority"
    assert rm.scheduler()["policy"] == "priority"
    with pytest.raises(rc.Invalid):
        rm.set_policy("lottery")
    rm.set_policy(s["policy"])


def test_backup(rm, tmp_path):
    rm.backup(str(tmp_path / "ringd.db"))
    db = sqlite3.connect(str(tmp_path / "ringd.db"))
    assert db.execute("SELECT count(*) FROM jobs").fetchone()[0] > 0
    assert not [p for p in os.listdir(tmp_path) if ".tmp." in p]


# ---- where a token may go ----

def test_a_token_goes_in_clear_text_only_to_loopback(monkeypatch):
    for url in ("http://10.1.2.3:8080", "ringd.example.com:8080", "http://127.example.com"):
        with pytest.raises(rc.InsecureTransport, match="clear text"):
            Client(url, token="ringd_x_y")
    for url in ("http://127.0.0.1:8080", "localhost:8080", "http://[::1]:8080", "127.1.2.3:80"):
        Client(url, token="ringd_x_y")
    Client("http://10.1.2.3:8080", token="ringd_x_y", insecure_http=True)
    Client("http://10.1.2.3:8080")  # no token, nothing to leak
    monkeypatch.setenv("RINGMASTER_URL", "ringd.example.com:8080/")
    monkeypatch.setenv("RINGMASTER_TOKEN", "ringd_x_y")
    with pytest.raises(rc.InsecureTransport):
        Client()
    monkeypatch.setenv("RINGMASTER_URL", "https://ringd.example.com:8443/")
    assert Client().url == "https://ringd.example.com:8443" and Client().token == "ringd_x_y"
    monkeypatch.delenv("RINGMASTER_URL")
    assert Client().url == "http://127.0.0.1:8080"


def test_https_is_verified(tmp_path, monkeypatch):
    if not shutil.which("openssl"):
        pytest.fail("needs openssl (contrib/deps.sh)")

    def ssl_(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=str(tmp_path))
    ssl_("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=ringtest-ca",
         "-keyout", "ca.key", "-out", "ca.pem")
    ssl_("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "key.pem", "-out", "req.pem")
    (tmp_path / "san").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ssl_("x509", "-req", "-in", "req.pem", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
         "-extfile", "san", "-out", "cert.pem")
    r = Ringd(tmp_path, "--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "key.pem"))
    try:
        url = "https://" + r.addr
        assert Client(url, token=r.admin, cacert=str(tmp_path / "ca.pem")).cluster()["backend"] == "local"
        monkeypatch.setenv("RINGMASTER_CACERT", str(tmp_path / "ca.pem"))
        assert Client(url, token=r.admin).scheduler()["backend"] == "local"
        monkeypatch.delenv("RINGMASTER_CACERT")
        with pytest.raises(rc.Unreachable, match="certificate"):
            Client(url, token=r.admin).cluster()
    finally:
        r.stop()


def test_calls_from_threads(rm):
    """One client, many threads: each call has its own connection."""
    out, errors = [], []

    def work():
        try:
            out.append(rm.submit(job("threaded", "true"))["id"])
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(out)) == 8
    for i in out:
        assert rm.wait(i, timeout=60)["state"] == "SUCCEEDED"
