"""The trajectory viewer and the run report, in a real browser (Playwright + Debian's Chromium).

Set TURNGYM_DOCS_IMG=1 to also copy the screenshots into docs/img/ (how docs/viewer.md's
pictures are made).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest
from viewer_fixtures import make_run_dir, rollout

from turngym.cli import main as cli_main
from turngym.core.records import read_jsonl, write_jsonl
from turngym.viewer import data, write_report
from turngym.viewer.curves import nice_ticks
from turngym.viewer.data import latest_files
from turngym.viewer.server import make_server

ROOT = Path(__file__).resolve().parents[2]
DOCS_IMG = ROOT / "docs" / "img"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return make_run_dir(tmp_path_factory.mktemp("run") / "counter-gigpo")


@pytest.fixture(scope="module")
def server(run_dir):
    srv = make_server(run_dir, port=0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/"
    srv.shutdown()
    srv.server_close()


def get_json(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


# ----- data --------------------------------------------------------------------------------------
def test_align_group_puts_equal_states_in_one_row():
    rows = data.align_group([["a", "b", "c", "d"], ["a", "x", "c", "d"], ["a", "b", "b", "e"], []])
    assert [r["state_key"] for r in rows] == ["a", "b", "x", "c", "d", "b", "e"]
    assert rows[0]["cells"] == [0, 0, 0, None] and rows[0]["shared"] == 3
    assert rows[3]["cells"] == [2, 2, None, None]
    for m, keys in enumerate([["a", "b", "c", "d"], ["a", "x", "c", "d"], ["a", "b", "b", "e"]]):
        cells = [r["cells"][m] for r in rows if r["cells"][m] is not None]
        assert cells == list(range(len(keys)))  # every step once, in order
        assert all(keys[r["cells"][m]] == r["state_key"] for r in rows if r["cells"][m] is not None)


def test_episode_view_carries_spans_tools_screenshots_and_advantages(run_dir):
    trajs = read_jsonl(run_dir / "eval" / "update_0002.jsonl")
    view = data.episode_view(trajs[0], 0, "eval/update_0002.jsonl", data.config_splits(run_dir))
    assert view["estimator"] == "gigpo" and view["split"] == "test"
    assert view["task_type"] in {"count_up", "count_down", "stay"}
    step = view["steps"][0]
    assert "think" in step["spans"] and step["screenshot_png_b64"]
    assert all(s["advantage"] is not None for s in view["steps"])
    submits = [s for s in view["steps"] if "tool_call" in s["spans"]]
    assert submits and submits[-1]["tool_messages"][0]["role"] == "tool"
    assert "prompt_ids" not in step  # token ids stay out of the page
    extra = trajs[0].steps[0].info["extra"]  # the browser env's spelling of the key works too
    extra["screenshot_png_base64"] = extra.pop("screenshot_png_b64")
    assert data.step_view(trajs[0].steps[0])["screenshot_png_b64"] == extra["screenshot_png_base64"]


def test_split_and_task_type_fallbacks():
    traj = rollout(["counter-1"], eps=1.0, invalid=0.0, seed=0, group_size=1)[0]
    assert data.split_of(traj, "rollouts/update_0003.jsonl") == "train"
    assert data.split_of(traj, "eval/valid_unseen.jsonl") == "valid_unseen"
    assert data.split_of(traj, "eval/update_0003.jsonl") == "eval"  # a trainer's periodic evaluation
    assert data.split_of(traj, "eval/update_0003.jsonl", {"eval": "valid_unseen"}) == "valid_unseen"
    assert data.split_of(traj, "loose.jsonl") == "-"
    traj.metadata["split"] = "valid_seen"
    assert data.split_of(traj, "eval/x.jsonl") == "valid_seen"
    traj.initial_info["extra"] = {}
    assert data.task_type(traj) == "-"
    traj.initial_info["extra"] = {"kind": "units"}  # a ToolQA file from before "task_type"
    assert data.task_type(traj) == "units"


# ----- server ------------------------------------------------------------------------------------
def test_server_api(server, run_dir):
    status, files = get_json(server + "api/files")
    assert status == 200
    names = [f["name"] for f in files["files"]]
    assert names == [
        "rollouts/update_0000.jsonl",
        "rollouts/update_0001.jsonl",
        "rollouts/update_0002.jsonl",
        "eval/update_0000.jsonl",
        "eval/update_0002.jsonl",
    ]
    assert [f["episodes"] for f in files["files"]] == [20, 20, 20, 8, 8]
    status, body = get_json(server + "api/episodes?file=rollouts/update_0000.jsonl")
    assert status == 200 and len(body["episodes"]) == 20 and body["advantage_scale"] > 0
    first = body["episodes"][0]
    status, group = get_json(server + f"api/group?file=rollouts/update_0000.jsonl&group={first['group_id']}")
    assert status == 200 and len(group["members"]) == 4
    assert all(len(r["cells"]) == 4 for r in group["rows"]) and group["rows"][0]["shared"] == 4
    status, err = get_json(server + "api/episode?file=nope.jsonl&index=0")
    assert status == 404 and "nope.jsonl" in err["error"]
    status, err = get_json(server + "api/episode?file=eval/update_0002.jsonl&index=99")
    assert status == 404 and "out of range" in err["error"]
    status, err = get_json(server + "static/..%2f..%2fcli.py")
    assert status == 404


def test_server_follows_a_growing_file(tmp_path):
    path = tmp_path / "live.jsonl"
    trajs = rollout(["counter-2"], eps=0.5, invalid=0.1, seed=3, group_size=2)
    write_jsonl(path, trajs[:1])
    srv = make_server(path, port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/api/episodes?file=live.jsonl"
        assert len(get_json(url)[1]["episodes"]) == 1
        write_jsonl(path, trajs[1:])
        assert len(get_json(url)[1]["episodes"]) == 2
    finally:
        srv.shutdown()
        srv.server_close()


def test_view_command_serves_until_stopped(run_dir):
    proc = subprocess.Popen(
        [sys.executable, "-m", "turngym", "view", str(run_dir / "eval" / "update_0002.jsonl"), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        status, files = get_json(url + "api/files")
        assert status == 200 and files["files"] == [{"name": "update_0002.jsonl", "episodes": 8}]
        with urllib.request.urlopen(url, timeout=30) as r:
            page = r.read().decode()
        assert '<script src="/static/viewer.js">' in page and "http" not in page.split("<body>")[1]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_view_command_errors_are_one_line(tmp_path, capsys):
    assert cli_main(["view", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli_main(["view", str(tmp_path / "empty")]) == 2
    assert "no trajectory files" in capsys.readouterr().err


# ----- report ------------------------------------------------------------------------------------
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class StrictHTML(HTMLParser):
    """Fails on what browsers would silently repair: unclosed or crossed tags, stray end tags."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.doctype = False
        self.counts: dict[str, int] = {}
        self.urls: list[str] = []
        self.ids: set[str] = set()

    def handle_decl(self, decl):
        self.doctype = decl.lower() == "doctype html"

    def handle_starttag(self, tag, attrs):
        self.counts[tag] = self.counts.get(tag, 0) + 1
        self.urls += [v for k, v in attrs if k in ("href", "src", "xmlns") and v]
        for k, v in attrs:
            if k == "id":
                assert v not in self.ids, f"duplicate id {v!r}"
                self.ids.add(v)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.counts[tag] = self.counts.get(tag, 0) + 1
        if tag not in VOID and "svg" not in self.stack:
            raise AssertionError(f"self-closing <{tag}/> outside SVG")

    def handle_endtag(self, tag):
        if tag in VOID:
            raise AssertionError(f"end tag for void element </{tag}>")
        if not self.stack or self.stack[-1] != tag:
            raise AssertionError(f"</{tag}> closes {self.stack[-1:] or 'nothing'} at {self.getpos()}")
        self.stack.pop()


