#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The dashboard in a real browser (headless Chromium through Selenium) against a real ringd.

dashboard.sh starts ringd (auth on, the dynamic policy) and runs this with
    URL      ringd's address (http://127.0.0.1:PORT)
    TOKEN    the admin token
    TRAIN    the example trainer
    SHOTS    where the screenshots go (the build tree)
It checks that a bad token gets a clear message; that the jobs table updates live when a
job is submitted with curl; that a job's size chart shows the resize the dynamic policy
made; that Cancel on a job's page cancels it (CANCELLED in the API); that an admin can
switch the policy; and that the page breaks none of its Content-Security-Policy. Each step
waits for its condition with a deadline; a failure says which, with a screenshot.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

URL, TOKEN, TRAIN, SHOTS = (os.environ[k] for k in ("URL", "TOKEN", "TRAIN", "SHOTS"))
passed = int(os.environ.get("PASSED", "0"))  # dashboard.sh's checks come first


def ok(what):
    global passed
    passed += 1
    print(f"ok {passed} - {what}", flush=True)


def curl(method, path, body=None):
    """The API through curl, as a user would reach it: the parsed JSON body."""
    cmd = ["curl", "-sS", "-X", method, "-H", f"Authorization: Bearer {TOKEN}", URL + path]
    if body is not None:
        cmd[4:4] = ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out) if out else None


def submit(name, epochs, workers=(1, 4)):
    spec = {"name": name, "command": [TRAIN, "--epochs", str(epochs), "--step-sleep-ms", "20"],
            "workers": {"min": workers[0], "max": workers[1]}, "gpus_per_worker": 1,
            "labels": {"team": "vision" if name != "bert" else "nlp"}}
    return curl("POST", "/v1/jobs", spec)["id"]


def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="ring-chromium-")
    # As root Chromium needs --no-sandbox; the rest keep a test run quiet and offline.
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--no-first-run", "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--window-size=1400,1000", "--user-data-dir=" + profile,
              "--lang=en-GB"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(shutil.which("chromedriver") or "/usr/bin/chromedriver")
    return webdriver.Chrome(service=service, options=opts), profile


drv, profile = browser()
console = []


def logs():
    console.extend(drv.get_log("browser"))
    return console


def shot(name, height=None):
    if height:
        drv.set_window_size(1400, height)
    path = os.path.join(SHOTS, name)
    drv.save_screenshot(path)
    if height:
        drv.set_window_size(1400, 1000)
    return path


def fail(what):
    try:
        print("screenshot:", shot("failure.png"), file=sys.stderr)
        for e in logs():
            print("console:", e["level"], e["message"], file=sys.stderr)
    except WebDriverException:
        pass
    print(f"FAIL: {what}", file=sys.stderr)
    sys.exit(1)


def wait(what, cond, limit=60):
    """Polls cond() until it returns something true (returned), failing after limit s."""
    end = time.time() + limit
    last = None
    while time.time() < end:
        try:
            got = cond()
            if got:
                return got
        except WebDriverException as e:
            last = e
        time.sleep(0.1)
    fail(f"{what}: still not so after {limit} s" + (f" ({last.msg})" if last else ""))


def click(css, what):
    """Clicks what css selects, finding it again when the live page replaced the element
    between the find and the click (a row re-rendered by an event: a stale element)."""
    wait(f"a click on {what}", lambda: drv.find_element(By.CSS_SELECTOR, css).click() or True, 10)


def js(script, *args):
    return drv.execute_script(script, *args)


def row_state(job_id):
    return js("const r = document.querySelector(`tr[data-id='${arguments[0]}']`);"
              "return r ? r.dataset.state : null;", job_id)


