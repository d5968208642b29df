"""dspbench: sequence parallelism for spatial-temporal transformers, measured honestly."""
__version__ = "0.1.0"
