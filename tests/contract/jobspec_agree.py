# SPDX-License-Identifier: Apache-2.0
"""The JobSpec schema of api/openapi.json and ringd's validator (api/jobspec.c) must accept
exactly the same specs, but for the differences the schema's description lists.

usage: jobspec_agree.py OPENAPI.json JOBSPEC_CHECK [COUNT]

Generates COUNT random specs (default 3000; RING_SEED picks the seed, printed) plus every
single mutation of a few valid ones, and runs them all through jsonschema and through
JOBSPEC_CHECK (jobspec_check.c: jobspec_parse as a local-backend ringd runs it). Values
come from the schema itself (each integer's bounds and one past them, each string's length
limits and one past, each enum and a value outside it, every type in every place), so a
bound changed on one side only is found. The deliberate differences, which JSON Schema
cannot say, are what `expected()` adds to the schema's verdict:
  1. workers.max >= workers.min;
  2. integers must be written as integers: 2.0 is a JSON Schema integer, not a Jansson one;
  3. no string may hold U+0000 (Jansson refuses it; 400 malformed-json);
  4. a label key is counted in bytes (63), JSON Schema counts characters;
  5. backend must be the one this ringd runs (local here).
(A duplicated key, 400 too, cannot be written from a Python dict; tests/unit/test_jobspec.c
has it. That workers.min workers fit on the cluster, and that working_dir exists, are
checked against the cluster and the file system, not the spec: the checker leaves them out.)
Every spec the validator refuses must get 422, but for those of difference 3 (400).
"""
import copy
import json
import os
import random
import subprocess
import sys

from oas import Document

FLOAT_TYPES = (float,)


def walk(v):
    yield v
    if isinstance(v, dict):
        for k, x in v.items():
            yield k
            yield from walk(x)
    elif isinstance(v, list):
        for x in v:
            yield from walk(x)


def expected(spec, schema_ok):
    """What jobspec.c should say: the schema's verdict with the listed differences."""
    if not schema_ok:
        return False
    w = spec.get("workers")
    if isinstance(w, dict) and w["max"] < w["min"]:
        return False  # 1
    if any(isinstance(x, float) for x in walk(spec)):
        return False  # 2 (the schema accepted it, so every float there is integral)
    if any(isinstance(x, str) and "\0" in x for x in walk(spec)):
        return False  # 3
    if any(len(k.encode()) > 63 for k in spec.get("labels", {})):
        return False  # 4
    if spec.get("backend", "local") != "local":
        return False  # 5
    return True


class Values:
    """Candidate values for each JobSpec field, most taken from the schema's own bounds."""

    def __init__(self, schema, rnd):
        self.s = schema["properties"]
        self.r = rnd

    def integer(self, sch):
        lo, hi = sch.get("minimum"), sch.get("maximum")
        out = [0, 1, -1, 7, 2.0, "3", True, None, [1], {}]
        for b in (lo, hi):
            if b is not None:
                out += [b - 1, b, b + 1]
        if lo is not None and hi is not None:
            out.append(self.r.randint(lo, hi))
        return out

    def name(self):
        return ["job", "a", "A.b_c-9", "x" * 128, "x" * 129, "", "bad name", "naïve", "j/k",
                "tab\t", "nul\0", 5, None, ["job"]]

    def command(self):
        long_ok = ["/bin/true"] + ["a"] * (self.s["command"]["maxItems"] - 1)
        return [["/bin/true"], ["true"], ["train.py", "--x"], ["./train"], ["bin/train"],
                ["/bin/echo", ""], [""], [], long_ok, long_ok + ["one too many"], ["/bin/true", 3],
                [None], "/bin/true", {"0": "/bin/true"}, ["/bin/echo", "nul\0"], ["é/x"], ["/é"]]

    def workers(self):
        sch = self.s["workers"]["oneOf"]
        ints = self.integer(sch[0])
        objs = [{"min": 1, "max": 1}, {"min": 2, "max": 8}, {"min": 3, "max": 2}, {"min": 0, "max": 2},
                {"min": 1, "max": 0}, {"min": 1}, {"max": 4}, {}, {"min": 1, "max": 2, "x": 1},
                {"min": 1.0, "max": 2}, {"min": 1, "max": "2"}, {"min": 65536, "max": 65536},
                {"min": 65536, "max": 65537}, {"min": 1, "max": 65537}]
        return ints + objs

    def string_map(self, key):
        sch = self.s[key]
        most = sch["maxProperties"]
        if key == "env":
            keys = ["A", "_x", "PATH", "a1_B", "1A", "A-B", "", "RING_RANK", "RINGX", "ring_x", "É", "A B"]
            many = {"V%d" % i: "v" for i in range(most)}
        else:
            longest = sch["propertyNames"]["maxLength"]
            keys = ["team", "k", "x" * longest, "x" * (longest + 1), "", "é" * longest, "a=b", "nul\0"]
            many = {"k%d" % i: "v" for i in range(most)}
        out = [{k: "v"} for k in keys]
        out += [{}, {"A": 1}, {"A": None}, {"A": ""}, {"A": "nul\0"}, "A=1", ["A"], many,
                dict(many, extra="v")]
        return out

    def directory(self):
        return ["/tmp", "/", "/home/a b/é", "tmp", "", "./x", 5, None, "/tmp/nul\0"]

    def enum(self, key):
        return list(self.s[key]["enum"]) + ["other", "", 1, None, ["local"]]

    def of(self, key):
        if key in ("gpus_per_worker", "cpus_per_worker", "priority", "max_restarts"):
            return self.integer(self.s[key])
        if key in ("env", "labels"):
            return self.string_map(key)
        if key in ("working_dir", "checkpoint_dir"):
            return self.directory()
        if key in ("backend", "launcher"):
            return self.enum(key)
        return getattr(self, key)()


