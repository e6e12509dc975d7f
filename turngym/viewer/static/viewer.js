// turngym view: the episode list with filters, one episode's turns, and a group's rollouts
// side by side. Plain DOM, no libraries. Page state lives in the URL hash
// (#file=F&episode=I, #file=F&group=G or #file=F&trees=1) so the report can link straight to an episode.
"use strict";

const state = { file: "", episodes: [], scale: 0, sortKey: "index", sortDir: 1, selected: null };
const SPAN_ORDER = ["think", "subgoal", "switch", "action", "tool_call"];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "style") node.style.cssText = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function fmt(x, digits = 3) {
  if (x === null || x === undefined) return "–";
  const s = Number(x).toFixed(digits);
  return s.includes(".") ? s.replace(/\.?0+$/, "") || "0" : s;
}

async function api(path) {
  const res = await fetch(path);
  const body = await res.json();
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

// ---- advantage colours: green = credit, red = blame, strength = |A| / largest |A| in the file
function advColour(a) {
  if (a === null || a === undefined || state.scale <= 0 || a === 0) return "";
  const strength = Math.min(1, Math.abs(a) / state.scale);
  const alpha = (0.12 + 0.6 * strength).toFixed(3);
  return a > 0 ? `rgba(22, 163, 74, ${alpha})` : `rgba(220, 38, 38, ${alpha})`;
}

function advClass(a) {
  if (a === null || a === undefined) return "adv adv-none";
  return a > 0 ? "adv adv-pos" : a < 0 ? "adv adv-neg" : "adv adv-zero";
}

function advChip(a) {
  return el("span", { class: advClass(a), "data-advantage": a === null ? "" : String(a),
                      style: advColour(a) ? `background:${advColour(a)}` : null,
                      title: "advantage under the run's estimator" },
            a === null || a === undefined ? "A –" : `A ${fmt(a)}`);
}

// ---- the reply with its spans highlighted; nested spans show the innermost one
function renderSpans(text, spans) {
  const names = Object.keys(spans || {});
  if (!names.length) return [text];
  const cuts = new Set([0, text.length]);
  for (const n of names) { cuts.add(spans[n][0]); cuts.add(spans[n][1]); }
  const points = [...cuts].sort((a, b) => a - b);
  const out = [];
  for (let i = 0; i + 1 < points.length; i++) {
    const [s, e] = [points[i], points[i + 1]];
    if (s === e) continue;
    const active = names.filter((n) => spans[n][0] <= s && e <= spans[n][1]);
    const piece = text.slice(s, e);
    if (!active.length) { out.push(piece); continue; }
    active.sort((a, b) => (spans[a][1] - spans[a][0]) - (spans[b][1] - spans[b][0]));
    const kind = SPAN_ORDER.includes(active[0]) ? active[0] : "other";
    out.push(el("span", { class: `span span-${kind}`, "data-span": active[0], title: active.join(" ⊂ ") }, piece));
  }
  return out;
}

// ---- the episode list -------------------------------------------------------------------------
function fillSelect(id, values) {
  const select = document.getElementById(id);
  const keep = select.value;
  select.replaceChildren(el("option", { value: "" }, "all"),
                         ...[...new Set(values)].sort().map((v) => el("option", { value: v }, v)));
  if ([...select.options].some((o) => o.value === keep)) select.value = keep;
}

function filtered() {
  const get = (id) => document.getElementById(id).value;
  const env = get("filter-env"), type = get("filter-type"), split = get("filter-split");
  const outcome = get("filter-outcome"), text = get("filter-text").toLowerCase();
  const lo = get("filter-return-min"), hi = get("filter-return-max");
  const rows = state.episodes.filter((e) =>
    (!env || e.env_id === env) && (!type || e.task_type === type) && (!split || e.split === split) &&
    (!outcome || (outcome === "unscorable" ? !e.scorable
                  : e.scorable && (outcome === "success") === e.success)) &&
    (lo === "" || (e.episode_return ?? -Infinity) >= Number(lo)) &&
    (hi === "" || (e.episode_return ?? Infinity) <= Number(hi)) &&
    (!text || e.task_id.toLowerCase().includes(text)));
  const k = state.sortKey;
  rows.sort((a, b) => (a[k] > b[k] ? 1 : a[k] < b[k] ? -1 : a.index - b.index) * state.sortDir);
  return rows;
}

function outcomeCell(e) {
  if (!e.scorable) return el("span", { class: "unscorable" }, "unscorable");
  return e.success ? el("span", { class: "ok" }, "success") : el("span", { class: "bad" }, "failure");
}

function renderList() {
  const rows = filtered();
  document.getElementById("episode-count").textContent =
    `${rows.length} of ${state.episodes.length} episodes` + (state.scale > 0 ? "" : " · no advantages recorded");
  const tbody = document.querySelector("#episodes tbody");
  tbody.replaceChildren(...rows.map((e) => el("tr", {
      class: "episode-row" + (state.selected === e.index ? " selected" : ""), "data-index": e.index,
      onclick: () => go({ file: state.file, episode: e.index }) },
    el("td", { class: "num" }, e.index),
    el("td", { class: "clip", title: `${e.task_id} (${e.trajectory_id})` }, e.task_id),
    el("td", { class: "clip type", title: e.task_type ?? "" }, e.task_type),
    el("td", {}, e.split),
    el("td", { class: "num" }, e.length),
    el("td", { class: "num" }, fmt(e.episode_return)),
    el("td", {}, outcomeCell(e)),
    el("td", { class: "num" }, e.invalid_actions))));
}

async function loadFile(name) {
  if (state.file === name && state.episodes.length) return;
  const body = await api(`/api/episodes?file=${encodeURIComponent(name)}`);
  state.file = name;
  state.episodes = body.episodes;
  state.scale = body.advantage_scale;
  const trees = document.getElementById("open-trees");
  trees.hidden = !body.branches;
  trees.textContent = `Tree view: ${body.branches} branches`;
  document.getElementById("file-select").value = name;
  fillSelect("filter-env", state.episodes.map((e) => e.env_id));
  fillSelect("filter-type", state.episodes.map((e) => e.task_type));
  fillSelect("filter-split", state.episodes.map((e) => e.split));
  renderList();
}

// ---- one episode ------------------------------------------------------------------------------
function fact(name, value) { return el("span", {}, el("b", {}, name + " "), value); }

function rewardParts(components) {
  const parts = Object.entries(components || {});
  return parts.length ? "reward components: " + parts.map(([k, v]) => `${k} ${fmt(v)}`).join(", ") : null;
}

function renderTurn(s) {
  const colour = advColour(s.advantage);
  const spanNames = Object.keys(s.spans);
  return el("article", { class: "turn" + (s.action_valid ? "" : " invalid"), "data-turn": s.turn,
                         style: colour ? `border-left-color:${colour.replace(/[\d.]+\)$/, "0.9)")}` : null },
    el("div", { class: "turn-head" },
      el("strong", {}, `Turn ${s.turn + 1}`),
      el("span", { title: rewardParts(s.reward_components) }, `reward ${fmt(s.reward)}`),
      s.progress === null || s.progress === undefined ? null : el("span", { class: "muted" }, `progress ${fmt(s.progress, 2)}`),
      advChip(s.advantage),
      s.action_valid ? null : el("span", { class: "bad" }, "invalid action" + (s.parse_error ? `: ${s.parse_error}` : "")),
      s.done_reason ? el("span", { class: "muted" }, `ended: ${s.done_reason}`) : null,
      el("span", { class: "key", title: "state_key of the state the action was taken in" }, `state ${s.state_key.slice(0, 10)}`)),
    el("div", { class: "label" }, "observation"),
    el("pre", { class: "obs" }, s.observation),
    s.screenshot_png_b64 ? el("img", { class: "screenshot", alt: `screenshot at turn ${s.turn + 1}`,
                                        src: `data:image/png;base64,${s.screenshot_png_b64}` }) : null,
    el("div", { class: "label" }, "agent output"),
    spanNames.length ? el("div", { class: "span-legend" },
      ...spanNames.map((n) => el("span", { class: `span span-${SPAN_ORDER.includes(n) ? n : "other"}` }, n))) : null,
    el("pre", { class: "action" }, ...renderSpans(s.reply, s.spans)),
    ...(s.reply.trim() === s.action.trim() ? [] : [  // the reply held more than the action
      el("div", { class: "label" }, "action sent to the env"), el("pre", { class: "sent" }, s.action)]),
    s.tool_messages.length ? el("div", { class: "label" }, "tool calls and results") : null,
    ...s.tool_messages.map((m) => el("div", { class: "tool" },
      el("div", { class: "name" }, m.role === "tool" ? `result${m.name ? " of " + m.name : ""}` : "tool calls"),
      el("pre", {}, m.role === "tool" ? String(m.content ?? "") : JSON.stringify(m.tool_calls, null, 1)))),
    (s.terminated || s.truncated) && s.answer ? el("div", { class: "label" }, "final observation") : null,
    (s.terminated || s.truncated) && s.answer ? el("pre", { class: "obs" }, s.answer) : null);
}

async function showEpisode(file, index) {
  const ep = await api(`/api/episode?file=${encodeURIComponent(file)}&index=${index}`);
  state.selected = ep.index;
  renderList();
  const row = state.episodes.find((e) => e.index === ep.index);
  const groupSize = row ? row.group_size : 1;
  document.getElementById("detail-hint").hidden = true;
  document.getElementById("detail").replaceChildren(
    el("div", { class: "episode-head", id: "episode", "data-index": ep.index, "data-turns": ep.steps.length },
      el("h2", {}, `${ep.task_id} `, el("span", { class: "muted" }, ep.trajectory_id)),
      el("div", { class: "facts" },
        fact("env", ep.env_id), fact("env hash", ep.env_hash || "none recorded"), fact("task type", ep.task_type), fact("split", ep.split),
        fact("seed", ep.seed ?? "–"), fact("turns", ep.steps.length), fact("return", fmt(ep.episode_return)),
        fact("outcome", outcomeCell(ep)), fact("estimator", ep.estimator || "none recorded"),
        fact("invalid actions", ep.invalid_actions)),
      ep.parent ? el("p", { id: "branched-from" }, `Branched at turn ${ep.branch_turn + 1} from `,
        el("a", { href: `#file=${encodeURIComponent(file)}&episode=${indexOf(ep.parent)}` }, ep.parent),
        " (its turns before that are the root's)") : null,
      ep.group_id && groupSize > 1 ? el("button", { id: "open-group",
        onclick: () => go({ file, group: ep.group_id }) }, `Group view: ${groupSize} rollouts of this task`) : null,
      ep.error ? el("details", { open: true }, el("summary", { class: "error" }, "env error (episode unscorable)"),
                    el("pre", {}, ep.error)) : null,
      ep.instructions ? el("details", {}, el("summary", {}, "instructions (system prompt)"), el("pre", {}, ep.instructions)) : null),
    el("div", { id: "turns" }, ...ep.steps.map(renderTurn)));
  document.getElementById("detail-pane").scrollTop = 0;
}

// ---- a group side by side, aligned on state_key -------------------------------------------------
function groupCell(member, stepIndex) {
  if (stepIndex === null) return el("td", { class: "empty" });
  const s = member.steps[stepIndex];
  const act = s.action;  // what the env received, without the thinking
  const colour = advColour(s.advantage);
  return el("td", { class: "group-cell", "data-advantage": s.advantage === null ? "" : String(s.advantage),
                    style: colour ? `background:${colour}` : null },
    el("div", { class: "cell-meta" }, `turn ${s.turn + 1} · r ${fmt(s.reward)} · A ${fmt(s.advantage)}`,
       s.action_valid ? "" : " · invalid"),
    el("div", { class: "cell-action", title: s.action }, act.length > 160 ? act.slice(0, 157) + "…" : act));
}

async function showGroup(file, groupId) {
  const g = await api(`/api/group?file=${encodeURIComponent(file)}&group=${encodeURIComponent(groupId)}`);
  document.getElementById("detail-hint").hidden = true;
  const head = el("tr", {}, el("th", { class: "rowkey" }, "state"),
    ...g.members.map((m) => el("th", {},
      el("a", { href: `#file=${encodeURIComponent(file)}&episode=${m.index}` }, m.trajectory_id),
      el("div", { class: "cell-meta" }, `return ${fmt(m.episode_return)} · `, outcomeCell(m), ` · ${m.steps.length} turns`))));
  const rows = g.rows.map((r) => el("tr", { class: r.shared > 1 ? "shared" : "", "data-state-key": r.state_key },
    el("td", { class: "rowkey", title: r.state_key }, r.state_key.slice(0, 10), r.shared > 1 ? ` ×${r.shared}` : ""),
    ...r.cells.map((c, m) => groupCell(g.members[m], c))));
  document.getElementById("detail").replaceChildren(
    el("div", { class: "episode-head", id: "group", "data-group": g.group_id },
      el("h2", {}, `Group ${g.group_id}`),
      el("p", { class: "muted" }, `${g.members.length} rollouts of task ${g.members[0].task_id}. ` +
         "Steps taken in the same state (equal state_key) share a row; bold rows are shared by several rollouts.")),
    el("div", { class: "table-wrap" }, el("table", { class: "group" }, el("thead", {}, head), el("tbody", {}, ...rows))));
}

// ---- tree rollouts: each root with its branches -------------------------------------------------
function indexOf(trajectoryId) {
  const row = state.episodes.find((e) => e.trajectory_id === trajectoryId);
  return row ? row.index : -1;
}

function treeRow(file, n, branch) {
  const link = el("a", { href: `#file=${encodeURIComponent(file)}&episode=${n.index}` }, n.trajectory_id);
  const outcome = el("span", { class: { success: "ok", failure: "bad" }[n.outcome] || "unscorable" }, n.outcome);
  return el("tr", { class: branch ? "tree-branch" : "tree-root", "data-index": n.index },
    el("td", {}, branch ? `↳ at turn ${n.branch_turn + 1}` : "root"),
    el("td", { class: "clip", title: n.trajectory_id }, link),
    el("td", { class: "clip", title: branch ? n.first_action : "" }, branch ? n.first_action : ""),
    el("td", { class: "num" }, n.turns),
    el("td", { class: "num" }, fmt(n.episode_return)),
    el("td", {}, outcome));
}

async function showTrees(file) {
  const t = await api(`/api/trees?file=${encodeURIComponent(file)}`);
  document.getElementById("detail-hint").hidden = true;
  const head = el("tr", {}, ...["", "episode", "first action", "own turns", "return", "outcome"].map((h) => el("th", {}, h)));
  document.getElementById("detail").replaceChildren(
    el("div", { class: "episode-head", id: "trees", "data-groups": t.groups.length },
      el("h2", {}, "Tree rollouts"),
      el("p", { class: "muted" }, "Each root with the branches restored from its env snapshot at a turn. A branch's " +
         "return counts its root's rewards before the branch turn.")),
    ...t.groups.map((g) => el("section", { class: "tree", "data-group": g.group_id },
      el("h3", {}, `Group ${g.group_id}`),
      el("div", { class: "table-wrap" }, el("table", { class: "group" }, el("thead", {}, head),
        el("tbody", {}, ...g.roots.flatMap((r) => [treeRow(file, r, false), ...r.branches.map((b) => treeRow(file, b, true))])))))));
}

// ---- routing ------------------------------------------------------------------------------------
function go(params) {
  const hash = Object.entries(params).map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join("&");
  if (location.hash.slice(1) === hash) route(); else location.hash = hash;
}

async function route() {
  const params = new URLSearchParams(location.hash.slice(1));
  const select = document.getElementById("file-select");
  const file = params.get("file") || state.file || (select.options[0] && select.options[0].value);
  try {
    if (!file) throw new Error("this run has no trajectory files");
    await loadFile(file);
    if (params.has("episode")) await showEpisode(file, Number(params.get("episode")));
    else if (params.has("group")) await showGroup(file, params.get("group"));
    else if (params.has("trees")) await showTrees(file);
  } catch (err) {
    document.getElementById("detail").replaceChildren(el("p", { class: "error" }, String(err.message || err)));
  }
}

async function init() {
  const body = await api("/api/files");
  document.getElementById("root").textContent = body.root;
  document.getElementById("file-select").replaceChildren(
    ...body.files.map((f) => el("option", { value: f.name }, `${f.name} (${f.episodes})`)));
  document.getElementById("file-select").addEventListener("change", (e) => go({ file: e.target.value }));
  for (const input of document.querySelectorAll("#filters select, #filters input")) {
    input.addEventListener("input", renderList);
  }
  document.getElementById("filters").addEventListener("submit", (e) => e.preventDefault());
  document.getElementById("open-trees").addEventListener("click", () => go({ file: state.file, trees: 1 }));
  for (const th of document.querySelectorAll("#episodes th[data-sort]")) {
    th.addEventListener("click", () => {
      state.sortDir = state.sortKey === th.dataset.sort ? -state.sortDir : 1;
      state.sortKey = th.dataset.sort;
      renderList();
    });
  }
  window.addEventListener("hashchange", route);
  await route();
  document.body.dataset.ready = "1";
}

init().catch((err) => {
  document.getElementById("detail").replaceChildren(el("p", { class: "error" }, String(err.message || err)));
});
