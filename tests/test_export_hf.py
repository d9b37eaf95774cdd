"""glassformer -> Hugging Face (`to_hf`): transformers computes our logits and greedy tokens.

Eight families read by `from_hf` make the round trip bit for bit; models with the configurations our
own training builds (zh-en, tsv and lm with the auto and paper recipes) are exported to the family
that computes them, and `transformers` is the independent reference for logits and generation.
Weights are moved away from their initialisation first (norm gains off 1, biases off 0).
"""

import pytest
import torch
from transformers import (BartConfig, BartForConditionalGeneration, BertConfig, BertModel, GPT2Config,
                          GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, MarianConfig, MarianMTModel,
                          OpenAIGPTConfig, OpenAIGPTLMHeadModel, PegasusConfig, PegasusForConditionalGeneration,
                          T5Config, T5ForConditionalGeneration)

from glassformer.config import ModelConfig
from glassformer.errors import InputError
from glassformer.interop import from_hf, to_hf
from glassformer.interop.rewrites import half_split_basis
from glassformer.nn import build_model
from seq2seq_helpers import perturb

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = 1e-5
V = 40


def hf_family(name):
    """A tiny random model of each family `from_hf` reads (eager attention: the reference math)."""
    if name == "bert":
        return BertModel(BertConfig(vocab_size=V, hidden_size=30, num_attention_heads=5, num_hidden_layers=2,
                                    intermediate_size=61, max_position_embeddings=32, attn_implementation="eager"),
                         add_pooling_layer=False)
    if name == "gpt2":
        return GPT2LMHeadModel(GPT2Config(vocab_size=V, n_embd=30, n_head=5, n_layer=2, n_positions=48,
                                          bos_token_id=1, eos_token_id=2, attn_implementation="eager"))
    if name == "llama":  # grouped K/V: 6 query heads share 2
        return LlamaForCausalLM(LlamaConfig(
            vocab_size=V, hidden_size=36, num_attention_heads=6, num_key_value_heads=2, num_hidden_layers=2,
            intermediate_size=50, max_position_embeddings=64, rms_norm_eps=1e-5, tie_word_embeddings=False,
            bos_token_id=1, eos_token_id=2, attn_implementation="eager"))
    if name == "marian":  # separate target vocabulary, as in our zh-en runs
        return MarianMTModel(MarianConfig(
            vocab_size=V, decoder_vocab_size=33, share_encoder_decoder_embeddings=False, d_model=30,
            encoder_layers=2, decoder_layers=2, encoder_attention_heads=5, decoder_attention_heads=5,
            encoder_ffn_dim=61, decoder_ffn_dim=61, max_position_embeddings=64, pad_token_id=3,
            decoder_start_token_id=3, eos_token_id=0, attn_implementation="eager"))
    if name == "pegasus":  # Pre-LN, a final norm per stack, half-split sinusoids
        return PegasusForConditionalGeneration(PegasusConfig(
            vocab_size=V, d_model=30, encoder_layers=2, decoder_layers=2, encoder_attention_heads=5,
            decoder_attention_heads=5, encoder_ffn_dim=61, decoder_ffn_dim=61, max_position_embeddings=64,
            activation_function="relu", pad_token_id=3, decoder_start_token_id=3, eos_token_id=0,
            forced_eos_token_id=None, attn_implementation="eager"))
    if name == "openai-gpt":  # Post-LN decoder, no final norm
        return OpenAIGPTLMHeadModel(OpenAIGPTConfig(vocab_size=V, n_embd=30, n_head=5, n_layer=2, n_positions=48,
                                                    afn="gelu", attn_implementation="eager"))
    if name == "bart":
        return BartForConditionalGeneration(BartConfig(
            vocab_size=V, d_model=24, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=50, decoder_ffn_dim=50, max_position_embeddings=64,
            pad_token_id=3, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=None,
            attn_implementation="eager"))
    return T5ForConditionalGeneration(T5Config(
        vocab_size=V, d_model=24, d_kv=8, d_ff=40, num_layers=2, num_decoder_layers=1, num_heads=4,
        relative_attention_num_buckets=8, relative_attention_max_distance=20, feed_forward_proj="gated-gelu",
        pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, attn_implementation="eager"))


FAMILIES = ("bert", "gpt2", "llama", "marian", "bart", "t5", "pegasus", "openai-gpt")


def ours_from_hf(name):
    hf = hf_family(name)
    perturb(hf, skip=("embed_positions",) if name in ("marian", "pegasus") else ())  # their sinusoids are fixed
    return from_hf(hf.eval())


