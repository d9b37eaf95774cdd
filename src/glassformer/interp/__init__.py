"""Take a trained model apart (issue 13): decomposition, logit lens, ablation, patching.

    from glassformer.interp import decompose, logit_lens, ablate, patch

- `decompose(model, *inputs)`: the final residual stream as a sum of named parts (decompose.py)
- `logit_lens(model, *inputs)`: every layer's stream read through the final norm and head (lens.py)
- `ablate(model, *inputs, heads=[(l, h)], how="zero")`: the output without some parts (ablate.py)
- `patch(model, clean, corrupted, hook=...)`: which place restores the clean answer (patch.py),
  with `attribution_patch` its gradient estimate (attribution.py)
Every tool reads and writes activations through `glassformer.trace` hooks (no second hook
mechanism); the identities they rely on are tests in tests/test_interp_*.py.
"""

from .ablate import ablate, ablation_hooks, delete, deletions
from .attribution import agreement, attribution_patch
from .decompose import Decomposition, decompose
from .lens import LogitLens, logit_lens
from .patch import PatchResult, patch, run_patched

__all__ = ["decompose", "logit_lens", "ablate", "ablation_hooks", "patch", "attribution_patch", "agreement", "delete",
           "deletions", "run_patched", "Decomposition", "LogitLens", "PatchResult"]
