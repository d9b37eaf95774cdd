"""Convert Hugging Face models into glassformer models with equal outputs (one module per family).

`from_hf(hf_model)` dispatches on the Hugging Face class name; each converter builds a
`ModelConfig` honouring the family's quirks and copies the weights into the seed's layout
(W_Q (n_heads, d_model, d_k), Q = X·W_Q + b_Q, ...).

`to_hf(model)` goes the other way (export.py chooses the family; each hf_<family>.py holds both
directions), and `glassformer export` writes the folder (export_folder.py).
"""

from __future__ import annotations

import importlib

from ..errors import InputError

# Hugging Face class name -> module in this package that defines `convert(hf_model)`.
CONVERTERS = {
    "BertModel": "hf_bert", "BertForMaskedLM": "hf_bert",
    "GPT2LMHeadModel": "hf_gpt2", "GPT2Model": "hf_gpt2",
    "MarianMTModel": "hf_marian",
    "BartForConditionalGeneration": "hf_bart",
    "T5ForConditionalGeneration": "hf_t5",
    "LlamaForCausalLM": "hf_llama",
    "PegasusForConditionalGeneration": "hf_pegasus",
    "OpenAIGPTLMHeadModel": "hf_openai_gpt",
}


def from_hf(hf_model):
    """A glassformer model equal (max abs diff ≤ 1e-4, fp32) to the given Hugging Face model."""
    name = type(hf_model).__name__
    if name not in CONVERTERS:
        raise InputError(f"cannot convert {name}; supported: {', '.join(sorted(CONVERTERS))}")
    module = importlib.import_module(f"{__name__}.{CONVERTERS[name]}")
    return module.convert(hf_model)


def to_hf(model, tokenizers=None):
    """The `transformers` model that computes `model`'s function (see interop/export.py)."""
    from .export import to_hf as _to_hf
    return _to_hf(model, tokenizers)
