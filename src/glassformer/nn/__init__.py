"""The seed's chapters, one module each: embedding, positional, attention, norms, feedforward, layers, model."""

from .attention import KVCache, MultiHeadAttention
from .embedding import TokenEmbedding
from .feedforward import FeedForward
from .layers import DecoderLayer, EncoderLayer
from .model import DecoderLM, Decoder, Encoder, EncoderDecoder, EncoderModel, TransformerBase, build_model
from .norms import BatchNorm, LayerNorm, NoNorm, RMSNorm
from .positional import ALiBi, LearnedPE, RelativePositionBias, RotaryEmbedding, SinusoidalPE

__all__ = [
    "KVCache", "MultiHeadAttention", "TokenEmbedding", "FeedForward", "DecoderLayer", "EncoderLayer",
    "DecoderLM", "Decoder", "Encoder", "EncoderDecoder", "EncoderModel", "TransformerBase", "build_model",
    "BatchNorm", "LayerNorm", "NoNorm", "RMSNorm", "ALiBi", "LearnedPE", "RelativePositionBias",
    "RotaryEmbedding", "SinusoidalPE",
]
