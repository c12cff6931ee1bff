# SPDX-License-Identifier: Apache-2.0
"""ringmaster.client: ringd's REST API from Python, as ringctl speaks it.

    from ringmaster.client import Client, NotFound
    rm = Client()          # RINGMASTER_URL, RINGMASTER_TOKEN and RINGMASTER_CACERT, as ringctl
    job = rm.submit({"name": "resnet", "command": ["/usr/bin/python3", "train.py"],
                     "workers": {"min": 2, "max": 8}, "gpus_per_worker": 1,
                     "working_dir": "/home/alice/resnet"})
    for text in rm.logs(job["id"], follow=True):     # until the job ends
        print(text, end="")
    job = rm.wait(job["id"])                          # SUCCEEDED, FAILED, CANCELLED or STOPPED

Jobs, tokens, the cluster and the scheduler are the API's JSON objects, as dicts (see
/v1/openapi.json). Every error response raises an ApiError subclass chosen by the problem's
type (urn:ringmaster:problem:<kind>), carrying the problem document: NotFound, Conflict,
Invalid (with the field paths to fix), Unauthorized, TokenExpired, Forbidden,
ServiceUnavailable and SchedulerBusy (with retry_after)...; Unreachable when ringd cannot
be reached. Only the standard library: it needs neither numpy nor libring, so importing it
does not load the worker side of the package.

Like ringctl, a token goes in clear text only to loopback: any other http:// URL needs
insecure_http=True, else InsecureTransport. HTTPS is verified against the system's CAs, or
cacert's (ringd's own certificate, or a private CA).
"""
import codecs
import http.client
import ipaddress
import json
import os
import ssl
import time
import urllib.parse

__all__ = [
    "Client", "RingmasterError", "Unreachable", "InsecureTransport", "ApiError", "BadRequest",
    "Unauthorized", "TokenExpired", "Forbidden", "NotFound", "Conflict", "ContentTooLarge",
    "Invalid", "TooManyRequests", "ServerError", "ServiceUnavailable", "SchedulerBusy",
    "FINISHED",
]

# The states a job stays in until someone acts (STOPPED waits for resume): what wait() and
# the streams wait for, as ringd's event stream does.
FINISHED = frozenset(["SUCCEEDED", "FAILED", "CANCELLED", "STOPPED"])

DEFAULT_URL = "http://127.0.0.1:8080"
# As ringctl: a request gets a minute; a stream has no overall limit, and a stream that broke
# is opened again every second for up to RECONNECT_S without reaching ringd.
TIMEOUT_S = 60.0
RECONNECT_S = 30.0
EVENTS_QUIET_S = 45.0  # three of ringd's keep-alives (server/sse.c: SSE_KEEPALIVE_MS)
PROBLEM_PREFIX = "urn:ringmaster:problem:"
_REQUEST_TIMEOUT = object()  # _open's default: the client's timeout (None: no timeout at all)


class RingmasterError(Exception):
    """Anything this client raises of its own."""


class Unreachable(RingmasterError):
    """ringd could not be reached, or the connection broke (for RECONNECT_S, in a stream)."""


class InsecureTransport(RingmasterError, ValueError):
    """A token would go in clear text to a host that is not loopback."""


class ApiError(RingmasterError):
    """An error response. problem is its RFC 9457 document; kind its type without the
    urn:ringmaster:problem: prefix (e.g. "job-not-found"); retry_after the seconds of its
    Retry-After header, or None."""

    def __init__(self, status, problem, retry_after=None):
        self.status = status
        self.problem = problem
        self.type = problem.get("type", "")
        self.kind = self.type[len(PROBLEM_PREFIX):] if self.type.startswith(PROBLEM_PREFIX) else self.type
        self.title = problem.get("title", "")
        self.detail = problem.get("detail", "")
        self.instance = problem.get("instance", "")
        self.errors = problem.get("errors", [])
        self.retry_after = retry_after
        super().__init__("%s (HTTP %d %s)" % (self.detail or self.title or "request failed", status, self.kind))


class BadRequest(ApiError):
    """400: malformed JSON, a bad query parameter or header."""


class Unauthorized(ApiError):
    """401: no token, or an unknown or revoked one."""


