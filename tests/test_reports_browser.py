"""The report in a real browser: Debian's chromium driven by selenium through chromium-driver.

.ci/run installs chromium and chromium-driver with apt-get when they are missing; where no browser
can be had, the test skips and says why. It loads index.html from disk and checks what a reader
meets: no console errors, no network request (file:// only), no horizontal overflow at 1400 and
420 px, the headline box on the first screen, every figure drawn, sortable columns, every link
resolving to a file. Screenshots go to results/browser/ (and beside the report).
"""
import json
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

pytest.importorskip("pandas")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed (the test extra has it)")
from selenium.webdriver.common.by import By  # noqa: E402

from dspbench.reports.report import build_report  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SAMPLE = Path(__file__).parent / "data" / "sample_results" / "cpu-small"
SHOTS = REPO / "results" / "browser"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")


def _browser():
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("no chromium/chromedriver on PATH: .ci/run installs them with "
                    "`apt-get install -y chromium chromium-driver`; this machine has neither apt nor them")
    return chromium, driver


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    chromium, driver_path = _browser()
    root = tmp_path_factory.mktemp("results") / "cpu-small"
    shutil.copytree(SAMPLE, root)
    html = build_report(root, jobs=1)
    opts = webdriver.ChromeOptions()
    for f in FLAGS:
        opts.add_argument(f)
    opts.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    opts.binary_location = chromium
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    drv = webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=driver_path))
    try:
        _viewport(drv, 1400)
        drv.get("about:blank")
        drv.get_log("performance"), drv.get_log("browser")      # drop the start page's traffic
        drv.get(html.as_uri())
        yield drv, html
    finally:
        drv.quit()


def _viewport(drv, width: int, height: int = 900) -> None:
    drv.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})


def _shot(drv, html: Path, name: str) -> None:
    for folder in (SHOTS, html.parent / "screenshots"):
        folder.mkdir(parents=True, exist_ok=True)
        drv.save_screenshot(str(folder / name))


def test_no_console_errors_and_no_network(page):
    drv, html = page
    errors = [e for e in drv.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    urls = [json.loads(e["message"])["message"]["params"].get("request", {}).get("url", "")
            for e in drv.get_log("performance")
            if json.loads(e["message"])["message"]["method"] == "Network.requestWillBeSent"]
    assert urls and all(u.startswith(("file://", "data:", "about:")) for u in urls), urls


@pytest.mark.parametrize("width", [1400, 420])
def test_no_horizontal_overflow_headline_first_figures_drawn(page, width):
    drv, html = page
    _viewport(drv, width)
    drv.refresh()
    body_w, view_w = drv.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert body_w <= view_w, f"body overflows at {width} px: {body_w} > {view_w}"
    top = drv.execute_script("return document.getElementById('headline').getBoundingClientRect().top")
    assert top < 900, f"headline box starts at {top} px"
    sizes = drv.execute_script("return Array.from(document.querySelectorAll('figure svg'))"
                               ".map(s => {const r = s.getBoundingClientRect(); return [r.width, r.height]})")
    assert len(sizes) == 5 and all(w > 100 and h > 50 for w, h in sizes), sizes
    _shot(drv, html, f"first-screen-{width}.png")


def test_sorting_a_column_reorders_rows(page):
    drv, _ = page
    _viewport(drv, 1400)
    drv.refresh()
    table = drv.find_element(By.CSS_SELECTOR, "#table-details table")
    headers = table.find_elements(By.CSS_SELECTOR, "thead th")
    col = next(i for i, h in enumerate(headers) if h.text.startswith("step (s)"))
    values = "return Array.from(arguments[0].tBodies[0].rows).map(r => r.cells[arguments[1]].dataset.v)"
    before = [float(v) for v in drv.execute_script(values, table, col)]
    headers[col].click()
    asc = [float(v) for v in drv.execute_script(values, table, col)]
    headers[col].click()
    desc = [float(v) for v in drv.execute_script(values, table, col)]
    assert asc == sorted(before) and desc == sorted(before, reverse=True) and asc != before


def test_every_link_resolves_to_a_file(page):
    drv, html = page
    links = drv.execute_script("return Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
    ids = set(drv.execute_script("return Array.from(document.querySelectorAll('[id]')).map(e => e.id)"))
    assert len(links) > 20
    for url in links:
        u = urlparse(url)
        assert u.scheme == "file", url
        assert Path(unquote(u.path)).is_file(), url
        if u.fragment:
            assert u.fragment in ids, url
