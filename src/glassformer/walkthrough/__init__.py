"""The seed's chapter 7 as a program: 猫 吃 鱼 through two encoder layers, every number shown.

`build()` runs the forward pass and returns the JSON contract (tokens, config, params, trace);
`steps` turns it into the chapter's sequence of steps; `narration` says each step in plain
English or Chinese; `render_*` print it to a terminal, Markdown or one self-contained HTML file.
"""

from .build import SEED_MODEL, build, export_params, seed_config
from .inputs import SEED_EMBEDDINGS, SEED_SENTENCE

__all__ = ["build", "export_params", "seed_config", "SEED_MODEL", "SEED_EMBEDDINGS", "SEED_SENTENCE"]
