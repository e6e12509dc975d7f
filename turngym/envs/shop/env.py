"""ShopEnv: the WebShop-style shopping task as a turngym env.

The agent reads an instruction ("i need a sulfate free shampoo ... price lower than 40.00
dollars"), searches, browses results and items, picks options and buys. Reward is WebShop's
purchase score (``turngym.envs.shop.reward``) on ``click[buy now]``, 0 on every other step
(minus ``invalid_action_penalty`` on an invalid action, 0 by default; RL papers use 0.1).
"""

from __future__ import annotations

import math
from typing import Any

from turngym.core.env import TurnEnv
from turngym.core.task import Validation
from turngym.envs.shop import goals as goals_mod
from turngym.envs.shop.pages import ShopSession
from turngym.envs.shop.render import OBSERVATION_MODES, render
from turngym.envs.shop.reward import FUZZY_THRESHOLD, fuzzy_score, normalize_color
from turngym.envs.shop.search import Catalog, open_catalog

INSTRUCTIONS = """You are shopping in a web shop. Follow the instruction at the top of each page and buy \
the product that best matches it.
Actions (one per turn):
  search[keywords]   search the catalog (on any page)
  click[x]           click a button: a product id, an option value, "back to search", "next >",
                     "< prev", "description", "features", "reviews" or "buy now"
Choose every option the instruction asks for before you click[buy now]; buying ends the episode \
and scores how well the product, its options and its price match the instruction."""


class ShopTask:
    """The shop's ``Task``: goals drawn from the catalog, a purchase validated with WebShop's
    score. Its world is the episode's ``ShopSession`` (the text shop's and the browser shop's)."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self._goal_cache: dict[str, dict[str, Any]] = {}
        self.expert_searches = 0  # the oracle's searches this episode (it searches twice at most)

    def __getstate__(self) -> dict[str, Any]:
        # an env snapshot holds the task set: its goal cache is a cache, not state
        return {**vars(self), "_goal_cache": {}}

    def task_ids(self, split: str) -> list[str]:
        total = goals_mod.num_goals(self.catalog)
        return [goals_mod.task_id(self.catalog, i) for i in goals_mod.split_range(split, total)]

    def get_task(self, task_id: str) -> dict[str, Any]:
        goal = self._goal_cache.get(task_id)
        if goal is None:
            goal = goals_mod.make_task(self.catalog, goals_mod.parse_task_id(self.catalog, task_id))
            if len(self._goal_cache) > 10_000:
                self._goal_cache.clear()
            self._goal_cache[task_id] = goal
        return goal

    def setup(self, session: ShopSession, task: dict[str, Any]) -> str:
        self.expert_searches = 0
        return task["instruction_text"]

    def validate(self, session: ShopSession, task: dict[str, Any]) -> Validation:
        """Nothing until the purchase; then WebShop's score of it (1.0: a full match)."""
        if session is None or not session.done:
            return Validation()
        reward = float(session.reward)
        success = math.isclose(reward, 1.0, abs_tol=1e-9)
        return Validation(
            reward=reward,
            done=True,
            success=success,
            progress=reward,
            components=dict(session.reward_components),
            extra={"reward_details": dict(session.reward_details), "purchase": session.purchase},
        )

    def expert_action(self, session: ShopSession, goal: dict[str, Any]) -> str:
        """Search with the instruction's words, find the target (up to 5 result pages; else search
        its exact title), open it, choose the goal's options, buy."""
        page = session.page
        target = goal["asin"].upper()
        if page.kind == "search" or (page.kind == "results" and self.expert_searches == 0):
            return self._expert_search(goal)
        labels = {c.label for c in session.clickables()}
        if page.kind == "results":
            if target.lower() in labels:
                return f"click[{target.lower()}]"
            if page.page < 5 and session.results(page.query)[page.page * 10 :]:
                return "click[next >]"
            return self._expert_search(goal)
        if page.kind == "detail":
            return "click[< prev]"
        if page.asin != target:
            return "click[< prev]"
        product = session.catalog.product(target)
        chosen = dict(page.options)
        for wanted in goal["goal_options"]:
            group, value = best_option(product["options"], wanted)
            if group is None or chosen.get(group) == value:
                continue
            clicked = session.click_target(value.lower())
            if clicked is not None and clicked.group == group:
                return f"click[{value.lower()}]"
        return "click[buy now]"

    def _expert_search(self, goal: dict[str, Any]) -> str:
        self.expert_searches += 1
        if self.expert_searches == 1:
            return f"search[{goal_keywords(goal['instruction_text'])}]"
        return f"search[{goal['name']}]"