class TokenExpired(Unauthorized):
    """401 token-expired: the token is past its expires_at."""


class Forbidden(ApiError):
    """403: an admin's operation, a token with no Unix user to run jobs as, a cross-site call."""


class NotFound(ApiError):
    """404: no such job, token or log (another owner's job is not found either)."""


class Conflict(ApiError):
    """409: the job's (or token's) state does not allow it: job-finished, job-active,
    job-cancelling, job-not-stopped, token-name-taken, last-admin-token."""


class ContentTooLarge(ApiError):
    """413: the body is over 1 MiB."""


class Invalid(ApiError):
    """422: a JobSpec (or token request) with fields to fix. fields lists their paths
    ("workers.max", "command[0]", "env.NAME"); errors has each with its detail."""

    @property
    def fields(self):
        return [e.get("field", "") for e in self.errors]


class TooManyRequests(ApiError):
    """429 too-many-streams: the token holds its share of streams; retry_after says when."""


class ServerError(ApiError):
    """5xx: ringd failed (500 internal, 507 no-space, ...)."""


class ServiceUnavailable(ServerError):
    """503: the database is busy or not ready; retry_after says when to try again."""


class SchedulerBusy(ServiceUnavailable):
    """503 scheduler-busy: a backend call holds the scheduler thread; nothing was done."""


_BY_KIND = {
    "token-expired": TokenExpired,
    "scheduler-busy": SchedulerBusy,
    "validation-error": Invalid,
    "idempotency-key-reused": Invalid,
    "too-many-streams": TooManyRequests,
}
_BY_STATUS = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
              413: ContentTooLarge, 422: Invalid, 429: TooManyRequests, 503: ServiceUnavailable}


def _error(status, body, headers=None):
    """The ApiError for an error response (its problem document, or its text)."""
    try:
        problem = json.loads(body) if body else {}
        if not isinstance(problem, dict):
            raise ValueError(problem)
    except ValueError:
        problem = {"title": http.client.responses.get(status, "Error"),
                   "detail": body.decode("utf-8", "replace")[:500] if isinstance(body, bytes) else str(body)}
    kind = str(problem.get("type", ""))[len(PROBLEM_PREFIX):]
    cls = _BY_KIND.get(kind) or _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    retry = None
    if headers is not None and headers.get("Retry-After", "").isdigit():
        retry = int(headers["Retry-After"])
    return cls(status, problem, retry)


def _loopback(host):
    """ringctl's rule: localhost, ::1, or an IPv4 address in 127/8 (not a name that looks
    like one, such as 127.example.com)."""
    if host in ("localhost", "::1"):
        return True
    try:
        return ipaddress.IPv4Address(host) in ipaddress.IPv4Network("127.0.0.0/8")
    except ValueError:
        return False


