"""The Space in a real browser (Debian's headless Chromium driven by Selenium, never a downloaded browser): load
the board, submit the default model through the Submit form on one task with the cheap `oracle` reference and a
pair cap of 3, follow the job on the Queue tab until FINISHED, and find its row on the Leaderboard tab.
Screenshots are kept as test artifacts (the folder is printed)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_leaderboard_space import free_port, wait_for

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTIFACTS = ROOT / ".cache" / "test-artifacts" / "leaderboard_browser"
MODEL = "smollm2-135m-instruct"
PAIR_CAP = 3

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
        reason=f"needs Debian's {CHROMIUM} and {CHROMEDRIVER} (make system-test-deps installs them)",
    ),
]

# Gradio's Dataframe draws its rows as ARIA grid rows; the header cells carry the column names as titles.
READ_TABLE = """
const root = document.querySelector(arguments[0]);
if (!root) return null;
const headers = [...root.querySelectorAll('th[role=columnheader]')].map(th => th.getAttribute('title'));
const rows = [...root.querySelectorAll('[role=grid] [role=row].virtual-row')].map(
    row => [...row.querySelectorAll('[role=gridcell]')].map(cell => cell.textContent.trim()));
return {headers, rows};
"""


@pytest.fixture()
def space(tmp_path):
    """The Space started as `make space` does, with its own SQLite queue and a pair cap of 3; yields its URL and log."""
    port = free_port()
    log_path = tmp_path / "space.log"
    env = {
        **os.environ,
        "PORT": str(port),
        "CAUSALDIAG_LEADERBOARD_DB": f"sqlite:///{tmp_path / 'queue.sqlite'}",
        "CAUSALDIAG_PAIR_CAP": str(PAIR_CAP),
        "CAUSALDIAG_RATE_LIMIT": "50",
        "GRADIO_ANALYTICS_ENABLED": "False",
    }
    with log_path.open("w") as log:
        app = subprocess.Popen(
            [sys.executable, str(ROOT / "leaderboard_space" / "app.py")], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        try:

            def up() -> bool:
                assert app.poll() is None, log_path.read_text()
                with socket.socket() as s:
                    return s.connect_ex(("127.0.0.1", port)) == 0

            wait_for(up, 120, "the Space to listen")
            yield f"http://127.0.0.1:{port}/", log_path
        finally:
            app.terminate()
            app.wait(timeout=30)


@pytest.fixture()
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    # An explicit driver path (and browser binary): Selenium Manager is never asked to download anything.
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture()
def artifacts(tmp_path):
    """Screenshots go to pytest's tmp path and are copied to .cache/test-artifacts/ (kept after the run)."""
    folder = tmp_path / "artifacts"
    folder.mkdir()
    yield folder
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    shutil.copytree(folder, ARTIFACTS)
    print(f"\nbrowser test artifacts: {ARTIFACTS} (and {folder})")


def table(driver, elem_id: str) -> list[dict[str, str]]:
    """The rows of the Dataframe with this elem_id as dicts keyed by column name ([] while it is empty)."""
    data = driver.execute_script(READ_TABLE, f"#{elem_id}")
    assert data is not None, f"no element #{elem_id} on the page"
    return [dict(zip(data["headers"], row)) for row in data["rows"] if any(row)]


