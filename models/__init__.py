"""Single-device spatial-temporal DiTs. No distributed code here, and no import of dspbench.methods or the harness."""
from .config import MODELS, ModelConfig, Shape, get_config
from .axial import H_DIM, W_DIM, AxialDiT
from .dit import S_DIM, T_DIM, SpatialTemporalDiT
from .full3d import Full3DDiT
from .inputs import make_inputs


def build_model(cfg: ModelConfig) -> SpatialTemporalDiT:
    return {"axial3d": AxialDiT, "full3d": Full3DDiT, "hybrid3d": Full3DDiT}.get(cfg.layout, SpatialTemporalDiT)(cfg)


__all__ = ["MODELS", "ModelConfig", "Shape", "get_config", "build_model", "make_inputs",
           "SpatialTemporalDiT", "AxialDiT", "Full3DDiT", "S_DIM", "T_DIM", "H_DIM", "W_DIM"]