class ShopEnv(TurnEnv):
    """A WebShop-style shop. Observation modes: text (WebShop's default for RL wrappers),
    text_rich, html. ``info["extra"]["available_actions"]`` is WebShop's
    ``{"has_search_bar", "clickables"}`` (also ``get_available_actions()``)."""

    default_split = "train"
    # WebShop's reward pays graded partial credit by design (product type, attributes, options,
    # price: buying the first result of the right kind earns about half), so skill here is the
    # success rate, WebShop's headline figure; `turngym check` judges shortcuts on it.
    metadata = {**TurnEnv.metadata, "skill_measure": "success", "snapshots": True}
    snapshot_shared = ("catalog",)  # read-only, and up to 100k products
    # Python, numpy and bounded SQLite reads of a read-only catalog that threads share under a
    # lock: serve-env may run its sessions as threads in shared processes (light mode)
    shares_process = True

    def __init__(
        self,
        catalog_size: int | str = "1k",
        catalog_seed: int = 0,
        catalog_path: str | None = None,
        observation_mode: str = "text",
        invalid_action_penalty: float = 0.0,
        bm25_k1: float = 0.9,
        bm25_b: float = 0.4,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if observation_mode not in OBSERVATION_MODES:
            raise ValueError(
                f"observation_mode: {observation_mode!r} is not a mode; allowed: {list(OBSERVATION_MODES)}"
            )
        if not isinstance(invalid_action_penalty, (int, float)) or invalid_action_penalty < 0:
            raise ValueError(f"invalid_action_penalty: {invalid_action_penalty!r} must be a number >= 0")
        self.observation_mode = observation_mode
        self.invalid_action_penalty = float(invalid_action_penalty)
        self.catalog: Catalog = open_catalog(catalog_size, catalog_seed, catalog_path, bm25_k1, bm25_b)
        self.task_set = ShopTask(self.catalog)
        self.session: ShopSession | None = None
        self._observation = ""

    # ----- episode ------------------------------------------------------------------------------
    def instructions(self) -> str:
        return INSTRUCTIONS

    def _observe(self) -> str:
        return render(self.session.view(), self.observation_mode)

    def _reset(self, task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        missing = {"asin", "instruction_text", "attributes", "goal_options", "price_upper"} - set(task)
        if missing:
            raise ValueError(f"reset options: task row lacks {sorted(missing)}")
        self.session = ShopSession(catalog=self.catalog, goal=task)
        goal = self.task_set.setup(self.session, task)
        self._observation = self._observe()
        return self._observation, {"extra": {"goal": goal, "available_actions": self.session.available_actions()}}

    def get_available_actions(self) -> dict[str, Any]:
        """WebShop's ``{"has_search_bar": bool, "clickables": [label, ...]}`` for the current page."""
        return self.session.available_actions()

    def _step(self, action: str):
        session = self.session
        error = session.apply(action)
        if error is not None:  # as WebShop: the same page again, nothing changed; the reason in info
            penalty = -self.invalid_action_penalty
            return (
                self._observation,
                penalty,
                False,
                False,
                {
                    "action_valid": False,
                    "parse_error": error,
                    "reward_components": {"invalid_action": penalty},
                    "extra": {"available_actions": session.available_actions()},
                },
            )
        self._observation = self._observe()
        if not session.done:
            return (
                self._observation,
                0.0,
                False,
                False,
                {"extra": {"available_actions": session.available_actions()}},
            )
        verdict = self.task_set.validate(session, self.task)
        return (
            self._observation,
            verdict.reward,
            True,
            False,
            {
                "reward_components": verdict.components,
                "is_success": verdict.success,
                "progress": verdict.progress,
                "done_reason": "purchased",
                "extra": {**verdict.extra, "available_actions": session.available_actions()},
            },
        )

    def state(self) -> Any:
        return self.session.state() if self.session is not None else {}

    def admissible_actions(self) -> list[str] | None:
        return self.session.admissible_actions() if self.session is not None else None

    def render(self):
        if self.render_mode == "ansi" and self.session is not None:
            return self._observe()
        return None

    def close(self):
        self.session = None
        super().close()

    def expert_action(self) -> str:
        return self.task_set.expert_action(self.session, self.task)


def goal_keywords(instruction: str) -> str:
    """The product part of an instruction: everything before its option and price clauses."""
    text = instruction
    for cut in (", with ", ", and price lower than"):
        if cut in text:
            text = text[: text.index(cut)]
    return text


def best_option(options: dict[str, list[str]], wanted: str) -> tuple[str | None, str]:
    """The (group, value) of a product that matches a goal option best (exact first, then fuzzy)."""
    for group, values in options.items():
        for value in values:
            if value.lower() == wanted.lower():
                return group, value
    best, best_score = (None, ""), FUZZY_THRESHOLD
    for group, values in options.items():
        for value in values:
            score = fuzzy_score(normalize_color(value), normalize_color(wanted))
            if score > best_score:
                best, best_score = (group, value), score
    return best
