"""Open every page of the built docs in headless Chromium, as a reader would (issue 44).

    python tools/check_docs_browser.py [--site DIR] [--shots DIR] [--chromium PATH]

Without --site it builds the site first (sphinx -W into a temporary folder). The site is served
on 127.0.0.1 (a thread of this process: http.server) and each page is loaded at 1280 x 900 in
Debian's ``chromium``, driven through its DevTools protocol (a small client on websocket-client;
nothing is downloaded). A page fails on:

- raw math: a ``.math`` element MathJax did not typeset (no ``mjx-container`` in it), or the
  MathJax script served from anywhere but the site itself;
- a missing image: an ``<img>`` not loaded (naturalWidth 0) or a failed request for one;
- a console error: an uncaught exception, ``console.error``, or a failed resource load;
- a code block wider than the content column: a ``pre`` whose box reaches past the article's
  right edge, or whose text is cut (it scrolls sideways: scrollWidth > clientWidth);
- a table of the text (``article table.docutils``) that scrolls sideways in its column (the
  general and module indexes, Sphinx's own, are left out).

It also searches (search.html?q=LSTM must list pages) and opens the index in the dark scheme
(furo follows the reader's prefers-color-scheme; its background must be dark).

The screenshots of the index, quickstart and performance pages (and index-dark.png) go to --shots (default:
$RNNFAST_DOCS_SHOTS, else a new temporary folder), whose path is printed. Exit status 0 when
every page passes, 1 when one fails (each failure printed), 2 when chromium is missing.
"""

from __future__ import annotations

import argparse
import base64
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ("index", "quickstart", "performance")
WIDTH, HEIGHT = 1280, 900

# Run in each page once it has loaded: waits for MathJax's typesetting, then measures.
CHECK_JS = r"""
(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  const out = {raw_math: [], images: [], wide_code: [], wide_tables: [], mathjax_src: []};
  for (const s of document.querySelectorAll('script[src*="mathjax" i], script[src*="tex-" i]')) {
    out.mathjax_src.push(s.getAttribute('src'));
  }
  for (const el of document.querySelectorAll('.math')) {
    if (!el.querySelector('mjx-container')) out.raw_math.push(el.textContent.slice(0, 80));
  }
  for (const img of document.querySelectorAll('img')) {
    if (!img.complete || img.naturalWidth === 0) out.images.push(img.getAttribute('src'));
  }
  const col = document.querySelector('article') || document.querySelector('.body');
  const right = col ? col.getBoundingClientRect().right : window.innerWidth;
  for (const pre of document.querySelectorAll('pre')) {
    const box = pre.getBoundingClientRect();
    if (box.width === 0) continue;
    const cut = pre.scrollWidth - pre.clientWidth;
    const past = box.right - right;
    if (cut > 1 || past > 1) {
      out.wide_code.push({first_line: pre.textContent.split('\n')[0].slice(0, 70),
                          cut_px: Math.round(cut), past_column_px: Math.round(past)});
    }
  }
  for (const table of document.querySelectorAll('article table.docutils')) {
    const wrap = table.parentElement;
    const cut = Math.max(wrap.scrollWidth - wrap.clientWidth, table.scrollWidth - table.clientWidth);
    if (cut > 1) {
      const head = table.querySelector('tr');
      out.wide_tables.push({first_row: head ? head.textContent.trim().slice(0, 60) : '',
                            cut_px: Math.round(cut)});
    }
  }
  return JSON.stringify(out);
})()
"""


class CDP:
    """A DevTools protocol session on one page target (websocket-client)."""

    def __init__(self, ws_url: str):
        import websocket  # websocket-client, the test extra

        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params):
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mine:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_for(self, method: str, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        for i, ev in enumerate(self.events):
            if ev["method"] == method:
                return self.events.pop(i)
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                if msg["method"] == method:
                    return msg
                self.events.append(msg)
        raise TimeoutError(method)


def find_chromium(given: str | None) -> str | None:
    if given:
        return given
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def build_site(dest: Path) -> Path:
    out = dest / "html"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            str(ROOT / "docs"),
            str(out),
        ],
        check=True,
    )
    return out


