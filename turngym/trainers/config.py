"""Training configuration: nested dataclasses, every field documented, loaded from YAML or TOML.

    cfg = load_config("train.yaml", overrides=["rl.lr=2e-5", "rl.estimator=rloo"])

Unknown fields and values of the wrong type or outside the allowed set fail at load time with a
``ValueError`` naming the field (``rl.estimatr: unknown field; allowed: ...``). ``describe()``
lists every field with its type, default and help (``turngym train --print-config``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from turngym.agents.prompts import PromptConfig
from turngym.core.fields import doc
from turngym.core.pool import BACKENDS
from turngym.trainers.advantages import ESTIMATORS, check_tree, empg, sibling
from turngym.trainers.advantages._common import REFERENCES

ESTIMATOR_NAMES = tuple(ESTIMATORS)
BACKEND_NAMES = BACKENDS  # the pool's one list of backend names
LR_SCHEDULES = ("constant", "linear")


@dataclass
class EnvConfig:
    id: str = doc("registered env id to train on", default="turngym/Household-Easy-v0")
    kwargs: dict = doc("extra keyword arguments for turngym.make", default_factory=dict)
    train_split: str = doc("split the training tasks come from", default="train")
    eval_split: str = doc("held-out split for periodic evaluation", default="valid_unseen")
    backend: str = doc(
        "EnvPool backend; 'inline' keeps runs bit-for-bit reproducible (the policy batch "
        "never depends on which env answered first)",
        choices=BACKEND_NAMES,
        default="inline",
    )
    num_envs: int = doc("envs stepped at once (also the policy's generation batch)", minimum=1, default=8)
    ray_address: str | None = doc("ray.init(address=...) for backend 'ray' (None: a local Ray)", default=None)
    max_turns: int = doc("cut episodes off after this many turns", minimum=1, default=30)


@dataclass
class ModelConfig:
    name: str = doc(
        "model: 'smollm2-135m' (embedded), 'tiny' (random init, tests), or a checkpoint directory",
        default="smollm2-135m",
    )
    dtype: str = doc(
        "torch dtype of the weights (auto: bfloat16 where the device computes it natively, else float32)",
        choices=("float32", "bfloat16", "float16", "auto"),
        default="float32",
    )
    device: str | None = doc("torch device (None: cuda if available, else cpu)", default=None)
    lora: bool = doc("train LoRA adapters (peft) instead of all weights", default=True)
    lora_rank: int = doc("LoRA rank r", minimum=1, default=16)
    lora_alpha: float = doc("LoRA scaling alpha", minimum=0, default=32.0)
    lora_dropout: float = doc("LoRA dropout", minimum=0, default=0.0)
    lora_layers: int = doc(
        "adapt only the top N transformer layers (0: every layer); the backward pass "
        "then stops below them, so training costs a fraction of a full pass",
        minimum=0,
        default=0,
    )
    lora_target_modules: list = doc(
        "module names that get adapters",
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    )


@dataclass
class GenerationConfig:
    """The run's generation settings: the sampling of the training policy and of the evaluation
    policy (each built with its own ``SamplingOptions``) and where rollouts are generated
    (in-process or on a policy server)."""

    max_new_tokens: int = doc("tokens generated per turn at most", minimum=1, default=24)
    temperature: float = doc("sampling temperature for training rollouts", minimum=0, default=1.0)
    top_p: float = doc("nucleus sampling for training rollouts", minimum=0, default=1.0)
    eval_temperature: float = doc("temperature for evaluation (0: greedy)", minimum=0, default=0.0)
    server_url: str | None = doc(
        "generate training rollouts on an OpenAI-compatible server (vLLM, "
        "`turngym serve-policy`) at this URL instead of in-process; the trainer "
        "re-tokenizes the replies and recomputes their log-probs (unless "
        "generation.server_token_ids)",
        default=None,
    )
    server_token_ids: bool = doc(
        "token-in/token-out: ask the server for the prompt and completion token ids "
        "and per-token log-probs (vLLM and `turngym serve-policy` return them), so "
        "no reply is re-tokenized and the server's log-probs are the behaviour "
        "log-probs of the PPO ratio (they must be of the sampling distribution: "
        "temperature 1, or a server that reports processed log-probs)",
        default=False,
    )
    server_model: str | None = doc("model name on the server (None: the first it lists)", default=None)
    server_sync: str = doc(
        "how the server gets new weights after each update: 'none' (you reload it), "
        "'vllm_lora' (the adapter is saved to run_dir/adapter and loaded through vLLM's "
        "/v1/load_lora_adapter; needs VLLM_ALLOW_RUNTIME_LORA_UPDATING=True)",
        choices=("none", "vllm_lora"),
        default="none",
    )


@dataclass
class SFTConfig:
    episodes: int = doc("expert episodes to imitate before RL (0: no SFT)", minimum=0, default=0)
    epochs: int = doc("passes over the expert turns", minimum=1, default=1)
    lr: float = doc("learning rate (AdamW) for SFT", minimum=0, default=2e-4)
    batch_size: int = doc("turns per optimizer step", minimum=1, default=8)
    micro_batch_size: int = doc("turns per forward pass (gradient accumulation)", minimum=1, default=8)


@dataclass
class RLConfig:
    updates: int = doc("policy updates (each: collect groups, compute advantages, optimise)", minimum=0, default=10)
    tasks_per_update: int = doc("distinct tasks per update", minimum=1, default=2)
    group_size: int = doc("rollouts per task with identical start (the group)", minimum=1, default=8)
    estimator: str = doc("advantage estimator", choices=ESTIMATOR_NAMES, default="gigpo")
    estimator_args: dict = doc(
        "keyword arguments for the estimator (e.g. gamma, max_depth, alpha, lam)", default_factory=dict
    )
    branches: int = doc(
        "tree rollouts (turngym.core.pool.tree): continuations branched from an env snapshot at "
        "each branch point of a group; 0: independent rollouts. The env must declare snapshots",
        minimum=0,
        default=0,
    )
    branch_points: int = doc(
        "tree rollouts: branch points per group, chosen by branch_turns (divergence, then entropy)",
        minimum=1,
        default=1,
    )
    branch_after: int = doc(
        "tree rollouts: choose a group's branch points once each of its roots has played this "
        "many turns (or ended), so branches play beside the rest of the roots; 0: once every "
        "root ended (the choice sees whole episodes)",
        minimum=0,
        default=0,
    )
    empg: bool = doc("apply EMPG entropy modulation on top of the estimator", default=False)
    empg_args: dict = doc("keyword arguments for EMPG (k, k_next, zeta)", default_factory=dict)
    lr: float = doc("learning rate (AdamW) for RL", minimum=0, default=1e-4)
    lr_schedule: str = doc(
        "the learning rate over the updates: constant (rl.lr throughout) or linear (rl.lr "
        "at update 1 down to rl.lr / rl.updates at the last, as TRL's default)",
        choices=LR_SCHEDULES,
        default="constant",
    )
    weight_decay: float = doc("AdamW weight decay", minimum=0, default=0.0)
    epochs: int = doc("optimisation passes over each update's data", minimum=1, default=1)
    minibatch_size: int = doc("turns per optimizer step", minimum=1, default=16)
    micro_batch_size: int = doc("turns per forward pass (gradient accumulation)", minimum=1, default=8)
    clip_low: float = doc("PPO clip: ratio floor is 1 - clip_low", minimum=0, default=0.2)
    clip_high: float = doc("PPO clip: ratio ceiling is 1 + clip_high", minimum=0, default=0.28)
    kl_coef: float = doc(
        "weight of the KL to the reference, the policy as RL started (after SFT when there "
        "is SFT); 0: no reference pass",
        minimum=0,
        default=0.0,
    )
    value_coef: float = doc("weight of the value-head loss (turn_gae, hiper)", minimum=0, default=0.5)
    max_grad_norm: float = doc("gradient clipping norm", minimum=0, default=1.0)
    max_lag: int = doc(
        "asynchronous rollouts: a background worker generates the next updates' rollouts "
        "while the learner optimises, with weights at most this many updates old (update u "
        "trains on rollouts of the policy after update u-1-max_lag) and a decoupled-PPO "
        "importance correction; 0: synchronous, collect then update (see docs/training.md)",
        minimum=0,
        default=0,
    )
    is_cap: float = doc(
        "with max_lag >= 1: the importance weight pi_prox/pi_behaviour of each token is truncated at this value",
        minimum=0,
        default=2.0,
    )


@dataclass
class EvalConfig:
    every: int = doc(
        "evaluate on the held-out split every this many updates (0: only at the end)", minimum=0, default=5
    )
    episodes: int = doc("held-out episodes per evaluation (tasks taken in order)", minimum=1, default=20)
    curve_episodes: int = doc(
        "episodes of the evaluations between the first and the last (the first tasks of "
        "the same list; 0: eval.episodes): a cheaper learning curve, while the "
        "evaluations that a run's result compares stay whole",
        minimum=0,
        default=0,
    )
    at_start: bool = doc("also evaluate before training (update 0)", default=True)
    zero_shot: bool = doc("with SFT and at_start: evaluate before SFT too, not only after it", default=True)


@dataclass
class TrainConfig:
    run_dir: str = doc(
        "output folder: config.yaml, metrics.jsonl, rollouts/, eval/, curves.png, checkpoints/",
        default="runs/train",
    )
    seed: int = doc("seed of everything (task order, sampling, init)", default=0)
    resume: bool = doc("continue from the newest checkpoint in run_dir if there is one", default=True)
    checkpoint_every: int = doc("save a checkpoint every this many updates (0: never)", minimum=0, default=1)
    keep_checkpoints: int = doc("newest checkpoints kept on disk", minimum=1, default=2)
    tensorboard: bool = doc("also write TensorBoard event files under run_dir/tb", default=True)
    progress: bool = doc("show progress bars", default=True)
    save_rollouts: bool = doc("write every update's trajectories to run_dir/rollouts/", default=True)
    env: EnvConfig = field(default_factory=EnvConfig, metadata={"help": "environment"})
    model: ModelConfig = field(default_factory=ModelConfig, metadata={"help": "policy model"})
    generation: GenerationConfig = field(
        default_factory=GenerationConfig, metadata={"help": "how and where rollouts and evaluation generate"}
    )
    prompt: PromptConfig = field(
        default_factory=PromptConfig, metadata={"help": "how conversations are shown to the model"}
    )
    sft: SFTConfig = field(default_factory=SFTConfig, metadata={"help": "supervised warm start"})
    rl: RLConfig = field(default_factory=RLConfig, metadata={"help": "reinforcement learning"})
    eval: EvalConfig = field(default_factory=EvalConfig, metadata={"help": "held-out evaluation"})

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)


# ----- loading and checking ---------------------------------------------------------------


def load_config(
    path: str | Path | None = None, overrides: list[str] | None = None, base: dict | None = None
) -> TrainConfig:
    """Read YAML/TOML (or start from ``base``), apply ``key.sub=value`` overrides, check."""
    data: dict[str, Any] = dict(base or {})
    if path is not None:
        data = _merge(data, read_file(path))
    for item in overrides or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"override {item!r}: expected key.sub=value")
        value = yaml.safe_load(raw) if raw.strip() else ""
        node = data
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"{key}: {part} is not a section")
        node[parts[-1]] = value
    cfg = build(TrainConfig, data, "")
    check_estimator_args(cfg)
    if cfg.rl.max_lag > 0 and cfg.generation.server_url:
        raise ValueError(
            "rl.max_lag: asynchronous rollouts generate in-process; unset generation.server_url or use rl.max_lag=0"
        )
    return cfg


def check_estimator_args(cfg: TrainConfig) -> None:
    """Fail at load time (not after the model loaded) on an option the estimator does not take
    (the options each estimator declares, see ``trainers/advantages/estimator.py``)."""
    checks = (
        ("rl.estimator_args", ESTIMATORS[cfg.rl.estimator].options, cfg.rl.estimator_args),
        ("rl.empg_args", empg.OPTIONS, cfg.rl.empg_args),
    )
    for name, allowed, given in checks:
        for key in given:
            if key not in allowed:
                what = f"estimator {cfg.rl.estimator!r}" if name == "rl.estimator_args" else "EMPG"
                raise ValueError(f"{name}.{key}: not an option of {what}; allowed: {', '.join(allowed)}")
    check_tree(cfg.rl.estimator, cfg.rl.branches)
    if cfg.rl.estimator == "sibling":
        sibling.check_options(**cfg.rl.estimator_args)
    reference = cfg.rl.estimator_args.get("reference")
    if reference not in REFERENCES:
        raise ValueError(f"rl.estimator_args.reference: {reference!r} is not one of {list(REFERENCES)}")


#: module names of the built-in models (Llama architecture) that LoRA can target (lm_head: the
#: output projection, which the tiny test model needs to learn anything; peft warns that it is tied)
LLAMA_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")


def check_run(cfg: TrainConfig) -> None:
    """Checks that need the registry (run after --env-module imports), before any model loads:
    the env id, its constructor's keyword arguments, both splits, the model name and the LoRA
    target modules. Each failure is a ValueError naming the field and the allowed values."""
    import turngym
    from turngym.agents.models import _ALIASES, MODEL_NAMES
    from turngym.core.splits import split_task_ids

    try:
        env_spec = turngym.spec(cfg.env.id)
    except ValueError as e:
        raise ValueError(f"env.id: {e}") from None
    try:
        env = turngym.make(cfg.env.id, **cfg.env.kwargs)
    except TypeError as e:
        raise ValueError(f"env.kwargs: {e}") from None
    try:
        for name in ("train_split", "eval_split"):
            split_task_ids(env, getattr(cfg.env, name), f"env.{name}", env_spec.id)
    finally:
        env.close()
    if cfg.rl.branches and not turngym.snapshots_supported(env_spec.id):
        raise ValueError(
            f"rl.branches: tree rollouts need env snapshots, which {env_spec.id} does not support; "
            "use rl.branches=0 (`turngym list` shows the envs with snapshots)"
        )
    name = _ALIASES.get(cfg.model.name, cfg.model.name)
    if name not in MODEL_NAMES and not Path(name).expanduser().exists():
        raise ValueError(
            f"model.name: {name!r} is neither a built-in model ({', '.join(MODEL_NAMES)}) "
            "nor an existing checkpoint directory or .gguf file"
        )
    if cfg.model.lora and name in MODEL_NAMES:
        bad = [m for m in cfg.model.lora_target_modules if m not in LLAMA_MODULES]
        if bad or not cfg.model.lora_target_modules:
            raise ValueError(
                f"model.lora_target_modules: {bad or 'empty'} not in the model; allowed: {', '.join(LLAMA_MODULES)}"
            )


def read_file(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise ValueError(f"config: {path} does not exist")
    if path.is_dir():
        raise ValueError(f"config: {path} is a folder; give a .yaml, .yml, .toml or .json file")
    text = path.read_text()
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml", ".json"):
            data = yaml.safe_load(text) or {}
        else:
            raise ValueError(f"config: {path} must end in .yaml, .yml, .toml or .json")
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as e:
        # one line: where and what, not the parser's multi-line dump
        where = getattr(e, "problem_mark", None)
        at = f"line {where.line + 1}, column {where.column + 1}: " if where is not None else ""
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ValueError(f"config: {path} is not valid {path.suffix.lstrip('.').upper()}: {at}{what}") from None
    if not isinstance(data, dict):
        raise ValueError(f"config: {path} must hold a mapping at the top level")
    return data


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def run_file_fields(cls) -> list[dataclasses.Field]:
    """The fields of a section a run file may set: its documented ones. ``PromptConfig``'s
    ``action_format`` and ``env_prompts`` are not: the trainer sets them from the estimator."""
    return [f for f in dataclasses.fields(cls) if "help" in f.metadata]


def _as_dict(obj) -> dict[str, Any]:
    """A config as a run file writes it (what ``dataclasses.asdict`` gives, run-file fields only)."""
    out = {}
    for f in run_file_fields(type(obj)):
        value = getattr(obj, f.name)
        out[f.name] = _as_dict(value) if dataclasses.is_dataclass(value) else copy.deepcopy(value)
    return out


def build(cls, data: Any, prefix: str):
    if not isinstance(data, dict):
        raise ValueError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, got {data!r}")
    fields = {f.name: f for f in run_file_fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"{prefix}{unknown[0]}: unknown field; allowed: {', '.join(fields)}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, value in data.items():
        f, hint = fields[name], hints[name]
        if dataclasses.is_dataclass(hint):
            kwargs[name] = build(hint, value, f"{prefix}{name}.")
        else:
            kwargs[name] = _check(f"{prefix}{name}", value, hint, f.metadata)
    return cls(**kwargs)


def _check(name: str, value: Any, hint: Any, meta: Any) -> Any:
    args = typing.get_args(hint)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), hint) if args else hint
    if value is None:
        if optional:
            return None
        raise ValueError(f"{name}: must not be empty")
    if base is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if base is float and isinstance(value, str):  # YAML 1.1 reads "2e-5" as text
        try:
            value = float(value)
        except ValueError:
            pass
    origin = typing.get_origin(base) or base
    if origin is bool and not isinstance(value, bool):
        raise ValueError(f"{name}: expected true or false, got {value!r}")
    if origin in (int, float) and (isinstance(value, bool) or not isinstance(value, origin)):
        raise ValueError(f"{name}: expected {origin.__name__}, got {value!r}")
    if origin in (str, list, dict) and not isinstance(value, origin):
        raise ValueError(f"{name}: expected {origin.__name__}, got {value!r}")
    choices, minimum = meta.get("choices"), meta.get("minimum")
    if choices and value not in choices:
        raise ValueError(f"{name}: {value!r} is not allowed; allowed: {', '.join(map(str, choices))}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {value!r}")
    return value


def describe(cls=TrainConfig, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(name, type, default, help) for every field, sections flattened with dots."""
    rows = []
    hints = typing.get_type_hints(cls)
    for f in run_file_fields(cls):
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            rows += describe(hint, f"{prefix}{f.name}.")
            continue
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        type_name = getattr(hint, "__name__", str(hint)).replace("typing.", "")
        help_ = f.metadata.get("help", "")
        if f.metadata.get("choices"):
            help_ += f" (one of: {', '.join(f.metadata['choices'])})"
        rows.append((f"{prefix}{f.name}", type_name, json.dumps(default), help_))
    return rows


def dump_yaml(cfg: TrainConfig) -> str:
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)