class Client:
    """One ringd. Thread-safe: every call opens its own connection.

    url: RINGMASTER_URL, else http://127.0.0.1:8080 ("host:port" means http://host:port).
    token: RINGMASTER_TOKEN, else none (a ringd started with --no-auth).
    cacert: RINGMASTER_CACERT: the CA (or ringd's certificate) to verify HTTPS with, else
        the system's.
    insecure_http: send the token over plain HTTP to a host that is not loopback.
    timeout: seconds for one request (not for streams).
    """

    def __init__(self, url=None, token=None, cacert=None, insecure_http=False, timeout=TIMEOUT_S):
        url = url or os.environ.get("RINGMASTER_URL") or DEFAULT_URL
        if "://" not in url:
            url = "http://" + url
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get("RINGMASTER_TOKEN") or None
        self.cacert = cacert if cacert is not None else os.environ.get("RINGMASTER_CACERT") or None
        self.timeout = timeout
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("RINGMASTER_URL %r is not http(s)://HOST[:PORT]" % self.url)
        self._https = parts.scheme == "https"
        self._host, self._port, self._prefix = parts.hostname, parts.port, parts.path
        if self.token and not insecure_http and not self._https and not _loopback(self._host):
            raise InsecureTransport(
                "refusing to send the token in clear text to %s; use an https:// URL (with cacert "
                "for a private CA), or insecure_http=True" % self.url)
        self._tls = None
        if self._https:
            self._tls = ssl.create_default_context(cafile=self.cacert)

    def __repr__(self):
        return "Client(%r)" % self.url

    # ---- HTTP ----

    def _connect(self, timeout):
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._tls)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _open(self, method, path, body=None, headers=None, timeout=_REQUEST_TIMEOUT):
        """Sends a request; returns (connection, response) for the caller to read and close.
        timeout is the socket's (None: none). Raises Unreachable when ringd cannot be
        reached, ApiError for an error status."""
        h = {"Accept": "application/json"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        conn = self._connect(self.timeout if timeout is _REQUEST_TIMEOUT else timeout)
        try:
            conn.request(method, self._prefix + path, body=data, headers=h)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            if isinstance(e, ssl.SSLCertVerificationError):
                raise Unreachable("cannot verify ringd's certificate at %s: %s (set RINGMASTER_CACERT "
                                  "to its CA)" % (self.url, e)) from e
            raise Unreachable("cannot reach ringd at %s: %s (set RINGMASTER_URL)" % (self.url, e)) from e
        if resp.status >= 400:
            try:
                text = resp.read()
            except (OSError, http.client.HTTPException):
                text = b""
            conn.close()
            raise _error(resp.status, text, resp.headers)
        return conn, resp

    def _call(self, method, path, body=None, headers=None, raw=False):
        """One request: the answer's JSON (None for no body), or its bytes and headers (raw)."""
        conn, resp = self._open(method, path, body, headers)
        try:
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise Unreachable("lost ringd at %s: %s" % (self.url, e)) from e
        finally:
            conn.close()
        if raw:
            return data, resp.headers
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError as e:
            raise RingmasterError("ringd sent something that is not JSON: %.200r" % data) from e

    @staticmethod
    def _job(job_id, suffix=""):
        # Escaped whole: "../tokens" must stay one segment, naming no other resource.
        return "/v1/jobs/" + urllib.parse.quote(str(job_id), safe="") + suffix

    @staticmethod
    def _query(**params):
        q = {k: v for k, v in params.items() if v is not None}
        return ("?" + urllib.parse.urlencode(q)) if q else ""

    # ---- jobs ----

    def submit(self, spec, idempotency_key=None):
        """Submits a JobSpec (a dict); returns the job (QUEUED). With idempotency_key, a retry
        returns the job the first request made instead of a second one."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else None
        return self._call("POST", "/v1/jobs", spec, headers)

    def get(self, job_id):
        """The job, with its attempts, scaling and latest progress."""
        return self._call("GET", self._job(job_id))

    def iter_jobs(self, state=None, label=None, owner=None, owner_id=None, page_size=None):
        """Every job that matches, oldest first, a page at a time."""
        token = None
        while True:
            page = self._call("GET", "/v1/jobs" + self._query(state=state, label=label, owner=owner,
                                                              owner_id=owner_id, page_size=page_size,
                                                              page_token=token))
            yield from page["jobs"]
            token = page.get("next_page_token")
            if not token:
                return

    def list(self, state=None, label=None, owner=None, owner_id=None, page_size=None):
        """The jobs that match (label "key=value"; owner and owner_id for admins), oldest
        first, every page of them."""
        return list(self.iter_jobs(state, label, owner, owner_id, page_size))

    def cancel(self, job_id):
        """Cancels the job: at once when queued or stopped, by SIGTERM then SIGKILL when it
        runs. Returns the job (it ends CANCELLED). Conflict when it has finished."""
        return self._call("POST", self._job(job_id, "/cancel"))

    def stop(self, job_id):
        """Stops the job gracefully (its workers checkpoint and exit 75); it ends STOPPED."""
        return self._call("POST", self._job(job_id, "/stop"))

    def resume(self, job_id):
        """Puts a STOPPED job back in the queue; it resumes from its checkpoint."""
        return self._call("POST", self._job(job_id, "/resume"))

    def delete(self, job_id):
        """Removes a finished job with its run directory (Conflict while it is active)."""
        self._call("DELETE", self._job(job_id))

    def wait(self, job_id, timeout=None, states=FINISHED):
        """Waits until the job is in one of states (by default: it has finished, or is
        STOPPED) and returns it. One event stream wakes it; the job's state is read again
        whenever an event might have brought it there. TimeoutError after timeout seconds
        (None: no limit); RingmasterError when the job finished in another state (a state
        it passed through while nobody looked does not count)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        job = self.get(job_id)
        if job["state"] not in states and job["state"] not in FINISHED:
            # The stream replays the job's history first: an old event in one of states is
            # checked against the job as it is now, and the same stream goes on.
            for event in self._follow_events(job_id, None, deadline):
                if event.get("state") in states or event.get("state") in FINISHED:
                    job = self.get(job_id)
                    if job["state"] in states or job["state"] in FINISHED:
                        break
            else:
                job = self.get(job_id)
        if job["state"] not in states:
            raise RingmasterError("job %s is %s and will not become %s" % (job_id, job["state"],
                                                                            " or ".join(sorted(states))))
        return job

    # ---- events ----

    def events(self, job_id, after=None, follow=False):
        """The job's events, oldest first (after: only those with a larger id). follow=True
        returns an iterator over them that goes on as they happen, until the job has
        finished, reconnecting (from the last event seen, as Last-Event-ID) when the stream
        breaks."""
        if follow:
            return self._follow_events(job_id, after, None)
        out = []
        while True:  # a page at a time (ringd sends at most 10000), until one comes back empty
            page = self._call("GET", self._job(job_id, "/events") + self._query(after=after))["events"]
            if not page:
                return out
            out += page
            after = page[-1]["id"]

    def _follow_events(self, job_id, after, deadline):
        last = after
        for _, resp in self._follow(job_id, deadline, lambda: self._events_stream(job_id, last, deadline)):
            reader = _SSE()  # an event cut off by a broken stream comes again whole
            for raw in _lines(resp, deadline):
                event = reader.feed(raw)
                if event is None:
                    continue
                kind, data, eid = event
                if kind in ("unauthorized", "token-expired"):  # the token stopped working
                    raise _error(401, data.encode())
                if eid is not None:
                    last = eid
                yield json.loads(data)

    def _events_stream(self, job_id, last, deadline):
        headers = {"Accept": "text/event-stream"}
        if last is not None:
            headers["Last-Event-ID"] = str(last)
        return self._open("GET", self._job(job_id, "/events"), headers=headers,
                          timeout=_events_timeout(deadline))

    # ---- logs ----

    def logs(self, job_id, rank=0, stream="stdout", tail=None, offset=None, follow=False):
        """A rank's output in the latest attempt (stream "stdout", "stderr", or "launcher":
        ringrun's own log, which says why a job that never reached its program failed), as
        text: the last tail lines, or from byte offset. follow=True returns an iterator of
        text as it is written (from the tail, when given), until the job has finished."""
        q = self._query(rank=rank, stream=stream, tail=tail, offset=offset)
        if not follow:
            data, _ = self._call("GET", self._job(job_id, "/logs") + q, raw=True)
            return data.decode("utf-8", "replace")
        return self._follow_logs(job_id, rank, stream, tail, offset)

    def _follow_logs(self, job_id, rank, stream, tail, offset):
        state = {"offset": offset or 0}
        if tail is not None:
            data, headers = self._call("GET", self._job(job_id, "/logs") +
                                       self._query(rank=rank, stream=stream, tail=tail), raw=True)
            if data:
                yield data.decode("utf-8", "replace")
            state["offset"] = int(headers.get("X-Ring-Log-Offset", state["offset"]))

        def open_stream():
            q = self._query(rank=rank, stream=stream, follow=1, offset=state["offset"])
            # No socket timeout: a log may be quiet for hours (TCP keeps the connection alive).
            return self._open("GET", self._job(job_id, "/logs") + q, timeout=None)

        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        for _, resp in self._follow(job_id, None, open_stream):
            while True:
                try:
                    chunk = resp.read1(65536)
                except (OSError, http.client.HTTPException):
                    break
                if not chunk:
                    break
                state["offset"] += len(chunk)
                text = decoder.decode(chunk)
                if text:
                    yield text
        tail_text = decoder.decode(b"", final=True)
        if tail_text:
            yield tail_text

    # ---- following a stream ----

    def _follow(self, job_id, deadline, open_stream):
        """Opens a stream with open_stream() and yields its (connection, response) for the
        caller to read; when it ends, returns if the job has finished, else opens it again a
        second later, giving up (Unreachable) after RECONNECT_S without ringd."""
        down_since = None
        while True:
            try:
                conn, resp = open_stream()
            except Unreachable:
                now = time.monotonic()
                down_since = down_since or now
                if now - down_since > RECONNECT_S:
                    raise
                _sleep(1.0, deadline)
                continue
            down_since = None
            try:
                yield conn, resp
            finally:
                conn.close()
            try:
                if self.get(job_id)["state"] in FINISHED:
                    return
            except Unreachable:
                down_since = time.monotonic()
            _sleep(1.0, deadline)

    # ---- the cluster and the scheduler ----

    def cluster(self):
        """The nodes, their slots and GPUs, free or held and by which job."""
        return self._call("GET", "/v1/cluster")

    def scheduler(self):
        """The policy, the others, the backend and the scheduler loop's figures."""
        return self._call("GET", "/v1/scheduler")

    def set_policy(self, policy):
        """Switches the scheduling policy (admins; until ringd restarts)."""
        return self._call("PUT", "/v1/scheduler", {"policy": policy})

    # ---- tokens ----

    def create_token(self, name, admin=False, user=None, expires_in=None, expires_at=None):
        """A new token (admins): its "token" is the secret, shown only here."""
        body = {"name": name, "admin": bool(admin)}
        for k, v in (("user", user), ("expires_in", expires_in), ("expires_at", expires_at)):
            if v is not None:
                body[k] = v
        return self._call("POST", "/v1/tokens", body)

    def tokens(self):
        """The tokens (admins: all; users: their principal's), never their secrets."""
        return self._call("GET", "/v1/tokens")["tokens"]

    def revoke_token(self, token_id):
        """Revokes a token at once; returns it."""
        return self._call("DELETE", "/v1/tokens/" + urllib.parse.quote(str(token_id), safe=""))

    # ---- operating ringd ----

    def backup(self, path):
        """Writes a backup of ringd's database to path (admins), atomically: a temporary
        file next to it, flushed to disk, then renamed."""
        conn, resp = self._open("GET", "/v1/admin/backup", timeout=None)
        tmp = "%s.tmp.%d" % (path, os.getpid())
        try:
            with open(tmp, "wb") as f:
                while True:
                    chunk = resp.read1(1 << 20)
                    if not chunk:
                        break
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        finally:
            conn.close()


def _events_timeout(deadline):
    """An event stream's socket timeout: ringd sends a keep-alive every 15 s, so a stream
    quiet for EVENTS_QUIET_S is a broken one (opened again); no longer than deadline."""
    if deadline is None:
        return EVENTS_QUIET_S
    return max(0.05, min(EVENTS_QUIET_S, deadline - time.monotonic()))


def _sleep(seconds, deadline):
    if deadline is not None and time.monotonic() + seconds > deadline:
        raise TimeoutError("timed out")
    time.sleep(seconds)


def _lines(resp, deadline):
    """The lines of a stream, as bytes, until it ends, breaks or is quiet for its socket's
    timeout (then TimeoutError if deadline has passed)."""
    while True:
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError("timed out")
        try:
            line = resp.readline()
        except (OSError, http.client.HTTPException):
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError("timed out") from None
            return
        if not line:
            return
        yield line


class _SSE:
    """Server-Sent Events, a line at a time: feed() returns (event, data, id) at the blank
    line that ends an event, else None."""

    def __init__(self):
        self.kind, self.data, self.id = "message", [], None

    def feed(self, raw):
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if not self.data:
                self.kind, self.id = "message", None
                return None
            out = (self.kind, "\n".join(self.data), self.id)
            self.kind, self.data, self.id = "message", [], None
            return out
        if line.startswith(":"):
            return None  # a keep-alive
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            self.data.append(value)
        elif field == "event":
            self.kind = value
        elif field == "id":
            self.id = int(value) if value.isdigit() else None
        return None
