"""The ui in a real browser (Selenium + Debian's chromium): the page loads without console
errors; a knob change shows exactly ``trainplan estimate --json``'s numbers; a plan completes
and a clicked row loads its layout; the downloaded archive is ``--emit``'s files; a hostile model
name is escaped; a bad value shows the CLI's message. Missing chromium/chromedriver: skipped
locally, a failure under CI=true (tests/ui_browser.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

pytest.importorskip("fastapi")

from ui_browser import browser_paths, chrome, console_errors, serve  # noqa: E402
from trainplan.ui.state import State, cli_args, from_mapping  # noqa: E402

HOSTILE = "<script>alert(1)</script>"
TIMEOUT = 120          # a hang guard for each wait, no timing


@pytest.fixture(scope="module")
def url():
    browser_paths()                          # skip or fail before starting anything
    yield from serve()


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return tmp_path_factory.mktemp("downloads"), tmp_path_factory.mktemp("profile")


@pytest.fixture(scope="module")
def driver(url, folders):
    d = chrome(*folders)
    yield d
    d.quit()


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real ``trainplan`` command in a subprocess (the same source tree)."""
    src = str(Path(__file__).resolve().parents[3] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "trainplan", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)


def wait(driver, predicate, what: str):
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, TIMEOUT, poll_frequency=0.05).until(lambda d: predicate(d), what)


def by_id(driver, ident: str):
    from selenium.webdriver.common.by import By
    return driver.find_element(By.ID, ident)


def shown_state(driver) -> State:
    """The state the page last computed (its share link's query)."""
    query = urlsplit(by_id(driver, "share").get_attribute("value")).query
    return from_mapping(dict(parse_qsl(query, keep_blank_values=True)))


def type_into(driver, ident: str, text: str) -> None:
    """Type ``text`` into a field as a user does (select all, type, Tab: one change event)."""
    from selenium.webdriver.common.keys import Keys
    el = by_id(driver, ident)
    el.send_keys(Keys.CONTROL, "a")
    el.send_keys(text)
    el.send_keys(Keys.TAB)


