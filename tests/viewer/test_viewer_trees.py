"""The viewer's tree view of tree rollouts (turngym/viewer/trees.py, /api/trees, the page)."""

from __future__ import annotations

import threading

import pytest

import turngym
from turngym.agents import RandomPolicy
from turngym.core.pool.tree import tree_rollout
from turngym.core.records import Step, Trajectory, write_jsonl
from turngym.viewer.server import make_server
from turngym.viewer.trees import tree_view

from .test_viewer import browser, get_json, page  # noqa: F401  (fixtures)


def node(name: str, rewards: list[float], parent: str = "", branch_turn: int | None = None, success=False):
    start = branch_turn or 0
    steps = [Step(turn=start + k, observation="", action=f"{name}-{k}", reward=r) for k, r in enumerate(rewards)]
    return Trajectory(
        env_id="e",
        task_id="t",
        seed=0,
        steps=steps,
        group_id="g",
        trajectory_id=name,
        parent=parent,
        branch_turn=branch_turn,
        success=success,
    )


def test_each_root_lists_its_branches_with_whole_episode_returns():
    trajs = [
        node("A", [0.5, 0.0, 1.0], success=True),
        node("B", [0.0, 0.0]),
        node("A/1.0", [0.25, 0.0], "A", 1),
        node("A/1.0/2.0", [2.0], "A/1.0", 2),
        node("lonely", [1.0]),
    ]
    trajs[-1].group_id = "other"  # a group without branches is not a tree
    (group,) = tree_view(trajs)
    assert group["group_id"] == "g" and [r["trajectory_id"] for r in group["roots"]] == ["A", "B"]
    a, b = group["roots"]
    assert (a["episode_return"], a["outcome"], a["turns"]) == (1.5, "success", 3)
    assert b["branches"] == []
    first, second = a["branches"]
    # A's turn-0 reward 0.5 comes before the branch at turn 1; the grandchild adds its parent's turn 1
    assert (first["branch_turn"], first["episode_return"], first["first_action"]) == (1, 0.75, "A/1.0-0")
    assert (second["parent"], second["branch_turn"], second["episode_return"]) == ("A/1.0", 2, 2.75)
    assert tree_view(trajs[:2]) == []


@pytest.fixture(scope="module")
def tree_file(tmp_path_factory):
    env = turngym.make("turngym/Household-v0")
    tasks = env.task_ids("train")[:2]
    env.close()
    with turngym.EnvPool("turngym/Household-v0", num_envs=2, backend="inline") as pool:
        trajs = tree_rollout(pool, RandomPolicy(seed=2), tasks, group_size=2, branches=2, seed=0, max_turns=4)
    path = tmp_path_factory.mktemp("trees") / "tree.jsonl"
    write_jsonl(path, trajs, append=False)
    return path, trajs


@pytest.fixture(scope="module")
def tree_server(tree_file):
    srv = make_server(tree_file[0], port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/"
    srv.shutdown()
    srv.server_close()


def test_trees_api(tree_server, tree_file):
    _, trajs = tree_file
    status, body = get_json(tree_server + "api/trees?file=tree.jsonl")
    assert status == 200 and len(body["groups"]) == 2
    for group in body["groups"]:
        assert len(group["roots"]) == 2
        branches = [b for r in group["roots"] for b in r["branches"]]
        assert len(branches) == 2 and all(b["branch_turn"] >= 1 for b in branches)
        for b in branches:
            assert trajs[b["index"]].parent == b["parent"]
    status, listing = get_json(tree_server + "api/episodes?file=tree.jsonl")
    assert listing["branches"] == 4
    assert [e["parent"] for e in listing["episodes"]] == [t.parent for t in trajs]
    status, missing = get_json(tree_server + "api/trees?file=nope.jsonl")
    assert status == 404 and "file: 'nope.jsonl'" in missing["error"]


@pytest.mark.browser
def test_tree_view_in_browser(page, tree_server, tree_file):  # noqa: F811
    _, trajs = tree_file
    page.goto(tree_server + "#file=tree.jsonl")
    page.wait_for_selector("body[data-ready='1']")
    assert page.inner_text("#open-trees") == "Tree view: 4 branches"
    page.click("#open-trees")
    page.wait_for_selector("#trees")
    assert page.locator("section.tree").count() == 2
    assert page.locator("tr.tree-root").count() == 4 and page.locator("tr.tree-branch").count() == 4
    first = page.locator("tr.tree-branch").first
    b = trajs[int(first.get_attribute("data-index"))]
    assert first.locator("td").first.inner_text() == f"↳ at turn {b.branch_turn + 1}"
    first.locator("a").click()
    page.wait_for_selector("#branched-from")
    assert f"Branched at turn {b.branch_turn + 1} from {b.parent}" in page.inner_text("#branched-from")
    assert not page.errors, page.errors
