# The tiny suite of tests/e2e/bench.sh and slurm.sh (HAND-WRITTEN fixtures):
# write_scale_suite DIR writes DIR/level1/{1,2}_Scale.py, y = relu(x) * n.
write_scale_suite() {
  mkdir -p "$1/level1"
  local n
  for n in 1 2; do
    cat >"$1/level1/${n}_Scale.py" <<PY
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * $n


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
PY
  done
}
