"""Test-session settings shared by every test file."""

import torch

# The test models are tiny: splitting their matmuls over threads costs more than it saves, and on a
# busy 2-core machine spinning OpenMP workers slow the suite down several-fold.
torch.set_num_threads(1)
