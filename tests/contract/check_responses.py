# SPDX-License-Identifier: Apache-2.0
"""Checks every response that ringd sent during the integration suites against the OpenAPI
document.

usage: check_responses.py OPENAPI.json RECORDS-DIR

RECORDS-DIR holds the *.jsonl files that ringd wrote with RINGD_RECORD_RESPONSES
(server/record.h; tests/integration/lib.sh turns it on). For each response:
- its operation is the document's path and method that the request matches; a path the
  document lacks, or a method it does not list, must be answered as x-unrouted-responses
  says (404 for the one, 405 for the other, or one of the edge's refusals);
- its status must be one the operation lists (no "default" stands in for the rest);
- its Content-Type must be one of that response's media types, and a response the document
  gives no content must have none;
- a JSON body must validate against that media type's schema. Streams, files (logs, the
  backup) and /metrics are checked for status and Content-Type only.
Fails on any violation, and when nothing was recorded (outside CI that is a skip, exit 77:
every suite that records skipped here). Prints which operations and statuses were seen.
"""
import collections
import glob
import json
import os
import sys

from oas import Document, is_json, media_type

SKIP = 77


def check(doc, rec):
    """The list of what is wrong with one recorded response (empty: it conforms), and the
    operation's name for the coverage table."""
    method, status = rec["method"].lower(), str(rec["status"])
    template = doc.route(rec["target"])
    item = doc.paths.get(template, {}) if template else {}
    if method in item:
        op = item[method]
        name = op.get("operationId", "%s %s" % (method.upper(), template))
        responses = op.get("responses", {})
    else:
        name = "(unrouted %s)" % ("method" if template else "path")
        responses = dict(doc.doc.get("x-unrouted-responses", {}))
        # An unknown path is 404, never 405; a known path with another method the reverse.
        responses.pop("405" if template is None else "404", None)
    if status not in responses:
        return ["status %s is not listed (it lists %s)" % (status, ", ".join(sorted(responses)))], name
    resp = doc.resolve(responses[status])
    content = resp.get("content") or {}
    ct = rec.get("content_type")
    if not content:
        return ([] if ct is None else ["has a body (%s) where the document gives none" % ct]), name
    if ct is None:
        return ["has no body where the document gives %s" % ", ".join(content)], name
    want = media_type(ct)
    media = next((m for k, m in content.items() if media_type(k) == want or
                  (media_type(k)[0] == want[0] and not media_type(k)[1])), None)
    if media is None:
        return ["Content-Type %s is not one of %s" % (ct, ", ".join(content))], name
    kind = rec.get("kind")
    if kind != "json":
        return ([] if not is_json(ct) else ["a %s response declared as %s" % (kind, ct)]), name
    if "body_text" in rec:
        return ["the body is not JSON: %.200s" % rec["body_text"]], name
    if not is_json(ct):
        return ["a JSON body sent as %s" % ct], name
    if "schema" not in media:
        return ["%s has no schema to check the body against" % ct], name
    errors = sorted(doc.validator(media["schema"]).iter_errors(rec.get("body")), key=lambda e: list(e.path))
    return ["body%s: %s" % ("".join("[%r]" % p for p in e.path), e.message[:300]) for e in errors[:5]], name


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__)
    doc = Document(argv[1])
    files = sorted(glob.glob(os.path.join(argv[2], "*.jsonl")))
    seen = collections.Counter()
    problems = collections.OrderedDict()  # (name, status, what) -> (count, first example)
    total = 0
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError as e:
                    problems.setdefault(("(record)", "", "not JSON: %s" % e), [0, "%s:%d" % (path, n)])[0] += 1
                    continue
                total += 1
                what, name = check(doc, rec)
                seen[(name, rec["status"])] += 1
                for w in what:
                    key = (name, rec["status"], w)
                    where = "%s:%d %s %s" % (os.path.basename(path), n, rec["method"], rec["target"][:120])
                    problems.setdefault(key, [0, where])[0] += 1
    if total == 0:
        print("no responses recorded in %s: run the integration suites first (ctest runs them "
              "before this test)" % argv[2])
        return 1 if os.environ.get("CI") == "true" else SKIP
    ops = sorted({(t, m) for t, m, _ in doc.operations()})
    names = {(t, m): o.get("operationId", "%s %s" % (m, t)) for t, m, o in doc.operations()}
    print("%d responses from %d files" % (total, len(files)))
    for t, m in ops:
        statuses = sorted(s for (n, s) in seen if n == names[(t, m)])
        print("  %-20s %-7s %-28s %s" % (names[(t, m)], m.upper(), t,
                                         " ".join("%d×%d" % (s, seen[(names[(t, m)], s)]) for s in statuses)
                                         or "(never seen)"))
    for n in sorted({n for (n, _) in seen if n.startswith("(")}):
        print("  %-20s %s" % (n, " ".join("%d×%d" % (s, c) for (m, s), c in sorted(seen.items()) if m == n)))
    if problems:
        print("\n%d kinds of response do not conform to %s:" % (len(problems), argv[1]))
        for (name, status, what), (count, where) in problems.items():
            print("FAIL %s %s: %s (%d×; first: %s)" % (name, status, what, count, where))
        return 1
    print("every response conforms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
