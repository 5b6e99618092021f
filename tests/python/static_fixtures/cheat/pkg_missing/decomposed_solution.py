from .subkernel_implementations.gone import ModelNew  # expect: no-triton-launch
