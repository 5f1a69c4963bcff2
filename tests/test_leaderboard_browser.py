"""The Space in a real browser (Debian's headless Chromium driven by Selenium, never a downloaded browser): load
the board, submit the default model through the Submit form on one task with the cheap `oracle` reference and a
pair cap of 3, follow the job on the Queue tab until FINISHED, and find its row on the Leaderboard tab.
Screenshots are kept as test artifacts (the folder is printed)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.request
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


def start_space(tmp_path: Path, **env: str):
    """The Space started as `make space` does, with its own SQLite queue and a pair cap of 3 (and `env`); yields
    its URL and log."""
    port = free_port()
    log_path = tmp_path / "space.log"
    env = {
        **os.environ,
        "PORT": str(port),
        "CAUSALDIAG_LEADERBOARD_DB": f"sqlite:///{tmp_path / 'queue.sqlite'}",
        "CAUSALDIAG_PAIR_CAP": str(PAIR_CAP),
        "CAUSALDIAG_RATE_LIMIT": "50",
        "GRADIO_ANALYTICS_ENABLED": "False",
        "CAUSALDIAG_SEED_RESULTS": "",
        **env,
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
def space(tmp_path):
    yield from start_space(tmp_path)


SEEDED = {  # (task, metric, variant): (pairs, share of pairs the faithful explanation wins)
    ("factcheck", "filler_tokens", "continuous"): (9, 0.6),
    ("factcheck", "early_answering", "continuous"): (40, 0.6),
    ("factcheck", "random_baseline", "binary"): (100, 0.5),
    ("analogy", "filler_tokens", "continuous"): (30, 0.8),
}
SEEDED_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"


@pytest.fixture()
def seeded_space(tmp_path):
    """The Space seeded from a results file of one hub model: four rows whose pair counts (9, 30, 40, 100) sort
    differently as text and as numbers."""
    pairs = []
    for (task, metric, variant), (n, share) in SEEDED.items():
        wins = round(n * share)
        pairs += [
            {"pair_id": f"{task}-{i}", "task": task, "metric": metric, "variant": variant}
            | {"score_faithful": 1.0 if i < wins else 0.0, "score_unfaithful": 0.5, "d": 1.0 if i < wins else 0.0}
            for i in range(n)
        ]
    doc = {
        "model": {"name": SEEDED_MODEL, "revision": "0123abc", "dtype": "float32", "parameters": 134_515_008},
        "editor": "ice",
        "explanations": "synthetic",
        "dataset_versions": {"factcheck": "1.3.0", "analogy": "1.3.0"},
        "created_at": "2026-11-26T08:00:00",
        "results": [{"metric": metric} for _, metric, _ in SEEDED],
        "pairs": pairs,
    }
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps(doc))
    yield from start_space(tmp_path, CAUSALDIAG_SEED_RESULTS=str(seed))


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


@contextlib.contextmanager
def kept_on_failure(browser, artifacts: Path, log_path: Path):
    """On a failure inside the block: a screenshot, the page's HTML and the Space's log beside the artifacts."""
    try:
        yield
    except BaseException:
        browser.save_screenshot(str(artifacts / "failure.png"))
        (artifacts / "failure.html").write_text(browser.page_source)
        shutil.copyfile(log_path, artifacts / "space.log")
        raise


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

    with kept_on_failure(browser, artifacts, log_path):
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
        # The answer reads the job back after it is stored, and the Space's worker may claim it (or, for the oracle,
        # even finish it) in between: any status but a failure or a wait for approval is a model job accepted.
        assert match[2] == MODEL and status in {"PENDING", "RUNNING", "FINISHED"}, answer

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
        assert len(rows) == 1 and rows[0]["metric"] == "oracle" and rows[0]["task"] == "factcheck", rows
        assert rows[0]["n"] == str(PAIR_CAP) and rows[0]["sig"] in ("", "▲", "▼"), rows
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#board-plot .js-plotly-plot, #board-plot svg")))

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


def test_a_seeded_board_sorts_numerically_filters_by_task_drills_down_and_downloads(seeded_space, browser, artifacts):
    import pandas as pd
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    url, log_path = seeded_space
    wait = WebDriverWait(browser, 30)

    def column(name: str) -> list[str]:
        return [row[name] for row in table(browser, "board-table")]

    def sort(name: str, direction: str) -> None:
        header = next(
            th
            for th in browser.find_elements(By.CSS_SELECTOR, "#board-table th[role=columnheader]")
            if th.get_attribute("title") == name
        )
        browser.execute_script("arguments[0].querySelector('button.cell-menu-button').click()", header)
        item = wait.until(
            lambda d: next(
                (b for b in d.find_elements(By.CSS_SELECTOR, "[role=menuitem]") if direction in b.text), None
            )
        )
        item.click()

    with kept_on_failure(browser, artifacts, log_path):
        browser.get(url)
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#board-table")))
        wait_for(lambda: len(table(browser, "board-table")) == len(SEEDED), 60, "the seeded board", poll_s=1)
        assert set(column("model")) == {SEEDED_MODEL}
        link = browser.find_element(By.CSS_SELECTOR, "#board-table a[href]")
        assert link.get_attribute("href") == f"https://huggingface.co/{SEEDED_MODEL}"

        # Numbers sort as numbers: D descending, then (on a fresh page, one sort at a time) n ascending,
        # 9 < 30 < 40 < 100 (as text: 100 < 30 < 40 < 9).
        sort("D", "Sort descending")
        wait_for(lambda: column("D") == ["0.8", "0.6", "0.556", "0.5"], 30, "D sorted descending", poll_s=1)
        assert column("n") == ["30", "40", "9", "100"]
        browser.get(url)
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#board-table")))
        wait_for(lambda: len(table(browser, "board-table")) == len(SEEDED), 60, "the board again", poll_s=1)
        sort("n", "Sort ascending")
        wait_for(lambda: column("n") == ["9", "30", "40", "100"], 30, "n sorted ascending as numbers", poll_s=1)
        browser.save_screenshot(str(artifacts / "board-sorted.png"))

        # A row's drill-down: its per-pair scores, with a CSV and a parquet download.
        row = next(
            r
            for r in browser.find_elements(By.CSS_SELECTOR, "#board-table [role=grid] [role=row].virtual-row")
            if "early_answering" in r.text
        )
        row.find_elements(By.CSS_SELECTOR, "[role=gridcell]")[3].click()
        title = wait.until(lambda d: "40 pairs" in d.find_element(By.ID, "drill-title").text or None)
        assert "early_answering" in browser.find_element(By.ID, "drill-title").text, title
        drilled = wait.until(
            lambda d: (
                [a.get_attribute("href") for a in d.find_elements(By.CSS_SELECTOR, "#drill-download a[href]")] or None
            )
        )
        csv = next(href for href in drilled if href.split("?")[0].endswith(".csv"))
        pairs = pd.read_csv(io.BytesIO(urllib.request.urlopen(csv, timeout=30).read()))
        assert len(pairs) == 40 and pairs["d"].sum() == 24 and set(pairs["metric"]) == {"early_answering"}
        browser.save_screenshot(str(artifacts / "board-drilldown.png"))

        # The board's own CSV: every column, numbers as numbers.
        links = [a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "#board-download a[href]")]
        board_csv = next(href for href in links if href.split("?")[0].endswith("leaderboard.csv"))
        board = pd.read_csv(io.BytesIO(urllib.request.urlopen(board_csv, timeout=30).read()))
        assert len(board) == len(SEEDED) and board["D"].dtype == float and board["n"].sum() == 179
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", when) for when in board["submitted (UTC)"])

        # The task filter hides the other task's rows.
        task = browser.find_element(By.CSS_SELECTOR, "#board-task input")
        task.click()
        option = (By.CSS_SELECTOR, "#board-task [data-value=analogy], li[aria-label=analogy]")
        wait.until(ec.element_to_be_clickable(option)).click()
        wait_for(lambda: column("task") == ["analogy"], 30, "the task filter to keep only analogy", poll_s=1)
        assert column("n") == ["30"]

        # The model-size filter: the seeded model (0.135 B parameters) is under 1B, so "1B to 10B" shows nothing.
        size = browser.find_element(By.CSS_SELECTOR, "#board-size input")
        size.click()
        option = (By.CSS_SELECTOR, "#board-size [data-value='1B to 10B'], li[aria-label='1B to 10B']")
        wait.until(ec.element_to_be_clickable(option)).click()
        wait_for(lambda: table(browser, "board-table") == [], 30, "the size filter to hide the 0.135 B model", poll_s=1)
        size.click()
        option = (By.CSS_SELECTOR, "#board-size [data-value='under 1B'], li[aria-label='under 1B']")
        wait.until(ec.element_to_be_clickable(option)).click()
        wait_for(lambda: column("task") == ["analogy"], 30, "the size filter to show it again", poll_s=1)
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#board-plot .js-plotly-plot")))
        browser.execute_script("document.querySelector('#board-cite .label-wrap').click()")
        bibtex = wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#board-bibtex")))
        assert "@inproceedings{zaman2025causal" in bibtex.text
        browser.save_screenshot(str(artifacts / "board-analogy.png"))
        assert "Traceback" not in log_path.read_text(), log_path.read_text()