def test_board_submit_form_queue_and_board_in_chromium(space, browser, artifacts):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    url, log_path = space
    wait = WebDriverWait(browser, 30)

    def click(css: str) -> None:
        wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, css))).click()

    def open_tab(name: str) -> None:
        click(f"#tab-{name}-button")
        wait.until(
            lambda d: d.find_element(By.CSS_SELECTOR, f"#tab-{name}-button").get_attribute("aria-selected") == "true"
        )

    try:
        # The board loads with its columns and, on a fresh queue, no rows.
        browser.get(url)
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#board-table")))
        wait.until(ec.title_is("Causal diagnosticity leaderboard"))
        wait.until(lambda d: "Copeland" in (d.execute_script(READ_TABLE, "#board-table") or {}).get("headers", []))
        assert table(browser, "board-table") == []
        assert "How often does a faithfulness metric prefer" in browser.find_element(By.TAG_NAME, "body").text
        browser.save_screenshot(str(artifacts / "board-empty.png"))

        # Submit through the form: model id typed in, one task, the oracle reference instead of the default metric.
        open_tab("submit")
        model_box = wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#submit-model textarea")))
        model_box.clear()
        model_box.send_keys(MODEL)
        revision_box = browser.find_element(By.CSS_SELECTOR, "#submit-revision textarea")
        assert revision_box.get_property("value") == "main"

        def checked(group: str) -> list[str]:
            return [
                box.get_attribute("name")
                for box in browser.find_elements(By.CSS_SELECTOR, f"#{group} input[type=checkbox]")
                if box.is_selected()
            ]

        assert checked("submit-tasks") == ["factcheck"]
        for name in checked("submit-metrics"):
            click(f"#submit-metrics input[name='{name}']")
        click("#submit-metrics input[name='oracle']")
        wait.until(lambda d: checked("submit-metrics") == ["oracle"])
        click("#submit-button")
        answer = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#submit-answer").text.strip() or None)
        browser.save_screenshot(str(artifacts / "submit.png"))
        match = re.match(r"Submitted: job #(\d+), model (\S+), status (\w+)\.", answer)
        assert match, answer
        job_id, status = match[1], match[3]
        assert match[2] == MODEL and status == "PENDING", answer

        # The Queue tab lists the job; it reaches FINISHED (the Refresh button and the tab's timer both update it).
        open_tab("queue")

        def queue_row() -> dict[str, str] | None:
            rows = [r for r in table(browser, "queue-table") if r.get("job") == job_id]
            return rows[0] if rows else None

        def listed():
            click("#queue-refresh")
            return queue_row()

        row = wait_for(listed, 30, f"job {job_id} on the Queue tab", poll_s=2)
        assert row["model"] == MODEL and row["tasks"] == "factcheck" and row["metrics"] == "oracle", row
        assert row["status"] in {"PENDING", "RUNNING", "FINISHED"}, row

        def finished():
            click("#queue-refresh")
            current = queue_row()
            assert current is not None and current["status"] != "FAILED", current
            return current if current["status"] == "FINISHED" else None

        row = wait_for(finished, 300, f"job {job_id} to reach FINISHED on the Queue tab", poll_s=3)
        assert f"claimed job {job_id}" in row["log tail"] and "per-pair scores stored" in row["log tail"], row
        assert row["reason"] == "", row
        browser.save_screenshot(str(artifacts / "queue.png"))

        # The Leaderboard tab, refreshed, has the model's oracle row with the capped number of pairs.
        open_tab("leaderboard")

        def board_row():
            click("#board-refresh")
            rows = [r for r in table(browser, "board-table") if r.get("model") == MODEL]
            return rows or None

        rows = wait_for(board_row, 60, f"{MODEL} on the Leaderboard tab", poll_s=2)
        assert len(rows) == 1 and rows[0]["metric"].split(" · ")[0] == "oracle", rows
        assert rows[0]["precision"] == "auto" and rows[0]["factcheck"].endswith(f"({PAIR_CAP}/{PAIR_CAP})"), rows
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#board-plot img, #board-plot svg")))

        # The search box filters the board: a metric that was not run hides the row.
        search = browser.find_element(By.CSS_SELECTOR, "#board-search textarea")
        search.send_keys("filler_tokens", Keys.ENTER)
        wait_for(lambda: table(browser, "board-table") == [], 30, "the search to filter the row out", poll_s=1)
        search.clear()
        search.send_keys("oracle", Keys.ENTER)
        wait_for(
            lambda: [r["model"] for r in table(browser, "board-table")] == [MODEL],
            30,
            "the search to show the row again",
            poll_s=1,
        )
        browser.save_screenshot(str(artifacts / "board.png"))
        # Every call the page made succeeded (a tab never opened once sent None and the Queue's load call failed).
        assert "Traceback" not in log_path.read_text(), log_path.read_text()
    except BaseException:
        browser.save_screenshot(str(artifacts / "failure.png"))
        (artifacts / "failure.html").write_text(browser.page_source)
        shutil.copyfile(log_path, artifacts / "space.log")
        raise