def validate_html(text: str) -> StrictHTML:
    parser = StrictHTML()
    parser.feed(text)
    parser.close()
    assert parser.doctype, "missing <!DOCTYPE html>"
    assert not parser.stack, f"unclosed tags: {parser.stack}"
    assert parser.counts.get("html") == parser.counts.get("head") == parser.counts.get("body") == 1
    assert parser.counts.get("title") and parser.counts.get("script", 0) == 0
    for url in parser.urls:  # self-contained: nothing is fetched, links only go to the local viewer
        assert url == "http://www.w3.org/2000/svg" or url.startswith("http://127.0.0.1:"), url
    return parser


def test_report_is_valid_self_contained_html(run_dir):
    path = write_report(run_dir)
    assert path == run_dir / "report.html"
    text = path.read_text()
    parser = validate_html(text)
    assert parser.counts["svg"] >= 5  # success, return, loss, time, rollouts per update, lengths
    for section in ("curves", "success", "lengths", "invalid", "files", "look"):
        assert f'id="{section}"' in text
    assert "count_up" in text and "count_down" in text and "eval/update_0002.jsonl" in text
    assert 'href="http://127.0.0.1:8765/#file=rollouts/update_0000.jsonl&amp;episode=' in text
    assert "turngym view " + str(run_dir) in text
    # splits come from config.yaml (env.train_split / env.eval_split), not from file names, and
    # the success table reads only the latest update's files
    table = re.search(r'<table class="success-table">(.*?)</table>', text).group(1)
    assert "<th>test</th><th>train</th><th>all</th>" in table and "update_" not in table
    assert "From the latest update's files only" in text
    all_all = re.findall(r"\(n=(\d+)\)", table)[-1]
    assert int(all_all) == 20 + 8  # rollouts/update_0002 + eval/update_0002
    assert 'data-series="eval success rate"' in text and 'data-series="rollout success rate"' in text


