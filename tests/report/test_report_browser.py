"""report.html in a real headless Chromium: it renders, images decode, nothing is fetched, no script runs.

Skipped (with the reason shown by ``-ra``) when no Chromium is installed;
on Debian: ``apt-get install -y chromium``.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess

import pytest

from specdec_check.report import write_report

pytestmark = pytest.mark.browser

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")

# The harness loads the report in a same-folder iframe and writes what it sees into <pre id="result">.
HARNESS = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><pre id="result">pending</pre>
<iframe id="f" src="report.html" style="width:1200px;height:900px"></iframe>
<script>
const f = document.getElementById('f');
f.addEventListener('load', () => {
  const out = {};
  try {
    const d = f.contentDocument;
    out.title = d.title;
    out.scripts = d.scripts.length;
    const imgs = Array.from(d.images);
    out.images = imgs.length;
    out.decoded = imgs.filter(i => i.complete && i.naturalWidth > 0).length;
    out.verdict = d.getElementById('verdict').textContent;
    out.tables = d.querySelectorAll('table').length;
    out.h2 = Array.from(d.querySelectorAll('h2')).map(h => h.textContent);
    out.resources = f.contentWindow.performance.getEntriesByType('resource').map(e => e.name);
    out.pwned = typeof f.contentWindow.__pwned !== 'undefined';
    out.text = d.body.innerText;
  } catch (e) { out.error = String(e); }
  document.getElementById('result').textContent = JSON.stringify(out);
});
</script></body></html>
"""


def _chromium():
    explicit = os.environ.get("SPECDEC_CHECK_CHROMIUM")
    if explicit:
        return explicit
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def chromium():
    path = _chromium()
    if path is None:
        pytest.skip("no headless Chromium installed (Debian: apt-get install -y chromium; "
                    "or set SPECDEC_CHECK_CHROMIUM=/path/to/chromium)")
    return path


def _run(chromium, tmp_path, *args):
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [chromium, *FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_report_renders_in_chromium(chromium, tmp_path, failed_report, evil):
    # A hostile name that would run if it were not escaped:
    report = failed_report.to_dict()
    report["findings"][0]["message"] += " <script>window.__pwned = 1</script><img src=x onerror='window.__pwned=2'>"
    write_report(report, tmp_path, formats=("html",))
    (tmp_path / "harness.html").write_text(HARNESS, encoding="utf-8")

    proc = _run(chromium, tmp_path, "--allow-file-access-from-files", "--virtual-time-budget=15000",
                "--dump-dom", (tmp_path / "harness.html").as_uri())
    match = re.search(r'<pre id="result">(.*?)</pre>', proc.stdout, re.S)
    assert match, f"no DOM dump from Chromium (rc={proc.returncode}): {proc.stderr[-2000:]}"
    seen = json.loads(html.unescape(match.group(1)))
    assert "error" not in seen, seen
    assert seen["scripts"] == 0 and not seen["pwned"]
    assert seen["images"] == 5 and seen["decoded"] == 5  # data: URI PNGs decode
    assert seen["resources"] == []  # nothing fetched over any network
    assert seen["verdict"] == "FAILED"
    assert seen["h2"][0] == "Verdict by check" and seen["tables"] == 4
    assert evil in seen["title"] and evil in seen["text"]
    assert "<script>window.__pwned = 1</script>" in seen["text"]  # shown as text, not run


def test_report_screenshot(chromium, tmp_path, passed_report):
    write_report(passed_report, tmp_path, formats=("html",))
    shot = tmp_path / "shot.png"
    _run(chromium, tmp_path, "--window-size=1280,2000", f"--screenshot={shot}", (tmp_path / "report.html").as_uri())
    assert shot.is_file() and shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 20_000
