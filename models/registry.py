"""Where a model name leads: a built-in name, a preset of a public video DiT, or a TOML file, each with
optional field overrides; and a video size in frames x pixels converted to the model's T and S.

A model reference is one string, so it travels unchanged through RunConfig, run_ids, sweep specs and
the rank command lines:
    stdit-xl                          a built-in (models/config.py MODELS)
    wan2.1-14b                        a preset (models/presets/<name>.toml, shipped in the package)
    path/to/my_dit.toml               a file of the same form
    hunyuanvideo[depth=2,hidden=64]   any of these with fields overridden (`--model-set key=value`)

A model file's tables: [model] the ModelConfig fields; [vae] its compression (time, height, width;
causal: 1 + (F - 1) / time latent frames) and optionally its decoder (channels, layers_per_block,
latent_channels, mid_attention: what the cost model prices the decode by); [published] params and source; [sampling] video
("FxHxW"), steps, guidance (cfg | distilled), text_encoder, and how its pipeline decodes (decode,
decode_tile, decode_stride, decode_extra_frames, decode_source: bench/cost/pipeline.py); [notes] simplifies. Unknown tables or
fields, missing ones and bad values are ValueErrors naming the file and the field (exit 2).
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path

from dspbench.models.config import MODELS, ModelConfig

PRESET_DIR = Path(__file__).parent / "presets"
_TABLES = {"model", "vae", "published", "sampling", "notes"}
_REQUIRED = {"model": {"layout", "depth", "hidden", "heads"}, "vae": {"time", "height", "width", "causal"},
             "published": {"params", "source"}}
_DECODER = {"channels", "layers_per_block", "latent_channels", "mid_attention"}   # [vae], optional: its decoder
_ALLOWED = {"vae": {"time", "height", "width", "causal"} | _DECODER, "published": {"params", "source"},
            "sampling": {"video", "steps", "guidance", "text_encoder", "decode", "decode_tile", "decode_stride",
                         "decode_extra_frames", "decode_source"}, "notes": {"simplifies"}}
DECODES = ("single", "tiled", "patch_parallel")


@dataclass(frozen=True)
class VAE:
    """The VAE's compression and, where the file gives it, its decoder's architecture (as diffusers'
    configs name it: block_out_channels full resolution first, layers_per_block, latent_channels, and
    whether the middle block has attention); the cost model prices the decode from it."""
    time: int = 1
    height: int = 8
    width: int = 8
    causal: bool = False
    channels: tuple = ()
    layers_per_block: int = 0
    latent_channels: int = 0
    mid_attention: bool = True


@dataclass(frozen=True)
class ModelEntry:
    """A model and what its file says about it (built-ins: the config alone)."""
    name: str
    config: ModelConfig
    vae: VAE = field(default_factory=VAE)
    published: dict = field(default_factory=dict)
    sampling: dict = field(default_factory=dict)
    notes: dict = field(default_factory=dict)
    path: str = ""


def get_config(name: str, **overrides) -> ModelConfig:
    """A built-in by name, or a preset, a model file, either with [field=value] overrides; unknown
    names are a KeyError naming what is known."""
    try:
        cfg = MODELS[name] if name in MODELS else resolve(name).config
    except ValueError as e:
        raise KeyError(str(e)) from None
    cfg = cfg.with_(**overrides)
    cfg.validate()
    return cfg


def presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def split_overrides(ref: str) -> tuple[str, dict]:
    """'name[k=v,k2=v2]' -> ('name', {k: v}); values parsed as TOML scalars."""
    if not ref.endswith("]") or "[" not in ref:
        return ref, {}
    base, inner = ref[:-1].split("[", 1)
    out = {}
    for item in filter(None, inner.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"model override {item!r} in {ref!r}: expected key=value")
        out[key.strip()] = _scalar(value.strip(), f"{ref}: {key}")
    return base, out


def _scalar(text: str, where: str):
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        if text.replace("-", "").replace("_", "").replace(".", "").isalnum():
            return text            # a bare word: a string (layout = full3d)
        raise ValueError(f"{where}: {text!r} is not a number, true/false, a word or a [list]") from None


def with_overrides(ref: str, settings: list[str]) -> str:
    """The reference for `--model ref --model-set k=v ...`: 'ref[k=v,...]' (validated by resolving it)."""
    if not settings:
        return ref
    pairs = []
    for s in settings:
        key, sep, value = s.partition("=")
        if not sep or not key:
            raise ValueError(f"--model-set {s!r}: expected key=value")
        pairs.append(f"{key.strip()}={value.strip()}")
    base, old = split_overrides(ref)
    merged = {**old, **dict(p.split("=", 1) for p in pairs)}
    out = f"{base}[{','.join(f'{k}={v}' for k, v in merged.items())}]"
    try:
        resolve(out)
    except (KeyError, ValueError) as e:   # the reason names the flag that carried the bad value
        raise ValueError(f"--model-set: {e.args[0] if e.args else e}") from None
    return out


@lru_cache(maxsize=256)
def resolve(ref: str) -> ModelEntry:
    """The model a reference names (see the module docstring), overrides applied and validated."""
    base, overrides = split_overrides(ref)
    if base in MODELS:
        entry = ModelEntry(base, MODELS[base])
    elif base in presets():
        entry = load_file(PRESET_DIR / f"{base}.toml", base)
    elif base.endswith(".toml"):
        if not Path(base).is_file():
            raise ValueError(f"model file {base!r} does not exist")
        entry = load_file(Path(base), base)
    else:
        raise ValueError(f"unknown model {base!r}; known: {', '.join(sorted(MODELS) + presets())}, "
                         "or a path to a .toml model file")
    if overrides:
        entry = ModelEntry(ref, _config(entry.config, overrides, ref), entry.vae, entry.published,
                           entry.sampling, entry.notes, entry.path)
    return entry


def _config(base: ModelConfig, values: dict, where: str) -> ModelConfig:
    known = {f.name for f in fields(ModelConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{where}: unknown model field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
    values = dict(values)
    if "patch" in values:
        values["patch"] = tuple(values["patch"])
    for k, v in values.items():
        want = type(getattr(base, k))
        if want is float and isinstance(v, int) and not isinstance(v, bool):
            values[k] = float(v)
        elif not isinstance(values[k], want) or (want is int and isinstance(v, bool)):
            raise ValueError(f"{where}: field {k} = {v!r} must be {want.__name__}")
    cfg = base.with_(**values)
    try:
        cfg.validate()
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    for k in ("depth", "hidden", "heads", "in_channels", "text_len", "caption_channels"):
        if getattr(cfg, k) < 1:
            raise ValueError(f"{where}: field {k} must be >= 1, got {getattr(cfg, k)}")
    return cfg


def load_file(path: Path, name: str) -> ModelEntry:
    where = str(path)
    try:
        d = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{where}: not valid TOML: {e}") from None
    unknown = sorted(set(d) - _TABLES)
    if unknown:
        raise ValueError(f"{where}: unknown table(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_TABLES))}")
    for table, need in _REQUIRED.items():
        missing = sorted(need - set(d.get(table, {})))
        if missing:
            raise ValueError(f"{where}: [{table}] is missing {', '.join(missing)}")
    for table, allowed in _ALLOWED.items():
        extra = sorted(set(d.get(table, {})) - allowed)
        if extra:
            raise ValueError(f"{where}: [{table}] unknown field(s) {', '.join(extra)}; allowed: {', '.join(sorted(allowed))}")
    cfg = _config(ModelConfig(), d["model"], f"{where}: [model]")
    v = d["vae"]
    for k in ("time", "height", "width"):
        if not isinstance(v[k], int) or isinstance(v[k], bool) or v[k] < 1:
            raise ValueError(f"{where}: [vae] {k} must be an integer >= 1, got {v[k]!r}")
    if not isinstance(v["causal"], bool):
        raise ValueError(f"{where}: [vae] causal must be true or false, got {v['causal']!r}")
    v = {**v, **_decoder(v, where)}
    pub = d["published"]
    if not isinstance(pub["params"], (int, float)) or pub["params"] <= 0 or not str(pub["source"]).strip():
        raise ValueError(f"{where}: [published] needs params > 0 and a non-empty source")
    samp = d.get("sampling", {})
    if "video" in samp:
        parse_video(samp["video"])
    if samp.get("guidance", "cfg") not in ("cfg", "distilled"):
        raise ValueError(f"{where}: [sampling] guidance must be cfg or distilled, got {samp['guidance']!r}")
    _check_decode(samp, where)
    return ModelEntry(name, cfg, VAE(**v), dict(pub), dict(samp), dict(d.get("notes", {})), where)


def _check_decode(samp: dict, where: str) -> None:
    """[sampling] decode (single | tiled | patch_parallel) with its source; a tiling is decode_tile and
    decode_stride, each [frames, rows, columns] of latents (a tile 0: that dim not tiled; a stride in
    1..tile where tiled), and decode_extra_frames >= 0."""
    keys = {"decode", "decode_tile", "decode_stride", "decode_extra_frames", "decode_source"} & set(samp)
    if not keys:
        return
    if samp.get("decode") not in DECODES or not str(samp.get("decode_source", "")).strip():
        raise ValueError(f"{where}: [sampling] decode must be one of {', '.join(DECODES)}, with a non-empty "
                         f"decode_source (where the pipeline's decode is stated), got {samp.get('decode')!r}")
    tiled = {"decode_tile", "decode_stride"} & set(samp)
    if tiled and (samp["decode"] != "tiled" or len(tiled) < 2):
        raise ValueError(f"{where}: [sampling] decode_tile and decode_stride go together, with decode = \"tiled\"")
    if not tiled:
        return
    tile, stride = samp["decode_tile"], samp["decode_stride"]
    ints = lambda xs: isinstance(xs, list) and len(xs) == 3 and all(isinstance(x, int) and not isinstance(x, bool)
                                                                   and x >= 0 for x in xs)
    if not ints(tile) or not ints(stride) or any((t > 0) != (1 <= st <= t) for t, st in zip(tile, stride)):
        raise ValueError(f"{where}: [sampling] decode_tile and decode_stride must be [frames, rows, columns] of "
                         f"integers >= 0, each stride in 1..tile where the tile is > 0 (0 where it is 0); got "
                         f"{tile!r} and {stride!r}")
    extra = samp.get("decode_extra_frames", 0)
    if not isinstance(extra, int) or isinstance(extra, bool) or extra < 0:
        raise ValueError(f"{where}: [sampling] decode_extra_frames must be an integer >= 0, got {extra!r}")


def _decoder(v: dict, where: str) -> dict:
    """[vae]'s optional decoder fields, checked: all of channels, layers_per_block and latent_channels
    or none; channels a list of positive integers, each a multiple of the first."""
    given = _DECODER & set(v)
    if not given:
        return {}
    missing = sorted({"channels", "layers_per_block", "latent_channels"} - given)
    if missing:
        raise ValueError(f"{where}: [vae] describes a decoder but is missing {', '.join(missing)}")
    ch = v["channels"]
    if (not isinstance(ch, list) or len(ch) < 2 or not all(isinstance(c, int) and not isinstance(c, bool) and c > 0
                                                           for c in ch) or any(c % ch[0] for c in ch)):
        raise ValueError(f"{where}: [vae] channels must be a list of >= 2 positive integers, each a multiple of "
                         f"the first (full resolution first), got {ch!r}")
    for k in ("layers_per_block", "latent_channels"):
        if not isinstance(v[k], int) or isinstance(v[k], bool) or v[k] < 1:
            raise ValueError(f"{where}: [vae] {k} must be an integer >= 1, got {v[k]!r}")
    if not isinstance(v.get("mid_attention", True), bool):
        raise ValueError(f"{where}: [vae] mid_attention must be true or false, got {v['mid_attention']!r}")
    return {"channels": tuple(ch)}


# ---------------------------------------------------------------- sizes in pixels
def parse_video(text: str) -> tuple[int, int, int]:
    """'129x720x1280' -> (129, 720, 1280): frames x height x width."""
    parts = str(text).lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"video size {text!r}: expected FRAMESxHEIGHTxWIDTH, e.g. 129x720x1280")
    return tuple(int(p) for p in parts)


def video_to_tokens(ref: str, video: str) -> tuple[int, int]:
    """(T, S) of a video through the model's VAE and patch; a size that does not convert exactly is a
    ValueError naming the nearest sizes that do."""
    entry = resolve(ref)
    F, H, W = parse_video(video)
    vae, (pt, ph, pw) = entry.vae, entry.config.patch
    frames_ok = (F - 1) % vae.time == 0 if vae.causal else F % vae.time == 0
    sh, sw = vae.height * ph, vae.width * pw
    if not frames_ok or H % sh or W % sw:
        raise ValueError(f"{entry.name}: video {video} does not convert exactly (VAE {vae.time}x{vae.height}x"
                         f"{vae.width}{' causal' if vae.causal else ''}, patch {pt}x{ph}x{pw}); nearest: "
                         f"{_nearest(F, vae.time, vae.causal)}x{_round(H, sh)}x{_round(W, sw)}")
    latent_t = 1 + (F - 1) // vae.time if vae.causal else F // vae.time
    if latent_t % pt:
        raise ValueError(f"{entry.name}: {latent_t} latent frames do not divide by the temporal patch {pt}")
    return latent_t // pt, (H // sh) * (W // sw)


def _round(x: int, step: int) -> str:
    lo, hi = max(step, x // step * step), -(-x // step) * step
    return str(lo) if lo == hi else f"{{{lo},{hi}}}"


def _nearest(F: int, t: int, causal: bool) -> str:
    if causal:
        lo = 1 + max(0, (F - 1) // t) * t
        hi = 1 + -(-(F - 1) // t) * t
    else:
        lo, hi = max(t, F // t * t), -(-F // t) * t
    return str(lo) if lo == hi else f"{{{lo},{hi}}}"