def perturb_ours(model, seed=3):
    """Our own model away from init: norm gains off 1, every bias (and the head's b_U) off 0."""
    g = torch.Generator().manual_seed(seed)
    tensors = dict(model.named_parameters())
    if getattr(model, "head", None) is not None and model.head.b_U is not None:
        tensors["head.b_U"] = model.head.b_U
    with torch.no_grad():
        for name, t in tensors.items():
            r = torch.randn(t.shape, generator=g)
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "gamma":
                t.copy_(1 + 0.3 * r)
            elif leaf.startswith("b_") or leaf == "beta":
                t.copy_(0.3 * r)
            else:
                t.copy_(r * t.shape[-1] ** -0.5)
    return model.eval()


def batch(cfg, seed=5):
    """Right-padded source/prompt ids (no pad inside), and decoder inputs from the start token."""
    g = torch.Generator().manual_seed(seed)
    lengths = (9, 6, 3)
    src_vocab = cfg.vocab_size
    specials = {cfg.pad_id, cfg.bos_id, cfg.eos_id, cfg.start_id} - {None}
    low = max(specials) + 1 if specials else 0
    src = torch.randint(low, src_vocab, (3, 9), generator=g)
    pad = torch.arange(9)[None] >= torch.tensor(lengths)[:, None]
    src = src.masked_fill(pad, cfg.pad_id if cfg.pad_id is not None else 0)
    tgt = torch.randint(low, cfg.out_vocab_size, (3, 6), generator=g)
    if cfg.start_id is not None:
        tgt[:, 0] = cfg.start_id
    return src, pad, tgt