def test_latest_files():
    per_file = [
        {"file": f"{d}/update_{u:04d}.jsonl", "folder": d, "update": u}
        for d in ("rollouts", "eval")
        for u in (0, 1, 2)
        if d == "rollouts" or u != 1
    ]
    per_file.append({"file": "eval/valid_unseen.jsonl", "folder": "eval", "update": None})
    assert latest_files(per_file) == [
        "rollouts/update_0002.jsonl",
        "eval/update_0002.jsonl",
        "eval/valid_unseen.jsonl",
    ]


def test_report_for_one_file_and_without_metrics(tmp_path, run_dir):
    copy = tmp_path / "evals" / "test.jsonl"
    copy.parent.mkdir()
    shutil.copy(run_dir / "eval" / "update_0002.jsonl", copy)
    path = write_report(copy)
    assert path == tmp_path / "evals" / "test.report.html"
    text = path.read_text()
    validate_html(text)
    assert "not a training run" in text and "#file=test.jsonl&amp;episode=" in text
    (tmp_path / "empty").mkdir()
    validate_html(write_report(tmp_path / "empty").read_text())


def test_report_skips_a_foreign_file_and_bad_metrics(tmp_path, run_dir):
    """A trainer calls write_report at the end of a long run: one bad file must not stop it."""
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    (run / "eval" / "notes.jsonl").write_text('{"hello": 1}\n[1, 2]\n')
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"update": 3, "train/succ')  # cut off by a killed trainer
    text = write_report(run).read_text()
    validate_html(text)
    assert "skipped: " in text and "notes.jsonl: not a trajectory file" in text
    assert "rollouts/update_0002.jsonl" in text
    srv = make_server(run, port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        status, err = get_json(f"http://127.0.0.1:{srv.server_address[1]}/api/episodes?file=eval/notes.jsonl")
        assert status == 404 and "not a trajectory file" in err["error"]
    finally:
        srv.shutdown()
        srv.server_close()


def test_nice_ticks():
    assert nice_ticks(0, 1) == [0, 0.5, 1]
    assert nice_ticks(0.1, 0.9) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(0, 2, integer=True) == [0, 1, 2]
    assert nice_ticks(3, 3) == [2.5, 3.0, 3.5]


def test_report_command_and_eval_writes_a_report(tmp_path, run_dir, capsys):
    assert cli_main(["report", str(run_dir), "--out", str(tmp_path / "r.html")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "r.html")
    assert cli_main(["report", str(tmp_path / "missing")]) == 2
    out = tmp_path / "eval" / "counter.jsonl"
    assert (
        cli_main(
            [
                "eval",
                "turngym-tests/Counter-v0",
                "--episodes",
                "3",
                "--backend",
                "inline",
                "--num-envs",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    report = tmp_path / "eval" / "counter.report.html"
    assert f"report: {report}" in printed and report.is_file()
    validate_html(report.read_text())
    assert {t.metadata["split"] for t in read_jsonl(out)} == {"train"}  # the Counter env's default split


# ----- in a real browser -------------------------------------------------------------------------
def chromium_path() -> str | None:
    return shutil.which("chromium-headless-shell") or shutil.which("chromium")


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install turngym[browser])")
    executable = chromium_path()
    if executable is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium-headless-shell)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    pg.errors = []
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" else None)
    yield pg
    context.close()


def save_shot(pg, tmp_path: Path, name: str, **kwargs) -> Path:
    path = tmp_path / f"{name}.png"
    pg.screenshot(path=str(path), **kwargs)
    assert path.stat().st_size > 5000
    if os.environ.get("TURNGYM_DOCS_IMG"):
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, DOCS_IMG / f"{name}.png")
    return path


def rgb(css: str) -> tuple[float, ...]:
    return tuple(float(x) for x in re.findall(r"[\d.]+", css)[:3])


@pytest.mark.browser
def test_viewer_in_browser_filter_open_episode_and_colours(page, server, run_dir, tmp_path):
    page.goto(server + "#file=rollouts/update_0000.jsonl")
    page.wait_for_selector("body[data-ready='1']")
    rows = page.locator("tr.episode-row")
    assert rows.count() == 20
    assert page.locator("#file-select option").count() == 5

    # filters: outcome, then task type, then a return range
    page.select_option("#filter-outcome", "failure")
    outcomes = page.locator("tr.episode-row td:nth-child(7)").all_inner_texts()
    assert outcomes and set(outcomes) == {"failure"}
    trajs = read_jsonl(run_dir / "rollouts" / "update_0000.jsonl")
    assert rows.count() == sum(not t.success and t.scorable for t in trajs)
    page.select_option("#filter-type", "count_up")
    assert set(page.locator("tr.episode-row td:nth-child(3)").all_inner_texts()) == {"count_up"}
    page.select_option("#filter-type", "")
    page.select_option("#filter-outcome", "")
    page.fill("#filter-return-min", "0.5")
    assert rows.count() == sum(t.episode_return >= 0.5 for t in trajs)
    page.fill("#filter-return-min", "")
    assert rows.count() == 20

    # open the longest failed episode of a group that also has a success: the group's returns
    # differ, so it has nonzero advantages; check turn count and advantage colours
    mixed = {t.group_id for t in trajs if t.success} & {t.group_id for t in trajs if not t.success}
    index = max(
        (i for i, t in enumerate(trajs) if not t.success and t.group_id in mixed),
        key=lambda i: trajs[i].length,
    )
    page.click(f"tr.episode-row[data-index='{index}']")
    page.wait_for_selector(f"#episode[data-index='{index}']")
    assert page.locator("#turns .turn").count() == trajs[index].length
    assert page.get_attribute("#episode", "data-turns") == str(trajs[index].length)
    chips = page.locator("#turns .turn .adv")
    seen = set()
    for i in range(chips.count()):
        chip = chips.nth(i)
        a = float(chip.get_attribute("data-advantage"))
        assert a == pytest.approx(trajs[index].steps[i].advantage)
        r, g, _ = rgb(chip.evaluate("e => getComputedStyle(e).backgroundColor"))
        if a > 0:
            assert g > r and "adv-pos" in chip.get_attribute("class")
            seen.add("green")
        elif a < 0:
            assert r > g and "adv-neg" in chip.get_attribute("class")
            seen.add("red")
    assert "red" in seen  # a failed episode takes blame somewhere
    assert page.locator("#turns pre.action .span-think").count() == trajs[index].length
    save_shot(page, tmp_path, "viewer-episode")

    # group view: the rollouts of the task side by side, shared states on one row
    page.click("#open-group")
    page.wait_for_selector("#group")
    members = [t for t in trajs if t.group_id == trajs[index].group_id]
    assert page.locator("table.group thead th").count() == len(members) + 1
    assert page.locator("table.group tbody tr.shared").count() >= 1
    first_row = page.locator("table.group tbody tr").first
    assert first_row.locator("td.group-cell").count() == len(members)  # all start in one state
    cells = page.locator("table.group td.group-cell")
    assert cells.count() == sum(t.length for t in members)
    colours = set()
    for i in range(cells.count()):
        a = float(cells.nth(i).get_attribute("data-advantage"))
        r, g, _ = rgb(cells.nth(i).evaluate("e => getComputedStyle(e).backgroundColor"))
        if a:
            colours.add("green" if g > r else "red")
            assert (g > r) == (a > 0)
    assert colours == {"green", "red"}
    save_shot(page, tmp_path, "viewer-group")
    assert not page.errors, page.errors


@pytest.mark.browser
def test_viewer_shows_screenshots_and_tool_results(page, server, tmp_path):
    page.goto(server + "#file=eval/update_0002.jsonl&episode=0")
    page.wait_for_selector("#episode[data-index='0']")
    img = page.locator("#turns img.screenshot").first
    assert img.evaluate("e => e.complete && e.naturalWidth") == 240
    assert page.locator("#turns .tool").count() >= 1
    assert "result of submit" in page.locator("#turns .tool").first.inner_text()
    save_shot(page, tmp_path, "viewer-screenshots")
    assert not page.errors, page.errors


@pytest.mark.browser
def test_report_renders_in_browser(page, run_dir, tmp_path):
    path = write_report(run_dir)
    page.goto(path.as_uri())
    assert page.title().startswith("turngym report")
    charts = page.locator("svg.chart")
    assert charts.count() >= 5
    for i in range(charts.count()):
        box = charts.nth(i).bounding_box()
        assert box["width"] > 300 and box["height"] > 150
    assert page.locator("svg.chart polyline").count() >= 6
    assert page.locator("#look ~ table a").count() >= 5
    save_shot(page, tmp_path, "viewer-report", full_page=True)
    assert not page.errors, page.errors


@pytest.mark.browser
def test_report_links_open_episodes_in_the_viewer(page, server, run_dir, tmp_path):
    port = int(re.search(r":(\d+)/", server).group(1))
    path = write_report(run_dir, tmp_path / "linked.html", viewer_port=port)
    page.goto(path.as_uri())
    link = page.locator("#look ~ table a").first
    href = link.get_attribute("href")
    file, index = re.search(r"#file=([^&]+)&episode=(\d+)", href).groups()
    link.click()
    page.wait_for_selector(f"#episode[data-index='{index}']")
    assert page.url.startswith(server)
    expected = read_jsonl(run_dir / file)[int(index)]
    assert page.locator("#turns .turn").count() == expected.length
    assert expected.task_id in page.inner_text("#episode h2")
    assert not page.errors, page.errors


@pytest.mark.browser
def test_viewer_without_advantages(page, tmp_path):
    """What `turngym eval --out` writes has no advantages: chips say so and stay uncoloured."""
    path = tmp_path / "plain.jsonl"
    trajs = rollout(["counter-3"], eps=0.3, invalid=0.2, seed=5, group_size=1)
    for t in trajs:
        for s in t.steps:
            s.advantage = None
    write_jsonl(path, trajs)
    srv = make_server(path, port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        page.goto(f"http://127.0.0.1:{srv.server_address[1]}/#file=plain.jsonl&episode=0")
        page.wait_for_selector("#episode[data-index='0']")
        assert "no advantages recorded" in page.inner_text("#episode-count")
        chips = page.locator("#turns .turn .adv")
        assert chips.count() == trajs[0].length
        assert set(chips.all_inner_texts()) == {"A –"}
        assert page.locator("#turns .adv-pos, #turns .adv-neg").count() == 0
        assert page.locator("#open-group").count() == 0  # a group of one has nothing to compare
        assert not page.errors, page.errors
    finally:
        srv.shutdown()
        srv.server_close()


def test_nice_ticks_for_a_constant_rate_stay_at_or_above_zero():
    # an all-zero success curve once had an axis from -0.5 to 0.5
    assert nice_ticks(0, 0)[0] == 0 and nice_ticks(0, 0)[-1] >= 1
    assert nice_ticks(-2, -2)[0] < -2 < nice_ticks(-2, -2)[-1]


def test_nice_ticks_for_values_equal_up_to_rounding():
    # a return of -0.2 in every update, summed two ways: steps of 1e-17 once looped for ever
    # (a data-parallel demo's report hung in it)
    ticks = nice_ticks(-0.20000000000000004, -0.2)
    assert len(ticks) <= 10 and ticks[0] < -0.2 < ticks[-1]
    assert len(nice_ticks(1e12, 1e12 + 1e-3)) <= 10


@pytest.mark.browser
def test_episode_list_fits_its_pane_with_household_ids(page, tmp_path):
    """Household task ids once made the list 829 px wide in a 560 px pane, hiding outcome
    and return. Long ids are now cut (full id in the tooltip) and every column is visible."""
    import turngym
    from turngym.agents import ExpertPolicy

    env = turngym.make("turngym/Household-v0")
    tasks = env.task_ids("valid_unseen")[:3]
    with turngym.EnvPool("turngym/Household-v0", num_envs=1, backend="inline") as pool:
        trajs = pool.rollout(ExpertPolicy(), tasks)
    path = tmp_path / "household.jsonl"
    write_jsonl(path, trajs)
    srv = make_server(path, port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        page.goto(f"http://127.0.0.1:{srv.server_address[1]}/#file=household.jsonl")
        page.wait_for_selector("tr.episode-row")
        wrap = page.locator("#list-pane .table-wrap").bounding_box()
        assert wrap["width"] < 600  # the narrow pane the issue measured
        table_width = page.evaluate("document.querySelector('#episodes').scrollWidth")
        assert table_width <= wrap["width"] + 1, (table_width, wrap["width"])
        for column in (6, 7):  # return, outcome
            cell = page.locator(f"tr.episode-row td:nth-child({column})").first.bounding_box()
            assert cell["x"] + cell["width"] <= wrap["x"] + wrap["width"] + 1
        task_cell = page.locator("tr.episode-row td:nth-child(2)").first
        assert task_cell.get_attribute("title").startswith(tasks[0])
        assert not page.errors, page.errors
    finally:
        srv.shutdown()
        srv.server_close()


def test_curves_png_and_the_report_draw_the_same_learning_panels(tmp_path):
    """One renderer: curves.png and the report's learning curves come from ``learning_panels``
    (held-out points at their stage, the SFT band, updates with no learning signal)."""
    from turngym.viewer.curves import learning_panels, plot_curves

    rows = [
        {"update": 0, "sft/turns": 5, "eval/success_rate": 0.1, "eval_after_sft/success_rate": 0.3},
        {"update": 1, "train/success_rate": 0.4, "warning/no_signal": 1},
        {"update": 2, "train/success_rate": 0.5, "eval/success_rate": 0.6},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    [panel] = learning_panels(rows)  # no returns logged: one panel
    assert panel["series"] == {
        "train rollouts": [(1.0, 0.4), (2.0, 0.5)],
        "held-out eval": [(-1.0, 0.1), (0.0, 0.3), (2.0, 0.6)],
    }
    assert panel["marks"] == {"no learning signal": [(1.0, 0.4)]} and panel["band"] == (-1.0, 0.0, "SFT")
    assert plot_curves(tmp_path).stat().st_size > 0
    text = write_report(tmp_path).read_text()
    validate_html(text)
    for name in ("train rollouts", "held-out eval", "no learning signal"):
        assert f'data-series="{name}"' in text
    assert 'data-series="eval/success_rate"' not in text  # drawn once, at its stage