def choose(driver, ident: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select
    Select(by_id(driver, ident)).select_by_value(value)


def wait_state(driver, **expected: str) -> State:
    def done(d):
        try:
            st = shown_state(d)
        except Exception:  # noqa: BLE001 -- the element is being swapped
            return False
        return st if all(getattr(st, k) == v for k, v in expected.items()) else False
    return wait(driver, done, f"the page to show {expected}")


def page_numbers(driver) -> dict[str, float]:
    from selenium.webdriver.common.by import By
    els = driver.find_elements(By.CSS_SELECTOR, "#results [data-key]")
    return {e.get_attribute("data-key"): json.loads(e.get_attribute("data-value")) for e in els}


def assert_numbers_are_the_clis(driver, state: State) -> None:
    r = cli("estimate", *cli_args(state), "--json")
    assert r.returncode == 0, r.stderr
    expected = json.loads(r.stdout)
    shown = page_numbers(driver)
    assert {"mfu", "time.step_s", "memory.total_gib", "totals.cost_usd"} <= set(shown)
    for key, value in shown.items():
        ref = expected
        for part in key.split("."):
            ref = ref[part]
        assert value == ref, (key, value, ref)
    assert by_id(driver, "est-layout").text == expected["layout"]


def test_page_loads_without_console_errors(driver, url):
    driver.get(url)
    wait(driver, lambda d: by_id(d, "estimate"), "the estimate")
    assert driver.execute_script("return typeof htmx") == "object"     # served from the package
    assert console_errors(driver) == []
    assert_numbers_are_the_clis(driver, State())


def test_knob_change_updates_to_the_clis_numbers(driver, url):
    driver.get(url)
    type_into(driver, "gpus", "16")
    state = wait_state(driver, gpus="16")
    assert_numbers_are_the_clis(driver, state)
    choose(driver, "zero", "3")
    type_into(driver, "tp", "2")
    state = wait_state(driver, gpus="16", zero="3", tp="2")
    assert_numbers_are_the_clis(driver, state)
    choose(driver, "framework", "torchtitan")          # the controls follow its limits
    state = wait_state(driver, framework="torchtitan", tp="2")
    assert "torchtitan" in by_id(driver, "limits").text.lower()
    assert_numbers_are_the_clis(driver, state)
    assert console_errors(driver) == []


def test_plan_completes_and_a_row_loads(driver, url):
    from selenium.webdriver.common.by import By
    driver.get(url)
    type_into(driver, "plan_gpus", "8..16")
    wait_state(driver, plan_gpus="8..16")
    by_id(driver, "run-plan").click()
    wait(driver, lambda d: d.find_elements(By.ID, "ranking"), "the ranking table")
    row = by_id(driver, "plan-row-2")
    query = row.get_attribute("data-query")
    want = from_mapping(dict(parse_qsl(query, keep_blank_values=True)))
    cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
    row.click()
    state = wait_state(driver, tp=want.tp, pp=want.pp, gpus=want.gpus, zero=want.zero,
                       micro_batch=want.micro_batch, cp=want.cp)
    assert by_id(driver, "tp").get_attribute("value") == want.tp
    assert by_id(driver, "est-layout").text == cells[3]
    assert query in driver.current_url                 # the address is the share link
    assert_numbers_are_the_clis(driver, state)
    assert console_errors(driver) == []


def test_downloaded_archive_equals_emit(driver, url, folders, tmp_path):
    downloads = folders[0]
    driver.get(url + "?gpus=16&tp=2")
    wait(driver, lambda d: by_id(d, "estimate"), "the estimate")
    link = by_id(driver, "dl-zip")
    formats = dict(parse_qsl(urlsplit(link.get_attribute("href")).query))["formats"]
    link.click()
    target = downloads / "launch.zip"
    wait(driver, lambda d: target.exists() and not list(downloads.glob("*.crdownload")),
         "the download")
    time.sleep(0.2)                              # the rename is the last step of a download
    out = tmp_path / "launch"
    r = cli("estimate", *cli_args(State(gpus="16", tp="2")), "--emit", formats, "--out", str(out))
    assert r.returncode == 0, r.stderr
    with zipfile.ZipFile(target) as zf:
        assert sorted(zf.namelist()) == sorted(p.name for p in out.iterdir())
        for name in zf.namelist():
            assert zf.read(name) == (out / name).read_bytes(), name
    assert console_errors(driver) == []


def test_hostile_model_name_is_escaped(driver, url):
    from selenium.common.exceptions import NoAlertPresentException
    driver.get(url)
    type_into(driver, "model", HOSTILE)
    wait_state(driver, model=HOSTILE)
    error = by_id(driver, "error").text
    assert HOSTILE in error                      # shown as text, not run
    with pytest.raises(NoAlertPresentException):
        _ = driver.switch_to.alert.text    # raises when no alert() ran
    r = cli("estimate", "--model", HOSTILE, "--json")
    assert r.returncode == 2
    assert error == r.stderr.strip().removeprefix("error: ")
    assert console_errors(driver) == []


def test_bad_value_shows_the_clis_message(driver, url):
    driver.get(url)
    type_into(driver, "tp", "3")
    state = wait_state(driver, tp="3")
    r = cli("estimate", *cli_args(state), "--json")
    assert r.returncode == 2
    assert by_id(driver, "error").text == r.stderr.strip().removeprefix("error: ")
    assert console_errors(driver) == []


def test_uploaded_config_json_is_estimated(driver, url, tmp_path):
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
           "intermediate_size": 8192, "num_attention_heads": 16, "num_key_value_heads": 8,
           "num_hidden_layers": 8, "vocab_size": 32000, "max_position_embeddings": 4096,
           "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    driver.get(url)
    by_id(driver, "config_file").send_keys(str(path))       # the file chooser's upload
    state = wait_state(driver, config=json.dumps(cfg))
    assert by_id(driver, "est-model").text == "pasted-config"
    folder = tmp_path / "beside" / "pasted-config"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(state.config)
    r = cli("estimate", *cli_args(state, "pasted-config/config.json"), "--json", cwd=folder.parent)
    assert r.returncode == 0, r.stderr
    expected = json.loads(r.stdout)
    for key, value in page_numbers(driver).items():
        ref = expected
        for part in key.split("."):
            ref = ref[part]
        assert value == ref, key
    assert console_errors(driver) == []
