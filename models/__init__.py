"""Single-device spatial-temporal DiTs. No distributed code here, and no import of dspbench.methods or the harness."""
from dspbench.models.config import MODELS, ModelConfig, Shape
from dspbench.models.registry import get_config
from dspbench.models.axial import H_DIM, W_DIM, AxialDiT
from dspbench.models.dit import S_DIM, T_DIM, SpatialTemporalDiT
from dspbench.models.full3d import Full3DDiT
from dspbench.models.inputs import make_inputs


def build_model(cfg: ModelConfig) -> SpatialTemporalDiT:
    return {"axial3d": AxialDiT, "full3d": Full3DDiT, "hybrid3d": Full3DDiT}.get(cfg.layout, SpatialTemporalDiT)(cfg)


__all__ = ["MODELS", "ModelConfig", "Shape", "get_config", "build_model", "make_inputs",
           "SpatialTemporalDiT", "AxialDiT", "Full3DDiT", "S_DIM", "T_DIM", "H_DIM", "W_DIM"]
