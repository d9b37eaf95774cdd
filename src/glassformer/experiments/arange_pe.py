"""Seed 003 §3: "build the positions with torch.arange(max_len) and forget the float conversion, and
pos / 10000^(2i/d_model) is integer division: the whole encoding becomes zero".

In PyTorch (since 1.5) `/` on integer tensors is true division, and an int tensor times a float
tensor is promoted to float; only `//` floors. An exact check: the seed's integer recipe (and the
usual exp/log recipe with an integer arange) against the float64 sinusoid computed by hand.
"""

from __future__ import annotations

import math

import torch

from .base import Context, Outcome
from .verdict import Exact, Variant

ID = "arange-pe"
SECTION = "seed 003 §3"
CLAIM = ("A fatal mistake: generating the position index with torch.arange(max_len) without converting "
         "it to float makes pos / 10000^(2i/d_model) integer division, so the whole positional "
         "encoding matrix is zero and the model loses all sense of order.")
SEEDS = 1
MAX_LEN, D_MODEL = 128, 64


def run(ctx: Context) -> Outcome:
    pos_int = torch.arange(MAX_LEN).unsqueeze(1)  # int64, as in the seed's mistake
    i_int = torch.arange(0, D_MODEL, 2)  # int64
    as_written = torch.sin(pos_int / 10000 ** (i_int / D_MODEL))  # the seed's formula, integer inputs
    div_term = torch.exp(torch.arange(0, D_MODEL, 2).float() * (-math.log(10000.0) / D_MODEL))
    exp_recipe = torch.sin(pos_int * div_term)  # the Annotated Transformer's recipe, int positions
    exact = torch.tensor([[math.sin(p / 10000 ** (i / D_MODEL)) for i in range(0, D_MODEL, 2)]
                          for p in range(MAX_LEN)], dtype=torch.float64)
    floor_div = torch.sin((pos_int // 10000 ** (i_int / D_MODEL)).double())  # `//` floors: this one breaks
    rows = slice(1, None)  # position 0 is sin(0) = 0 in every recipe
    variants = [
        Variant("int arange, '/': zero entries", "fraction of exact zeros (positions ≥ 1)",
                [float((as_written[rows] == 0).double().mean())]),
        Variant("int arange, '/': error", "max |PE − float64 PE|", [float((as_written.double() - exact).abs().max())]),
        Variant("int arange × float div_term: error", "max |PE − float64 PE|",
                [float((exp_recipe.double() - exact).abs().max())]),
        Variant("int '//' (floor division): error", "max |PE − float64 PE|", [float((floor_div - exact).abs().max())]),
        Variant("dtype of the seed's result", "1 = floating point", [float(as_written.is_floating_point())]),
    ]
    checks = [
        Exact("an integer arange zeroes the encoding (PyTorch 2)", "int arange, '/': zero entries", ">=", 0.99),
        Exact("(control) the integer recipe equals the float encoding to float32 precision",
              "int arange, '/': error", "<=", 1e-4, main=False),
    ]
    setup = (f"torch {torch.__version__}; positions torch.arange({MAX_LEN}) (int64), d_model {D_MODEL}; "
             "sin(pos / 10000^(2i/d)) as the seed writes it, sin(pos · div_term) with div_term from "
             "exp/log, and floor division `//`, each against a float64 reference computed in Python.")
    notes = ("Integer `/` truncated in PyTorch before 1.5 (2020) and in Python 2, so the warning was "
             "true of old code; today the recipe is correct. Only `//` (or a float→int cast) breaks it.")
    return Outcome(variants, checks, setup, notes=notes)