def serve(site: Path):
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def start_chromium(chromium: str, profile: Path):
    proc = subprocess.Popen(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--hide-scrollbars",
            f"--window-size={WIDTH},{HEIGHT}",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        match = re.search(r"DevTools listening on (ws://\S+)", line)
        if match:
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep draining
            return proc, match.group(1)
    proc.kill()
    raise RuntimeError("chromium did not start its DevTools endpoint")


def page_target(browser_ws: str) -> str:
    """The websocket URL of the first page target (about:blank)."""
    import urllib.request

    port = re.match(r"ws://[^:]+:(\d+)/", browser_ws).group(1)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
        targets = json.load(r)
    return next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")


def errors_of(events: list[dict]) -> list[str]:
    found = []
    for ev in events:
        m, p = ev["method"], ev.get("params", {})
        if m == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            found.append(f"exception: {d.get('exception', {}).get('description') or d['text']}")
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            found.append("console.error: " + " ".join(str(a.get("value", "")) for a in p["args"]))
        elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
            e = p["entry"]
            if e.get("url", "").endswith("/favicon.ico"):
                continue  # the browser's own request (the site has no favicon), not the page's
            found.append(f"{e.get('source')}: {e['text']} {e.get('url', '')}".strip())
        elif m == "Network.loadingFailed" and not p.get("canceled"):
            found.append(f"request failed: {p.get('errorText')} ({p.get('type')})")
    return found


SEARCH_JS = r"""
(async () => {
  for (let i = 0; i < 100; i++) {
    const hits = document.querySelectorAll('#search-results li');
    if (hits.length) return hits.length;
    await new Promise(r => setTimeout(r, 200));
  }
  return 0;
})()
"""


def search_and_dark_mode(cdp: CDP, base: str, shots: Path) -> list[str]:
    """The search page finds a word every page uses (LSTM); the index in the dark scheme (the
    reader's prefers-color-scheme) is screenshotted as index-dark.png."""
    failures = []
    cdp.events.clear()
    cdp.call("Page.navigate", url=base + "search.html?q=LSTM")
    cdp.wait_for("Page.loadEventFired")
    res = cdp.call("Runtime.evaluate", expression=SEARCH_JS, awaitPromise=True, returnByValue=True)
    hits = res.get("result", {}).get("value", 0)
    if not hits:
        failures.append("search.html?q=LSTM: no results")
    failures += [f"search.html: {e}" for e in errors_of(cdp.events)]
    print(
        f"{'ok  ' if hits else 'FAIL'} search for LSTM: {hits} result(s) listed so far", flush=True
    )
    cdp.call(
        "Emulation.setEmulatedMedia",
        features=[{"name": "prefers-color-scheme", "value": "dark"}],
    )
    cdp.call("Page.navigate", url=base + "index.html")
    cdp.wait_for("Page.loadEventFired")
    res = cdp.call(
        "Runtime.evaluate",
        expression="getComputedStyle(document.body).backgroundColor",
        returnByValue=True,
    )
    background = res.get("result", {}).get("value", "")
    rgb = [int(v) for v in re.findall(r"\d+", background)[:3]]
    if not rgb or sum(rgb) > 3 * 128:
        failures.append(f"index.html in the dark scheme: background {background!r} is not dark")
    shot = cdp.call("Page.captureScreenshot", format="png")
    (shots / "index-dark.png").write_bytes(base64.b64decode(shot["data"]))
    cdp.call("Emulation.setEmulatedMedia", features=[])
    return failures


def check(site: Path, chromium: str, shots: Path) -> list[str]:
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    pages = [p for p in pages if not p.startswith(("_static/", "_sources/"))]
    server = serve(site)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    failures = []
    with tempfile.TemporaryDirectory() as profile:
        proc, browser_ws = start_chromium(chromium, Path(profile))
        try:
            cdp = CDP(page_target(browser_ws))
            for domain in ("Page", "Runtime", "Log", "Network"):
                cdp.call(f"{domain}.enable")
            cdp.call(
                "Emulation.setDeviceMetricsOverride",
                width=WIDTH,
                height=HEIGHT,
                deviceScaleFactor=1,
                mobile=False,
            )
            for page in pages:
                cdp.events.clear()
                cdp.call("Page.navigate", url=base + page)
                cdp.wait_for("Page.loadEventFired")
                res = cdp.call(
                    "Runtime.evaluate", expression=CHECK_JS, awaitPromise=True, returnByValue=True
                )
                if "exceptionDetails" in res:
                    failures.append(f"{page}: the check script failed: {res['exceptionDetails']}")
                    continue
                got = json.loads(res["result"]["value"])
                problems = [f"raw math: {m!r}" for m in got["raw_math"]]
                problems += [
                    f"MathJax not served by the site: {s}"
                    for s in got["mathjax_src"]
                    if re.match(r"(https?:)?//", s)
                ]
                problems += [f"missing image: {s}" for s in got["images"]]
                problems += [
                    f"code wider than the column: {w['first_line']!r} (cut {w['cut_px']} px, "
                    f"past the column {w['past_column_px']} px)"
                    for w in got["wide_code"]
                ]
                problems += [
                    f"table wider than the column: {w['first_row']!r} (cut {w['cut_px']} px)"
                    for w in got["wide_tables"]
                ]
                problems += errors_of(cdp.events)
                failures += [f"{page}: {p}" for p in problems]
                name = page[: -len(".html")]
                if name in SHOTS:
                    shot = cdp.call(
                        "Page.captureScreenshot", format="png", captureBeyondViewport=False
                    )
                    (shots / f"{name}.png").write_bytes(base64.b64decode(shot["data"]))
                print(f"{'FAIL' if problems else 'ok  '} {page}", flush=True)
            failures += search_and_dark_mode(cdp, base, shots)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
            server.shutdown()
    return failures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", type=Path, default=None, help="a built HTML site (default: build)")
    ap.add_argument("--shots", type=Path, default=None, help="the screenshots' folder")
    ap.add_argument("--chromium", default=None, help="the browser (default: chromium on PATH)")
    args = ap.parse_args(argv)
    chromium = find_chromium(args.chromium)
    if chromium is None:
        print("chromium not found (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    shots = args.shots or Path(
        os.environ.get("RNNFAST_DOCS_SHOTS") or tempfile.mkdtemp(prefix="rnnfast-docs-shots-")
    )
    shots.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        site = args.site or build_site(Path(tmp))
        failures = check(site, chromium, shots)
    for f in failures:
        print(f"FAIL {f}")
    print(f"screenshots ({', '.join(SHOTS)}): {shots}")
    print(f"{len(failures)} problem(s); {time.perf_counter() - start:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
