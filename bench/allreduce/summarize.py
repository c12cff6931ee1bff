#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/allreduce/summarize.py: the median over runs of bench/allreduce's JSON rows.

    summarize.py [--json] FILE...

Reads the rows that run.sh --save-json writes (one JSON object per line, one per
implementation, np, size and run; other lines are ignored), from one invocation or from
several, and prints, for each np, one line per size with each implementation's median over
the runs of its busbw and of its time, and the ratios libring-shm / openmpi-vader,
libring-tcp / openmpi-tcp and libring-tcp / gloo-tcp. A ratio is the median of the same-run
ratios (the peer's time over libring's in the one run that timed both), not a ratio of
medians: a run that the machine slowed down slows both sides of its own ratio, so noise
that comes and goes between runs mostly cancels. With --json, one object per
(np, bytes, impl) instead, with the ratios on libring's rows.

A run is one (FILE, "run") pair: run.sh numbers its runs from 1 in each invocation, so the
same number in two files is two runs. Rows timed with different --batch are not merged.
Exit status: 0, 1 when a FILE cannot be read or holds a malformed row, 2 on bad usage.
"""
import json
import statistics
import sys

# (libring implementation, peer, the key of the ratio in the JSON rows)
PAIRS = (
    ("libring-shm", "openmpi-vader", "speedup_vs_openmpi_vader"),
    ("libring-tcp", "openmpi-tcp", "speedup_vs_openmpi_tcp"),
    ("libring-tcp", "gloo-tcp", "speedup_vs_gloo_tcp"),
)
IMPLS = ("libring-shm", "openmpi-vader", "libring-tcp", "openmpi-tcp", "gloo-tcp")
NEEDED = ("impl", "np", "bytes", "median_us", "busbw_gbs")


def fail(msg):
    print("summarize.py: " + msg, file=sys.stderr)
    sys.exit(1)


def load(paths):
    """Returns {(np, bytes, impl): {run: row}} and the set of batch sizes seen."""
    cells, batches = {}, set()
    for f, path in enumerate(paths):
        try:
            lines = open(path, encoding="utf-8").read().splitlines()
        except OSError as e:
            fail("cannot read %s: %s" % (path, e.strerror))
        for n, line in enumerate(lines, 1):
            if not line.startswith("{"):
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                fail("%s:%d: not a JSON object (%s)" % (path, n, e))
            if row.get("bench") != "allreduce":
                continue
            missing = [k for k in NEEDED if k not in row]
            if missing:
                fail("%s:%d: the row has no %s" % (path, n, ", ".join(missing)))
            batches.add(row.get("batch", 1))
            key = (int(row["np"]), int(row["bytes"]), row["impl"])
            run = (f, row.get("run", 1))
            if run in cells.setdefault(key, {}):
                fail("%s:%d: run %s already has a row for %s at np %d, %d bytes"
                     % (path, n, run[1], key[2], key[0], key[1]))
            cells[key][run] = row
    if len(batches) > 1:
        fail("rows timed with different --batch (%s) cannot be merged"
             % ", ".join(str(b) for b in sorted(batches)))
    return cells, batches


def summarize(cells):
    """One summary row per (np, bytes, impl), in np, bytes, implementation order."""
    order = {impl: i for i, impl in enumerate(IMPLS)}
    out = []
    for key in sorted(cells, key=lambda k: (k[0], k[1], order.get(k[2], len(IMPLS)), k[2])):
        np_, nbytes, impl = key
        runs = cells[key]
        row = {"bench": "allreduce", "impl": impl, "np": np_, "bytes": nbytes,
               "batch": next(iter(runs.values())).get("batch", 1), "runs": len(runs),
               "median_us": round(statistics.median(r["median_us"] for r in runs.values()), 1),
               "busbw_gbs": round(statistics.median(r["busbw_gbs"] for r in runs.values()), 4)}
        if all("algbw_gbs" in r for r in runs.values()):
            row["algbw_gbs"] = round(statistics.median(r["algbw_gbs"] for r in runs.values()), 4)
        for mine, peer, name in PAIRS:
            if impl != mine or (np_, nbytes, peer) not in cells:
                continue
            theirs = cells[(np_, nbytes, peer)]
            same = [theirs[run]["median_us"] / runs[run]["median_us"]
                    for run in runs if run in theirs and runs[run]["median_us"] > 0]
            if same:
                row[name] = round(statistics.median(same), 3)
                row[name.replace("speedup_", "runs_")] = len(same)
        out.append(row)
    return out


def table(rows):
    def cell(r, key, fmt):
        return fmt % r[key] if r and key in r else "-"

    by = {(r["np"], r["bytes"], r["impl"]): r for r in rows}
    for np_ in sorted({r["np"] for r in rows}):
        sizes = sorted({r["bytes"] for r in rows if r["np"] == np_})
        runs = sorted({r["runs"] for r in rows if r["np"] == np_})
        count = str(runs[0]) if len(runs) == 1 else "%d-%d" % (runs[0], runs[-1])
        print("np %d: median over %s run%s of each implementation's busbw (GB/s) and time (us)"
              % (np_, count, "" if runs == [1] else "s"))
        head = "%10s |" % "bytes"
        for impl in IMPLS:
            head += " %13s %10s |" % (impl, "us")
        print(head + " %7s %7s %7s" % ("shm/vdr", "tcp/omt", "tcp/glo"))
        for b in sizes:
            line = "%10d |" % b
            for impl in IMPLS:
                r = by.get((np_, b, impl))
                line += " %13s %10s |" % (cell(r, "busbw_gbs", "%.3f"), cell(r, "median_us", "%.1f"))
            shm, tcp = by.get((np_, b, "libring-shm")), by.get((np_, b, "libring-tcp"))
            line += " %7s %7s %7s" % (cell(shm, "speedup_vs_openmpi_vader", "%.2f"),
                                      cell(tcp, "speedup_vs_openmpi_tcp", "%.2f"),
                                      cell(tcp, "speedup_vs_gloo_tcp", "%.2f"))
            print(line)
        print()
    print("Each run's figure is bench_allreduce's median over >= 5 timed iterations (each the")
    print("slowest rank's, after a barrier); busbw = bytes/time * 2(np-1)/np, GB/s = 1e9 B/s.")
    print("shm/vdr = libring-shm vs openmpi-vader, tcp/omt = libring-tcp vs openmpi-tcp, tcp/glo =")
    print("libring-tcp vs gloo-tcp: the median over runs of the same run's peer time / libring time")
    print("(> 1: libring faster, its busbw higher by that factor).")


def main(argv):
    json_out = False
    paths = []
    for a in argv:
        if a == "--json":
            json_out = True
        elif a == "--version":
            print("bench/allreduce/summarize.py (ringmaster)")
            return 0
        elif a.startswith("-"):
            print("usage: summarize.py [--json] FILE...", file=sys.stderr)
            return 2
        else:
            paths.append(a)
    if not paths:
        print("usage: summarize.py [--json] FILE...", file=sys.stderr)
        return 2
    cells, _ = load(paths)
    if not cells:
        fail("no allreduce rows in %s" % " ".join(paths))
    rows = summarize(cells)
    if json_out:
        for r in rows:
            print(json.dumps(r, separators=(",", ":")))
    else:
        table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
