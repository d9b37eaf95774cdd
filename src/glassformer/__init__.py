"""glassformer: the Transformer of "Attention Is All You Need", built to be read, traced and checked."""

from .config import ModelConfig
from .errors import ConfigError, GlassformerError, InputError
from .nn import DecoderLM, EncoderDecoder, EncoderModel, KVCache, build_model
from .params import params_breakdown
from .trace import Trace, hooks, run_with_trace

__version__ = "0.1.0"
__all__ = [
    "ModelConfig", "ConfigError", "GlassformerError", "InputError", "DecoderLM", "EncoderDecoder",
    "EncoderModel", "KVCache", "build_model", "params_breakdown", "Trace", "hooks", "run_with_trace",
]
