"""A configuration's names checked against the registries: an unknown method or model is an error (a
typo, a plugin not installed yet), never an `unsupported` record: sweeps keep those forever, so the
point would never be retried."""
from __future__ import annotations

from dspbench.methods import unknown_method
from dspbench.models import MODELS
from dspbench.models.registry import resolve
from dspbench.records.config import RunConfig


def check_names(cfg: RunConfig) -> None:
    if why := unknown_method(cfg.method):
        raise ValueError(why)
    if cfg.model not in MODELS:
        resolve(cfg.model)     # a preset or a model file (with overrides); else a ValueError saying why


def validate(cfg: RunConfig) -> None:
    """The configuration's static errors (RunConfig.validate) and its names."""
    cfg.validate()
    check_names(cfg)
