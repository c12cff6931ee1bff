# SPDX-License-Identifier: Apache-2.0
"""What the contract tests share: api/openapi.json, its schemas as JSON Schema 2020-12
validators (OpenAPI 3.1's dialect), and which operation answers a request.

Debian's python3-jsonschema (4.10) only: /usr/bin/python3 sees it, a pyenv python3 does not.
"""
import json
import os
import re
import sys
from urllib.parse import unquote

try:
    import jsonschema
except ImportError as e:
    # Outside CI a skip (77, as tests/integration/lib.sh's skip); in CI a failure.
    print("%s: %s: the contract tests need Debian's python3-jsonschema (contrib/deps.sh installs "
          "it), run by /usr/bin/python3, not %s" % ("FAIL" if os.environ.get("CI") == "true" else "SKIP",
                                                    e, sys.executable))
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


class Document:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.doc = json.load(f)
        self.paths = self.doc.get("paths", {})
        self._resolver = jsonschema.RefResolver.from_schema(self.doc)
        # Literal paths first, then templates with fewer parameters, as OpenAPI 3.1 says a
        # server matches them ("/v1/jobs/x" is not "/v1/jobs/{id}" when both exist).
        def pattern(template):
            parts = re.split(r"(\{[^/{}]+\})", template)
            return re.compile("^" + "".join("[^/]+" if p.startswith("{") else re.escape(p)
                                            for p in parts) + "$")
        self._routes = sorted(((t.count("{"), t, pattern(t)) for t in self.paths),
                              key=lambda r: (r[0], r[1]))

    def resolve(self, node):
        """node, with a $ref (to this document) followed, as often as it takes."""
        while isinstance(node, dict) and "$ref" in node:
            _, node = self._resolver.resolve(node["$ref"])
        return node

    def validator(self, schema):
        cls = jsonschema.Draft202012Validator
        return cls(schema, resolver=self._resolver, format_checker=cls.FORMAT_CHECKER)

    def operations(self):
        """(template, method, operation) for every operation."""
        for template, item in self.paths.items():
            for method in METHODS:
                if method in item:
                    yield template, method, item[method]

    def route(self, target):
        """The template a request target's path matches (None: no path of this document).
        The path is %-decoded first, as libmicrohttpd hands it to ringd's routes."""
        path = unquote(target.split("?", 1)[0], errors="surrogateescape")
        for _, template, rx in self._routes:
            if rx.match(path):
                return template
        return None


def media_type(content_type):
    """'Text/Plain; charset=UTF-8' -> ('text/plain', 'charset=utf-8'), for comparing."""
    base, _, params = (content_type or "").partition(";")
    params = ";".join(sorted(p.strip().lower().replace(" ", "") for p in params.split(";") if p.strip()))
    return base.strip().lower(), params


def is_json(content_type):
    base, _ = media_type(content_type)
    return base == "application/json" or base.endswith("+json")
