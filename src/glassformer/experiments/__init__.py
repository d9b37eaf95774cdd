"""`glassformer ablate`: one experiment per seed claim, each measured over seeds and judged by a stated rule.

Modules: `runner` (the lean trainer), `synthetic` (generated tasks), `verdict` (the rule),
`report` (REPORT.md, plots, JSON), `registry` (ids), and one module per claim.
"""

from .registry import EXPERIMENTS, resolve, run_one

__all__ = ["EXPERIMENTS", "resolve", "run_one"]