def logits_error(model, hf) -> float:
    """Max |ours − transformers| over the real (non-padding) positions and the real vocabulary."""
    cfg = model.config
    src, pad, tgt = batch(cfg)
    mask = (~pad).long()
    with torch.no_grad():
        if cfg.arch == "encoder":
            ref, ours = hf(src, attention_mask=mask).last_hidden_state, model(src, padding_mask=pad)
            ref, ours = ref[~pad], ours[~pad]
        elif cfg.arch == "decoder":
            ref, ours = hf(src, attention_mask=mask).logits, model(src, padding_mask=pad)
            ref, ours = ref[~pad], ours[~pad]
        else:
            ref = hf(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
            ours = model(src, tgt, src_padding_mask=pad)
    ref = ref[..., :ours.shape[-1]]
    assert ref.shape == ours.shape
    assert ref.abs().max() > 0.5  # the outputs carry signal: a 1e-5 match is not trivial
    return (ref - ours).abs().max().item()


def greedy_equal(model, hf) -> None:
    """`hf.generate` with no arguments but the inputs gives our greedy tokens."""
    cfg = model.config
    src, pad, _ = batch(cfg, seed=7)
    with torch.no_grad():
        if cfg.arch == "decoder":  # one prompt length: both count positions from 0
            prompt = src[:, :3]
            ref = hf.generate(prompt, attention_mask=torch.ones_like(prompt))
            ours = model.generate(prompt)
        else:
            ref = hf.generate(input_ids=src, attention_mask=(~pad).long())
            ours = model.generate(src, src_padding_mask=pad)
    assert ref.shape[1] > src.shape[1] // 3  # something was generated
    assert torch.equal(ref, ours), (ref, ours)


@pytest.mark.parametrize("name", FAMILIES)
def test_round_trip_is_bit_for_bit(name):
    model = ours_from_hf(name)
    hf = to_hf(model)
    assert hf.glassformer_export.family == name and not hf.glassformer_export.notes
    back = from_hf(hf)
    assert back.config == model.config
    a, b = model.state_dict(), back.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("name", FAMILIES)
def test_family_logits_and_greedy_equal_transformers(name):
    model = ours_from_hf(name)
    hf = to_hf(model)
    err = logits_error(model, hf)
    print(f"{name}: max abs logit error {err:.2e}")  # pytest -s: the figures of the closing note
    assert err <= TOL
    if model.config.arch != "encoder":
        greedy_equal(model, hf)


def test_llama_writes_grouped_heads_once():
    model = ours_from_hf("llama")
    hf = to_hf(model)
    assert hf.config.num_key_value_heads == 2
    assert hf.model.layers[0].self_attn.k_proj.weight.shape == (2 * model.config.head_dim, 36)


# ---- the configurations our own training builds (train/tasks.py, train/recipe.py) ----

def _recipe_config(task: str, recipe: str) -> ModelConfig:
    """default_model_config for a task, with the auto recipe's model fields, at a test's size."""
    from glassformer.tokenize import build_tokenizer
    from glassformer.train.recipe import choose
    from glassformer.train.tasks import TaskData, default_model_config
    small = dict(d_model=32, n_heads=4, n_layers=2, d_ff=128)
    if task == "lm":
        lines = ["the cat eats the fish.", "a dog sees a bird!"] * 5
        tok = build_tokenizer("char", lines)
        data = TaskData("lm", "lm", {"train": lines}, tok, tok)
        raw = {"train": lines, "valid": lines[:1], "test": lines[:1]}
    else:
        pairs = [("猫 吃 鱼", "the cat eats the fish"), ("狗 看 鸟", "a dog sees a bird")] * 5
        src = build_tokenizer("jieba" if task == "zh-en" else "word", [s for s, _ in pairs])
        tgt = build_tokenizer("word", [t for _, t in pairs])
        data = TaskData(task, "seq2seq", {"train": pairs}, src, tgt)
        raw = {"train": pairs, "valid": pairs[:1], "test": pairs[:1]}
    fields = {}
    if recipe == "auto":
        fields = choose(task, raw, max_minutes=5, tokens_per_minute=400_000).model
    return default_model_config(data, **{**fields, **small})


RECIPES = {  # name: (task, recipe, family that computes it)
    "zh-en": ("zh-en", "paper", "marian"),
    "tsv-auto": ("tsv", "auto", "pegasus"),
    "tsv-paper": ("tsv", "paper", "marian"),
    "lm-auto": ("lm", "auto", "llama"),  # the recipe's LM is LLaMA's block (train/recipe.py, LLAMA_FORM)
    "lm-paper": ("lm", "paper", "openai-gpt"),
}


@pytest.mark.parametrize("name", RECIPES)
def test_training_configs_export_to_the_family_that_computes_them(name):
    task, recipe, family = RECIPES[name]
    cfg = _recipe_config(task, recipe)
    # what the project trains: interleaved sinusoids (an auto LM: rotary positions), × sqrt(d)
    assert cfg.pe == ("rope" if name == "lm-auto" else "sinusoidal") and cfg.embed_scale
    model = perturb_ours(build_model(cfg))
    hf = to_hf(model)
    assert hf.glassformer_export.family == family
    err = logits_error(model, hf)
    print(f"{name} -> {family}: max abs logit error {err:.2e}")
    assert err <= TOL
    greedy_equal(model, hf)


def test_interleaved_sinusoids_equal_half_split_in_the_permuted_basis():
    """The rewrite behind Marian/Pegasus export, on its own: same logits, different parameters."""
    cfg = _recipe_config("tsv", "paper")
    model = perturb_ours(build_model(cfg))
    half = half_split_basis(model)
    assert half.config.pe == "sinusoidal_half"
    src, pad, tgt = batch(cfg)
    with torch.no_grad():
        assert (model(src, tgt) - half(src, tgt)).abs().max() <= 1e-5
    assert not torch.equal(model.embed.W_E, half.embed.W_E)


# ---- refusals: one line naming the field and the families tried ----

@pytest.mark.parametrize("changes, words", [
    (dict(norm="batchnorm"), ["norm='batchnorm'", "Marian"]),
    (dict(residual=False), ["residual=False", "Marian", "Pegasus", "BART", "T5"]),
    (dict(pe="alibi"), ["pe='alibi'", "Marian", "T5"]),
    (dict(pe_combine="concat", d_pos=8, tie_embeddings=False), ["pe_combine='concat'"]),
])
def test_unexportable_configs_are_refused_in_one_line(changes, words):
    cfg = _recipe_config("tsv", "paper").replace(**changes)
    with pytest.raises(InputError) as e:
        to_hf(build_model(cfg))
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


def test_a_translator_in_llamas_block_is_refused_as_the_recipe_says():
    """The recipe keeps a translator's sinusoids because LLaMA's block in an encoder-decoder (rotary
    positions) fits no Hugging Face family (train/recipe.py, TRANSLATOR_BLOCK_WHY): the planner agrees."""
    from glassformer.train.recipe import LLAMA_FORM
    cfg = _recipe_config("tsv", "auto").replace(**LLAMA_FORM)
    with pytest.raises(InputError) as e:
        to_hf(build_model(cfg))
    msg = str(e.value)
    assert "\n" not in msg and all(f in msg for f in ("Marian", "Pegasus", "BART", "T5", "--recipe auto")), msg


def test_nan_weights_are_refused():
    model = build_model(_recipe_config("lm", "auto"))
    with torch.no_grad():
        model.dec[0].ffn.W_1[0, 0] = float("nan")
    with pytest.raises(InputError, match="dec.0.ffn.W_1 holds NaN"):
        to_hf(model)


# ---- other configurations `glassformer train` flags can build, each to the family that computes it ----

BASE = dict(vocab_size=V, d_model=24, n_heads=4, n_layers=2, d_ff=48, pad_id=0, bos_id=1, eos_id=2)
FLAG_CONFIGS = {  # name: (ModelConfig fields, family)
    # an encoder with sinusoids and × sqrt(d_model): learned table + folded scale, no segments (zero row)
    "encoder-sinusoidal": (dict(arch="encoder", norm_position="post", embed_norm=True, pe="sinusoidal",
                                embed_scale=True, activation="gelu"), "bert"),
    # --norm rmsnorm --pe rope --activation swiglu --no-attn-bias --no-ffn-bias --embed-scale
    "decoder-rope": (dict(arch="decoder", norm="rmsnorm", norm_position="pre", pe="rope", activation="swiglu",
                          attn_bias=False, ffn_bias=False, embed_scale=True), "llama"),
    # --pe relative --norm rmsnorm --no-scale-scores, no biases: T5 (tied head, no rescale)
    "translator-relative": (dict(arch="encoder-decoder", norm="rmsnorm", norm_position="pre", pe="relative",
                                 scale_scores=False, attn_bias=False, ffn_bias=False, rel_buckets=8,
                                 rel_max_distance=16, activation="geglu"), "t5"),
    # --pe learned --embed-norm, Post-LN, separate vocabularies: BART with one padded vocabulary size
    "translator-learned": (dict(arch="encoder-decoder", pe="learned", embed_norm=True, max_len=64,
                                share_embeddings=False, tgt_vocab_size=30, activation="gelu"), "bart"),
}


@pytest.mark.parametrize("name", FLAG_CONFIGS)
def test_flag_configs_export_to_the_family_that_computes_them(name):
    fields, family = FLAG_CONFIGS[name]
    model = perturb_ours(build_model(ModelConfig(**{**BASE, **fields})))
    hf = to_hf(model)
    assert hf.glassformer_export.family == family
    err = logits_error(model, hf)
    # The bound is 1e-5 or, where larger, transformers' own fp32 rounding: the distance of its fp32
    # logits from the same model run in float64 (T5 without scaled scores, GeGLU: 1.9e-5 on an AVX-512
    # EPYC, where ours is 1.3e-5 from float64).
    rounding = _fp32_rounding(hf, model)
    print(f"{name} -> {family}: max abs logit error {err:.2e} (transformers' fp32 rounding {rounding:.2e})")
    assert err <= max(TOL, 1.5 * rounding)
    if model.config.arch != "encoder":
        greedy_equal(model, hf)


def _rms_in_float64(norm, hidden_states):
    """T5's and LLaMA's RMSNorm, with the variance in the input's float64 (theirs upcasts only to float32)."""
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return norm.weight * (hidden_states * torch.rsqrt(variance + norm.variance_epsilon))


def _fp32_rounding(hf, model) -> float:
    """Max |transformers fp32 − transformers float64| on `batch`'s real positions. The float64 copy's
    RMSNorms compute their variance in float64: transformers computes it in float32 whatever the input,
    which left a float64 "reference" 6e-6 from exact on T5 (measured on an Intel Xeon with AMX, where the
    fp32 rounding so measured was 1.1e-5 and ours was 2.1e-5 from transformers' fp32, 2.6e-5 from exact)."""
    import copy
    import types
    cfg = model.config
    src, pad, tgt = batch(cfg)
    mask = (~pad).long()
    h64 = copy.deepcopy(hf).double()
    for m in h64.modules():
        if type(m).__name__.endswith(("RMSNorm", "T5LayerNorm")) and hasattr(m, "variance_epsilon"):
            m.forward = types.MethodType(_rms_in_float64, m)
    with torch.no_grad():
        if cfg.arch == "encoder":
            a, b = hf(src, attention_mask=mask).last_hidden_state, h64(src, attention_mask=mask).last_hidden_state
        elif cfg.arch == "decoder":
            a, b = hf(src, attention_mask=mask).logits, h64(src, attention_mask=mask).logits
        else:
            a = hf(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
            b = h64(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
    if cfg.arch != "encoder-decoder":
        a, b = a[~pad], b[~pad]
    return (a.double() - b).abs().max().item()


def test_tokenizers_of_another_vocabulary_are_refused():
    from glassformer.tokenize import build_tokenizer
    model = build_model(_recipe_config("lm", "auto"))
    with pytest.raises(InputError, match="the lm tokenizer has .* tokens but the model's vocabulary has"):
        to_hf(model, build_tokenizer("char", ["xyz"]))
