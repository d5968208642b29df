"""A RunConfig's command-line form: the flags `dspbench run`, `predict` and `plan` share, and the argv a
SLURM task hands its ranks. Both are generated from the fields' declarations (config.option), so a new
field is one line there and reaches every launcher."""
from __future__ import annotations

import argparse
from dataclasses import Field, fields

from dspbench.records.config import RunConfig

GROUP_TITLES = {"config": "configuration (part of the run_id)", "execution": "execution"}


def flag_of(f: Field) -> str:
    return f.metadata["cli"].flag or "--" + f.name.replace("_", "-")


def _fields_in(group: str) -> list[Field]:
    return [f for f in fields(RunConfig) if f.metadata["cli"].group == group]


def add_field(g, f: Field, **override) -> None:
    """One RunConfig field as an argparse option, from its declaration (`override`: argparse keywords
    that replace the declared ones, e.g. a default left to the hardware profile)."""
    opt = f.metadata["cli"]
    # the parsers show argparse's defaults; a None there stands for the declared one
    shown = f"{opt.help} (default {f.default})" if opt.unset_default else opt.help
    kw = {"dest": f.name, "help": argparse.SUPPRESS if opt.hidden else shown}
    if isinstance(f.default, bool):   # a default the model may decide is tri-state: --cfg / --no-cfg / unset
        kw.update(action=argparse.BooleanOptionalAction, default=None) if opt.unset_default else kw.update(action="store_true")
    else:
        kw.update(default=None if opt.unset_default else f.default, type=opt.type or type(f.default))
        kw.update({k: v for k, v in (("choices", opt.choices), ("metavar", opt.metavar)) if v})
    g.add_argument(flag_of(f), **{**kw, **override})


def add_model_args(g) -> None:
    """The model and its token grid: every command that prices or runs a model takes these
    (`run`, `predict`, `plan`)."""
    for f in _fields_in("model"):
        add_field(g, f)
    g.add_argument("--model-set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field of the model (repeatable), e.g. --model-set depth=2 --model-set hidden=128")


# Fields a hardware profile's device decides when the command line leaves them unset (`predict`:
# bench/cost/hardware.py device_defaults)
BY_PROFILE = {"dtype": "model dtype (default: bf16 on a GPU profile, fp32 on a CPU one)",
              "backend": "torch.distributed backend priced (default: nccl on a GPU profile, gloo on a CPU one)"}


def add_run_args(p: argparse.ArgumentParser, by_profile: bool = False) -> None:
    """`run`'s flags from RunConfig; by_profile: --dtype/--backend default to None (BY_PROFILE)."""
    groups = {name: p.add_argument_group(title) for name, title in GROUP_TITLES.items()}
    for f in fields(RunConfig):
        group = f.metadata["cli"].group
        if group == "model":
            if f is _fields_in("model")[0]:
                add_model_args(groups["config"])
            continue
        if by_profile and f.name in BY_PROFILE:
            add_field(groups[group], f, default=None, help=BY_PROFILE[f.name])
        else:
            add_field(groups[group], f)
    groups["execution"].add_argument(
        "--hardware", default=None,
        help="hardware profile (bench/cost/profiles/*.toml or a calibrated .toml): resolves --sp auto")
    o = p.add_argument_group("output")
    o.add_argument("--out", default="results/runs", help="directory for the records file")
    o.add_argument("--records-file", default=None, help="append to this file instead of one under --out")
    o.add_argument("--json", action="store_true", help="print the record as JSON on stdout (no progress bar)")
    o.add_argument("--outcome-prefix", default=None, metavar="PREFIX",
                   help="env/slurm launchers: each rank writes PREFIX.r<rank>.beat (step) and .outcome (sweep jobs)")


def config_argv(cfg: RunConfig) -> list[str]:
    """`dspbench run` flags for every field of `cfg`: what a rank parses back into the same RunConfig."""
    argv = []
    for f in fields(RunConfig):
        value = getattr(cfg, f.name)
        if isinstance(f.default, bool):   # a tri-state flag is always said, so a rank never re-decides it
            tri = f.metadata["cli"].unset_default
            argv += [flag_of(f)] if value else ["--no-" + flag_of(f)[2:]] if tri else []
        else:
            argv += [flag_of(f), str(value)]
    return argv


def config_from_args(args) -> RunConfig:
    """The RunConfig the flags say; what they leave unset comes from the model's [sampling] where it
    has one, else RunConfig's defaults (bench/facts/defaults.py), said in `defaults_from`."""
    from dspbench.facts.defaults import fill_defaults
    names = {f.name for f in fields(RunConfig)}
    values = {k: v for k, v in vars(args).items() if k in names and v is not None}
    model = with_model_set(values.get("model", RunConfig.model), getattr(args, "model_set", []))
    values = fill_defaults({**values, "model": model}, pick_method=hasattr(args, "method"))
    values.update(model_and_shape(model, [], values.get("frames"), values.get("spatial"), values.get("video", "")))
    if "shard" in vars(args) and args.shard is None:   # not given: the dim this SP degree pads least
        from dspbench.facts.shard import with_chosen_shard
        return with_chosen_shard(RunConfig(**values))   # values hold no shard: RunConfig's T to start from
    return RunConfig(**values)


def with_model_set(model: str, model_set: list[str]) -> str:
    from dspbench.models.registry import with_overrides
    return with_overrides(model, model_set)


def model_and_shape(model: str, model_set: list[str], frames, spatial, video: str) -> dict:
    """The model reference with its --model-set overrides, and T, S: given, from --video through the
    model's VAE and patch (models/registry.py), or RunConfig's defaults. Both given must agree."""
    from dspbench.models.registry import video_to_tokens, with_overrides
    model = with_overrides(model, model_set)
    out = {"model": model, "frames": RunConfig.frames if frames is None else frames,
           "spatial": RunConfig.spatial if spatial is None else spatial}   # a 0 given is validate()'s to refuse
    if video:
        T, S = video_to_tokens(model, video)
        if (frames is not None and frames != T) or (spatial is not None and spatial != S):
            raise ValueError(f"--video {video} gives T={T}, S={S} for {model}, but --frames {frames} --spatial {spatial} "
                             "were given too: pass one or the other")
        out.update(frames=T, spatial=S, video=video)
    return out
