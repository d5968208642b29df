"""No sequence parallelism: the single-device oracle and the speed-up denominator."""
from dspbench.methods.spec import Look, MethodSpec


def _check(cfg, shape, dims):
    return None if dims.sp == 1 else f"single runs without sequence parallelism (sp=1), got sp={dims.sp}"


def _parallelize(model, dims):
    return model


METHOD = MethodSpec(
    name="single", summary="unsharded model (oracle)", constraints="sp == 1",
    check=_check, parallelize=_parallelize, forward_ops=lambda cfg, shape, dims, b: [],
    report=Look(label="single device", colour="#7F7F7F", order=130),
)