try:
    # Sign in: a token ringd does not know gets told so, and nothing else happens.
    drv.get(URL + "/")
    field = wait("the sign-in form", lambda: drv.find_element(By.ID, "token"))
    field.send_keys("ringd_0123456789ab_" + "0" * 64)  # well formed, but unknown
    drv.find_element(By.ID, "signin").click()
    err = wait("a message for the bad token",
               lambda: drv.find_element(By.ID, "login-error").text.strip())
    if "ringd refused this token" not in err or "unknown or revoked" not in err:
        fail(f"the bad token's message is unclear: {err!r}")
    if js("return sessionStorage.length") != 0 or drv.find_element(By.ID, "nav").is_displayed():
        fail("a refused token was kept, or the dashboard opened")
    shot("login-refused.png")
    ok(f"a bad token gets a clear message: {err!r}")

    field = drv.find_element(By.ID, "token")
    field.clear()
    field.send_keys(TOKEN)
    drv.find_element(By.ID, "signin").click()
    wait("the jobs table to be painted", lambda: js("return document.body.dataset.rows") is not None)
    wait("the event stream to be live", lambda: drv.find_element(By.ID, "live").text == "live")
    if TOKEN in drv.current_url or js("return sessionStorage.getItem('ringmaster.token')") != TOKEN:
        fail("the token is in the URL, or not in the tab's session storage")
    ok("the right token opens the dashboard; the token is in session storage, not the URL")

    # Live: jobs submitted with curl appear, and their state changes, without a reload.
    marker = js("window.__same_page = 1; return 1")
    a = submit("resnet", 40)
    wait("job a's row to appear", lambda: row_state(a))
    wait("job a to show RUNNING", lambda: row_state(a) == "RUNNING")
    wait("job a to show 4 workers", lambda: js(
        "const r = document.querySelector(`tr[data-id='${arguments[0]}']`);"
        "return r && r.children[3].textContent.startsWith('4 ');", a), 30)
    # The dynamic policy needs a's speed before it shrinks it for b; a few seconds at 4 make
    # the size chart's picture readable.
    wait("job a to report progress and run 4 s", lambda: (lambda j: j.get("progress") is not None
         and j["attempts"] and j["attempts"][-1]["ran_s"] >= 4)(curl("GET", f"/v1/jobs/{a}")), 60)
    b = submit("bert", 40)
    wait("job b's row to appear", lambda: row_state(b))
    if js("return window.__same_page") != marker:
        fail("the page was reloaded")
    ok("jobs submitted with curl appear in the table live, with their state and workers")

    # The resize: a shrinks from 4 to 2 for b, and its page's size chart shows it.
    click(f"tr[data-id='{a}'] a.job", "job a's row")
    wait("job a's page", lambda: drv.find_element(By.CSS_SELECTOR, "svg.chart[data-sizes]"))
    sizes = wait("the size chart to show a resize 4 -> 2", lambda: js(
        "const s = document.querySelector('svg.chart[data-sizes]');"
        "return s && /(^|,)4,2(,|$)/.test(s.dataset.sizes) ? s.dataset.sizes : null"), 90)
    events = [e["message"] for e in curl("GET", f"/v1/jobs/{a}/events")["events"]
              if e["type"] == "resizing"]
    if not any("dynamic: shrink 4 -> 2" in m for m in events):
        fail(f"the API shows no dynamic shrink 4 -> 2 for job a: {events}")
    wait("the resize in the page's events",
         lambda: "dynamic: shrink 4 -> 2" in drv.find_element(By.CSS_SELECTOR, "ol.events").text)
    wait("rank 0's log", lambda: "epoch" in drv.find_element(By.CSS_SELECTOR, "pre.log").text, 60)
    # The picture: the chart once it has drawn a few seconds at the new size.
    wait("the chart to draw 3 s at 2 workers", lambda: js(
        "const s = document.querySelector('svg.chart[data-sizes]');"
        "return s && s.dataset.sizes.endsWith(',2') && Number(s.dataset.lastRan) >= 3"), 60)
    shot("job.png", 1500)
    shot("job-top.png", 1040)  # the README's picture: the charts, progress and events
    ok(f"job a's size chart shows the dynamic policy's resize (sizes {sizes}), with its event "
       "and rank 0's live log")

    # Cancel from the page: the button asks twice, then the job is CANCELLED in the API.
    drv.get(URL + f"/#/jobs/{b}")
    click("button[data-action='cancel']:not([disabled])", "job b's Cancel button")
    wait("Cancel to ask for confirmation", lambda: drv.find_element(
        By.CSS_SELECTOR, "button[data-action='cancel']").text == "Confirm cancel")
    if curl("GET", f"/v1/jobs/{b}")["state"] == "CANCELLED":
        fail("one click cancelled the job")
    click("button[data-action='cancel']", "Confirm cancel")
    wait("job b to be CANCELLED in the API", lambda: curl("GET", f"/v1/jobs/{b}")["state"] == "CANCELLED")
    wait("the page to show CANCELLED", lambda: "CANCELLED" in drv.find_element(By.CSS_SELECTOR, ".head h1").text)
    ok("Cancel on a job's page (confirmed) cancels it: CANCELLED in the API and on the page")

    # The cluster: which job holds which GPU, and utilisation over time.
    drv.find_element(By.CSS_SELECTOR, "nav a[data-view='cluster']").click()
    wait("job a on the cluster's GPUs", lambda: js(
        "return document.querySelectorAll(`.gpu.held[data-job='${arguments[0]}']`).length", a) >= 1)
    wait("the utilisation chart", lambda: drv.find_element(By.CSS_SELECTOR, "section.cluster svg.chart path.line"))
    shot("cluster.png")
    ok("the cluster page shows which job holds which GPU, and utilisation over time")

    # The scheduler: an admin switches the policy, and the API says so.
    drv.find_element(By.CSS_SELECTOR, "nav a[data-view='scheduler']").click()
    sel = wait("the policy switch", lambda: drv.find_element(By.ID, "policy"))
    drv.execute_script("arguments[0].value = 'fifo'", sel)
    drv.find_element(By.ID, "switch").click()
    wait("the policy to be fifo in the API", lambda: curl("GET", "/v1/scheduler")["policy"] == "fifo")
    wait("the page to show fifo", lambda: js(
        "const d = document.querySelector(\"dd[data-fact='policy']\"); return d && d.textContent === 'fifo'"))
    shot("scheduler.png")
    curl("PUT", "/v1/scheduler", {"policy": "dynamic"})
    ok("an admin switches the policy from the scheduler page")

    # The picture for the README: the jobs table with a finished job beside the others.
    c = submit("gpt-small", 1, (1, 1))
    wait("job c to finish", lambda: curl("GET", f"/v1/jobs/{c}")["state"] in ("SUCCEEDED", "FAILED"), 60)
    drv.find_element(By.CSS_SELECTOR, "nav a[data-view='jobs']").click()
    wait("job c's row to say SUCCEEDED", lambda: row_state(c) == "SUCCEEDED")
    shot("jobs.png", 600)

    # A user's token: their jobs only, no policy switch; revoked, the page signs out saying so.
    me = subprocess.run(["id", "-un"], check=True, capture_output=True, text=True).stdout.strip()
    viewer = curl("POST", "/v1/tokens", {"name": "viewer", "user": me})
    drv.find_element(By.ID, "signout").click()
    field = wait("the sign-in form after signing out", lambda: drv.find_element(By.ID, "token"))
    if js("return sessionStorage.length") != 0:
        fail("signing out left the token in session storage")
    field.send_keys(viewer["token"])
    drv.find_element(By.ID, "signin").click()
    wait("the viewer's empty table", lambda: js("return document.body.dataset.rows") == "0"
         and "No jobs yet" in drv.find_element(By.CSS_SELECTOR, "td.empty").text)
    drv.find_element(By.CSS_SELECTOR, "nav a[data-view='scheduler']").click()
    wait("the scheduler page to say only admins switch", lambda: "Only an admin token" in
         drv.find_element(By.CSS_SELECTOR, "section.scheduler").text)
    if drv.find_elements(By.ID, "switch"):
        fail("a user's token is offered the policy switch")
    curl("DELETE", f"/v1/tokens/{viewer['id']}")
    err = wait("the page to sign out once the token is revoked",
               lambda: drv.find_element(By.ID, "login-error").text.strip(), 30)
    if "revoked" not in err:
        fail(f"the revoked token's message is unclear: {err!r}")
    ok(f"a user sees only their jobs and no policy switch; revoked, the page signs out: {err!r}")

    # Nothing the page did broke its Content-Security-Policy, and no script failed.
    # (The network's own lines, such as the bad token's 401, are not the page's errors.)
    bad = [e["message"] for e in logs() if e.get("source") in ("javascript", "security")
           or "Content Security Policy" in e["message"]]
    if bad:
        fail("the browser reported errors: " + " | ".join(bad))
    ok("no script error and no Content-Security-Policy violation in the browser's console")
finally:
    try:
        drv.quit()
    except WebDriverException:
        pass
    shutil.rmtree(profile, ignore_errors=True)
print(f"{passed} passed, 0 failed")
