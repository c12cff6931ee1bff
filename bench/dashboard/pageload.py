#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The dashboard's page load in headless Chromium: bench/dashboard/run.sh's driver.

With URL and TOKEN in the environment (a ringd holding many jobs), measures RUNS times, in
turn, a cold load (a new browser: nothing cached) and a warm one (the same tab again: the
assets revalidate, 304), each the time from navigation to the first page of rows painted:
the mark 'ringmaster:rows' the jobs view sets once its rows are in the DOM and a frame has
been painted (performance.now() is relative to the navigation's start). Also the first
contentful paint, and the page's weight: every asset's decoded (uncompressed) bytes, from
the Resource Timing API. Prints one JSON object per measurement kind.
"""
import json
import os
import shutil
import statistics
import sys
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

URL, TOKEN = os.environ["URL"], os.environ["TOKEN"]
RUNS = int(os.environ.get("RUNS", "7"))

MEASURE = """
const done = arguments[arguments.length - 1];
(function look() {
  const m = performance.getEntriesByName('ringmaster:rows')[0];
  if (!m) return setTimeout(look, 5);
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  const res = performance.getEntriesByType('resource').filter((r) => !r.name.includes('/v1/'));
  const nav = performance.getEntriesByType('navigation')[0];
  done({rows_ms: m.startTime, rows: Number(document.body.dataset.rows),
        fcp_ms: fcp ? fcp.startTime : null,
        bytes: nav.decodedBodySize + res.reduce((a, r) => a + r.decodedBodySize, 0),
        files: 1 + res.length});
})();
"""


def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="ring-bench-chromium-")
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--no-first-run", "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--window-size=1400,1000", "--user-data-dir=" + profile):
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"),
                         options=opts)
    d.set_script_timeout(30)
    return d, profile


def load(d):
    """Navigates to the dashboard (the token already in the tab) and measures."""
    d.get(URL + "/")
    return d.execute_async_script(MEASURE)


def main():
    cold, warm = [], []
    for _ in range(RUNS):
        d, profile = browser()
        try:
            # The token into this tab's session storage, from a page of the same origin that
            # is not the dashboard (the icon), so that the dashboard's own load is cold.
            d.get(URL + "/ui/icon.svg")
            d.execute_script("sessionStorage.setItem('ringmaster.token', arguments[0])", TOKEN)
            cold.append(load(d))
            warm.append(load(d))
        finally:
            d.quit()
            shutil.rmtree(profile, ignore_errors=True)
    for name, runs in (("cold", cold), ("warm", warm)):
        rows = [r["rows_ms"] for r in runs]
        fcp = [r["fcp_ms"] for r in runs if r["fcp_ms"] is not None]
        print(json.dumps({"bench": "dashboard", "impl": "chromium-headless", "cache": name,
                          "runs": len(runs), "rows": runs[0]["rows"],
                          "first_rows_median_ms": round(statistics.median(rows), 1),
                          "first_rows_max_ms": round(max(rows), 1),
                          "first_paint_median_ms": round(statistics.median(fcp), 1) if fcp else None,
                          "page_bytes": cold[0]["bytes"], "files": cold[0]["files"]}))


if __name__ == "__main__":
    sys.exit(main())
