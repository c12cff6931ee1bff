# SPDX-License-Identifier: Apache-2.0
"""Checks the OpenAPI document itself, and that it describes the routes ringd has.

usage: lint_openapi.py OPENAPI.json ROUTE-SOURCE.c...

- every route in the C route tables (api/routes*.c, {"METHOD", "/path/{}", handler}) is an
  operation of the document, and every operation is a route (GET /metrics, which http.c
  serves itself, aside);
- every operation has a unique operationId, a summary and tags the document declares;
- every operation lists the statuses of the edge (x-unrouted-responses but 401, 404 and
  405), 401 unless it needs no token, and no "default";
- every error (4xx, 5xx) is application/problem+json; every path parameter is declared; every $ref resolves; every schema is valid JSON Schema
  2020-12; every response with content has a schema;
- every example (of a media type, a parameter or a header) validates against its schema.
"""
import json
import re
import sys

import jsonschema

from oas import Document, is_json

# server/http.c answers these before the API's routes: /metrics, and the dashboard's files
SERVED_BY_HTTP = {("get", "/metrics"), ("get", "/"), ("get", "/ui/{}")}


def c_routes(sources):
    routes = set()
    rx = re.compile(r'\{\s*"(GET|POST|PUT|DELETE|PATCH)",\s*"(/[^"]*)",\s*\w+\s*\}')
    for src in sources:
        with open(src, encoding="utf-8") as f:
            for method, path in rx.findall(f.read()):
                routes.add((method.lower(), path))
    return routes


def refs(node, out):
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            out.append(node["$ref"])
        for v in node.values():
            refs(v, out)
    elif isinstance(node, list):
        for v in node:
            refs(v, out)
    return out


def examples_of(node):
    """(example value, where) pairs of a media type, parameter or header object."""
    if "example" in node:
        yield node["example"], "example"
    for name, ex in (node.get("examples") or {}).items():
        yield ex.get("value"), "examples.%s" % name


def main(argv):
    if len(argv) < 3:
        raise SystemExit(__doc__)
    doc = Document(argv[1])
    d = doc.doc
    bad = []
    if d.get("openapi") != "3.1.0":
        bad.append("openapi is %r, not 3.1.0" % d.get("openapi"))
    for r in refs(d, []):
        try:
            doc.resolve({"$ref": r})
        except jsonschema.RefResolutionError as e:
            bad.append("$ref %s does not resolve: %s" % (r, e))
    tags = {t["name"] for t in d.get("tags", [])}
    edge = set(d.get("x-unrouted-responses", {})) - {"401", "404", "405"}
    if not edge:
        bad.append("x-unrouted-responses lists no edge statuses")
    ids = {}
    for template, method, op in doc.operations():
        where = "%s %s" % (method.upper(), template)
        oid = op.get("operationId")
        if not oid:
            bad.append("%s has no operationId" % where)
        elif oid in ids:
            bad.append("%s repeats operationId %s of %s" % (where, oid, ids[oid]))
        else:
            ids[oid] = where
        if not op.get("summary"):
            bad.append("%s has no summary" % where)
        if not op.get("tags") or not set(op["tags"]) <= tags:
            bad.append("%s has tags %s, not among the declared %s" % (where, op.get("tags"), sorted(tags)))
        responses = op.get("responses", {})
        if "default" in responses:
            bad.append("%s has a default response: list each status instead" % where)
        needs_token = op.get("security", d.get("security", [])) != []
        want = edge | ({"401"} if needs_token else set())
        missing = sorted(want - set(responses))
        if missing:
            bad.append("%s does not list %s" % (where, ", ".join(missing)))
        if not needs_token and "401" in responses:
            bad.append("%s needs no token but lists 401" % where)
        params = [doc.resolve(p) for p in doc.paths[template].get("parameters", []) + op.get("parameters", [])]
        declared = {p["name"] for p in params if p.get("in") == "path"}
        for name in re.findall(r"\{([^/{}]+)\}", template):
            if name not in declared:
                bad.append("%s does not declare its path parameter %s" % (where, name))
        for p in params:
            for value, at in examples_of(p):
                bad += ["%s parameter %s %s: %s" % (where, p["name"], at, e.message)
                        for e in doc.validator(p.get("schema", {})).iter_errors(value)]
        for status, r in responses.items():
            content = doc.resolve(r).get("content") or {}
            if status >= "400" and list(content) != ["application/problem+json"]:
                bad.append("%s %s is not application/problem+json alone" % (where, status))
        bodies = [("request", doc.resolve(op["requestBody"]))] if "requestBody" in op else []
        bodies += [(status, doc.resolve(r)) for status, r in responses.items()]
        for status, r in bodies:
            for ct, media in (r.get("content") or {}).items():
                if "schema" not in media:
                    bad.append("%s %s %s has no schema" % (where, status, ct))
                    continue
                for value, at in examples_of(media):
                    if not is_json(ct) and not isinstance(value, str):
                        bad.append("%s %s %s %s is not text" % (where, status, ct, at))
                    bad += ["%s %s %s %s: %s" % (where, status, ct, at, e.message[:200])
                            for e in doc.validator(media["schema"]).iter_errors(value)]
            for name, h in (r.get("headers") or {}).items():
                h = doc.resolve(h)
                for value, at in examples_of(h):
                    bad += ["%s %s header %s %s: %s" % (where, status, name, at, e.message)
                            for e in doc.validator(h.get("schema", {})).iter_errors(value)]
    for name, schema in d.get("components", {}).get("schemas", {}).items():
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as e:
            bad.append("components.schemas.%s is not JSON Schema 2020-12: %s" % (name, e.message))
    ops = {(m, re.sub(r"\{[^/{}]+\}", "{}", t)) for t, m, _ in doc.operations()}
    routes = c_routes(argv[2:])
    if not routes:
        bad.append("no routes found in %s" % " ".join(argv[2:]))
    for m, p in sorted(routes - ops):
        bad.append("ringd routes %s %s, which the document lacks" % (m.upper(), p))
    for m, p in sorted(ops - routes - SERVED_BY_HTTP):
        bad.append("the document has %s %s, which ringd does not route" % (m.upper(), p))
    for b in bad:
        print("FAIL", b)
    print("%d operations, %d routes: %s" % (len(ids), len(routes), "ok" if not bad else "%d problems" % len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