def split(doc, vals):
    """Each field's candidates, as (those its own schema accepts, the others)."""
    out = {}
    for key, sch in vals.s.items():
        v = doc.validator(sch)
        cands = vals.of(key)
        out[key] = ([c for c in cands if v.is_valid(c)], [c for c in cands if not v.is_valid(c)])
    return out


def random_spec(cands, rnd):
    """A spec of random fields, each value one its field accepts 6 times in 7: about half the
    specs are valid, and the rest are wrong in one or two places."""
    spec = {}
    for key, (good, bad) in cands.items():
        keep = 0.95 if key in ("name", "command") else 0.35
        if rnd.random() < keep:
            spec[key] = copy.deepcopy(rnd.choice(good if rnd.random() < 6 / 7 or not bad else bad))
    if rnd.random() < 0.05:
        spec[rnd.choice(["gpu_per_worker", "Name", "extra", ""])] = 1
    return spec


def mutations(base, vals):
    """Every single change of base: each field dropped, each candidate value, an unknown field."""
    for key in list(base):
        m = dict(base)
        del m[key]
        yield m
    for key in vals.s:
        for v in vals.of(key):
            yield dict(base, **{key: copy.deepcopy(v)})
    yield dict(base, unknown=True)


def main(argv):
    if len(argv) < 3:
        raise SystemExit(__doc__)
    doc = Document(argv[1])
    schema = doc.doc["components"]["schemas"]["JobSpec"]
    validator = doc.validator({"$ref": "#/components/schemas/JobSpec"})
    count = int(argv[3]) if len(argv) > 3 else 3000
    seed = int(os.environ.get("RING_SEED", "0") or 0) or random.randrange(1 << 30)
    rnd = random.Random(seed)
    vals = Values(schema, rnd)
    bases = [{"name": "a", "command": ["/bin/true"]},
             {"name": "b", "command": ["train.py"], "working_dir": "/tmp", "workers": {"min": 2, "max": 4},
              "gpus_per_worker": 1, "env": {"A": "1"}, "labels": {"t": "x"}, "backend": "local",
              "launcher": "mpirun", "priority": 5, "max_restarts": 2, "checkpoint_dir": "/ck"}]
    specs = [m for b in bases for m in mutations(b, vals)]
    cands = split(doc, vals)
    specs += [random_spec(cands, rnd) for _ in range(count)]
    specs += [1, "x", [], None, [{"name": "a", "command": ["/bin/true"]}]]  # not objects at all
    lines = "".join(json.dumps(s) + "\n" for s in specs)
    out = subprocess.run([argv[2]], input=lines.encode(), stdout=subprocess.PIPE, check=True)
    verdicts = out.stdout.decode().splitlines()
    if len(verdicts) != len(specs):
        raise SystemExit("jobspec_check answered %d of %d specs" % (len(verdicts), len(specs)))
    bad, accepted = [], 0
    for spec, verdict in zip(specs, verdicts):
        errors = list(validator.iter_errors(spec))
        schema_ok = not errors
        c_ok = verdict == "1"
        accepted += c_ok
        want = expected(spec, schema_ok)
        if c_ok != want:
            why = ("schema: %s" % errors[0].message[:120]) if errors else "schema: valid"
            bad.append("C %s, expected %s (%s): %.300s" % ("accepts" if c_ok else "refuses (%s)" % verdict,
                                                          "accept" if want else "refuse", why, json.dumps(spec)))
        elif not c_ok:
            status = verdict.split()[1]
            nul = any(isinstance(x, str) and "\0" in x for x in walk(spec))
            if status != ("400" if nul or not isinstance(spec, dict) else "422"):
                bad.append("C refuses with %s (want %s): %.300s" % (status, "400" if nul else "422",
                                                                     json.dumps(spec)))
    for b in bad[:40]:
        print("FAIL", b)
    print("seed %d: %d specs, %d accepted by both; %d disagreements" % (seed, len(specs), accepted, len(bad)))
    if accepted < len(specs) // 20 or accepted == len(specs):
        print("FAIL the specs are too one-sided to compare: change the generator")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
