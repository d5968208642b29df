"""What a command fills in where the user said nothing, and where it came from.

A preset (or model file) with a [sampling] table states how its published pipeline samples: its
native video, denoising steps and guidance. In sample mode those are the defaults of `run`,
`predict`, `plan`, `replay` and sweeps, field by field: a flag (or a sweep's key) the user gave
wins; a field left out takes the model's value; a model without [sampling] keeps RunConfig's
defaults (T 16 x S 64, 10 steps, no CFG). Guidance `cfg` is two model calls per step (CFG on),
`distilled` one (CFG off). The method left out is DSP, except where DSP cannot apply to the
model's layout at all (full3d: one attention spans T x S), where it is Ulysses, the method such
models' published runs use. What was filled in is said in the record's `defaults_from` and in
every output's "priced ..." line (priced_line), so a number per video is never a silent
default's.
"""
from __future__ import annotations

from dspbench.records.config import RunConfig

FALLBACK_METHOD = "ulysses"     # where DSP cannot apply to the layout (methods/dsp.py applicability)


def _sampling(model: str) -> tuple[str, dict]:
    """(the model's base name, its [sampling] table); ("", {}) for a built-in or an unknown name
    (validation names an unknown model later, with what is known)."""
    from dspbench.models.registry import resolve, split_overrides
    try:
        entry = resolve(model)
    except (KeyError, ValueError):
        return "", {}
    return split_overrides(model)[0], dict(entry.sampling)


def _method_default(model: str) -> tuple[str, str]:
    """(method, why) for a configuration that names none."""
    from dspbench.methods.dsp import applicability
    from dspbench.models import get_config
    try:
        why = applicability(get_config(model))
    except (KeyError, ValueError):
        return RunConfig.method, ""
    if why is None:
        return RunConfig.method, ""
    return FALLBACK_METHOD, f"method {FALLBACK_METHOD} (DSP cannot apply to {get_config(model).layout})"


def sampling_defaults(model: str, given: dict) -> tuple[dict, list[str]]:
    """The sample-mode fields `given` leaves out, from the model's [sampling]: ({field: value}, notes)."""
    name, samp = _sampling(model)
    out, notes = {}, []
    if not samp:
        return out, notes
    if samp.get("video") and all(given.get(k) in (None, "") for k in ("frames", "spatial", "video")):
        out["video"] = samp["video"]
        notes.append(f"video {samp['video']}")
    if "steps" in samp and given.get("sample_steps") is None:
        out["sample_steps"] = int(samp["steps"])
        notes.append(f"{samp['steps']} steps")
    if given.get("cfg") is None:
        out["cfg"] = samp.get("guidance", "cfg") == "cfg"
        notes.append("CFG" if out["cfg"] else "no CFG (guidance distilled)")
    return out, ([f"{name} [sampling]: " + ", ".join(notes)] if notes else [])


def fill_defaults(values: dict, pick_method: bool = True) -> dict:
    """RunConfig keyword values with what the user left out filled in (see the module doc); unset
    fields are absent or None. pick_method: the command runs one method (plan tries them all).
    `defaults_from` says what was filled and from where."""
    given = {k: v for k, v in values.items() if v is not None}
    model = given.get("model", RunConfig.model)
    notes = []
    if given.get("mode", RunConfig.mode) == "sample":
        filled, notes = sampling_defaults(model, given)
        given.update(filled)
    if pick_method and "method" not in given:
        given["method"], why = _method_default(model)
        notes += [why] if why else []
    given.setdefault("cfg", False)
    if notes and not given.get("defaults_from"):
        given["defaults_from"] = "; ".join(notes)
    return given


def priced_line(cfg) -> str:
    """What a sample-mode number is per: the video (or T x S), steps and guidance, and where each
    default came from; other modes: the token grid. cfg: a RunConfig or a record."""
    get = cfg.get if isinstance(cfg, dict) else lambda k: getattr(cfg, k)
    grid = f"T {get('frames')} x S {get('spatial')}"
    what = f"{get('video')} ({grid})" if get("video") else grid
    if get("mode") != "sample":
        return f"priced {what}, one {get('mode')} step"
    calls = ("CFG (2 calls per step" + (", one per CFG half)" if get("cfg_parallel") else ")")) if get("cfg") else "no CFG"
    line = f"priced {what}, {get('sample_steps')} steps, {calls}"
    return line + (f": defaults from {get('defaults_from')}" if get("defaults_from") else "")
