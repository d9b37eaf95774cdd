"""Generation: turn next-token logits into sequences (the decoder loop of seed 000 §7.5).

At each step the model scores every token of the vocabulary for the next position; a strategy
picks one and the sequence grows by one:

- greedy: the most probable token (argmax);
- sampling: draw from softmax(logits / temperature), optionally only among the top-k tokens
  or the smallest set whose probability reaches top_p (nucleus sampling);
- beam search: keep the beam_size best partial sequences (see `glassformer.beam`).

The KV cache makes each step cost one position: keys and values of earlier positions are kept
(`model.new_cache()`), and the encoder memory's cross-attention keys and values are computed
once. `use_cache=False` recomputes the whole prefix every step — same tokens, slower; the
test suite checks both agree for every positional encoding.
"""

from __future__ import annotations

import math

import torch

from .errors import InputError
from .nn import decode_step, precision as low_precision
from .nn.prepared import prepared

STRATEGIES = ("greedy", "beam", "sample")


class Stepper:
    """Runs a decoding model one step at a time and returns the logits of the last position.

    With the cache only the new token goes through the model; without it the whole prefix does.
    Encoder-decoder models read `memory` (encoder output) through cross-attention; beam search
    passes it repeated `group` times per source (one row per beam).
    """

    def __init__(self, model, use_cache: bool, capacity: int, memory=None, src_pad=None, prompt_pad=None,
                 group: int = 1, eos: int | None = None, precision: str = "fp32"):
        self.model, self.memory, self.src_pad, self.prompt_pad = model, memory, src_pad, prompt_pad
        self.cache = model.new_cache(capacity) if use_cache else None
        # cached steps with weights prepared once (nn/decode_step.py, issues 11 and 29)
        self.fast = decode_step.prepared(model, self.cache, prompt_pad, memory, src_pad, group, precision)
        if self.fast is None and precision != "fp32":
            # low-precision weights live in the prepared step only: running fp32 instead would be a silent lie
            raise InputError(f"precision={precision!r} runs on the prepared decode step, which this generation "
                             "cannot take (use_cache=False, a hook or return_cross_attention, training mode, or an "
                             "attention/position variant it lacks); use precision='fp32'")
        # <pad> is not a word: never generate it (a generated pad would read as padding next step)
        cfg = model.config
        self.banned = cfg.pad_id if cfg.pad_id is not None and cfg.pad_id != cfg.eos_id else None
        # a pad id among the new tokens is padding to the module path, and the prepared step has no
        # padding; but where pad is banned, or is the eos that ends a row, only a finished row (or a
        # dead beam) holds one, and nobody reads those rows' logits: the prepared step may go on
        harmless = self.banned is not None or (eos is not None and eos == cfg.pad_id)
        self.step_pad = None if harmless else cfg.pad_id

    def _run(self, ids: torch.Tensor, padding_mask=None) -> torch.Tensor:
        if self.memory is not None:
            logits = self.model.decode(ids, self.memory, self.src_pad, padding_mask, cache=self.cache)[:, -1]
        else:
            logits = self.model(ids, padding_mask, cache=self.cache)[:, -1]
        return self._banned(logits)

    def _banned(self, logits: torch.Tensor) -> torch.Tensor:
        if self.banned is not None:
            logits[:, self.banned] = float("-inf")
        return logits

    def first(self, prefix: torch.Tensor) -> torch.Tensor:
        """Logits after the prompt (decoder-only) or the start token (encoder-decoder)."""
        if self.fast is not None and self.memory is not None and prefix.shape[1] == 1:
            # the start token at position 0, never padding (nn/model.py, `decode`)
            return self._banned(self.fast(prefix[:, 0], self.cache))
        return self._run(prefix, self.prompt_pad)

    def next(self, seq: torch.Tensor, length: int) -> torch.Tensor:
        """Logits after seq[:, :length], whose first length-1 positions were seen before."""
        if self.cache is not None:
            ids = seq[:, length - 1]
            if self.fast is not None and decode_step.applies(self.cache, ids, self.step_pad):
                return self._banned(self.fast(ids, self.cache))
            return self._run(seq[:, length - 1:length])
        pad = self.prompt_pad
        if pad is not None:  # generated positions are never padding
            pad = torch.cat([pad, pad.new_zeros(pad.shape[0], length - pad.shape[1])], dim=1)
        return self._run(seq[:, :length], pad)

    def reorder(self, index: torch.Tensor) -> None:
        """Keep batch rows `index` (beam search). Beam search picks rows within a source's group
        only, whose memory rows are equal: the prepared step's one copy per source stays as it is."""
        if self.cache is not None:
            self.cache.reorder(index)


class WindowStepper:
    """A decoder-only model that reads at most the last `window` tokens (nanoGPT's crop to block_size).

    A model trained on windows of W tokens has seen positions 0..W-1 only: reading a longer text puts
    its tokens at positions it never trained. Seed 000 §3.3 (reason one) expects sinusoids to go on
    working there, "a little worse, never failing"; measured on an LM trained on 64-character windows
    (docs/real-data.md, "Generating past the trained window"), held-out characters at positions
    64-255 cost 5.0 bits each read with the whole text and 2.0 read from the last 64, sinusoidal or
    learned alike. Up to the window the cached stepper runs as usual; past it each token re-reads the
    last `window` tokens at positions 0..window-1 as a prompt is read (the module path in float32:
    absolute positions are baked into the cached keys, so the cache cannot slide).
    """

    def __init__(self, new_stepper, window: int, prompt_pad):
        self.new_stepper, self.window, self.prompt_pad = new_stepper, window, prompt_pad
        self.inner = new_stepper(prompt_pad, True)  # up to the window: the usual (cached) steps

    def _pad(self, lo: int, hi: int):
        """The prompt's padding mask over columns lo..hi-1 (generated columns are never padding)."""
        if self.prompt_pad is None or lo >= self.prompt_pad.shape[1]:
            return None
        pad = self.prompt_pad[:, lo:hi]
        return torch.cat([pad, pad.new_zeros(pad.shape[0], hi - lo - pad.shape[1])], dim=1)

    def first(self, prefix: torch.Tensor) -> torch.Tensor:
        length = prefix.shape[1]
        if length <= self.window:
            return self.inner.first(prefix)
        return self.new_stepper(self._pad(length - self.window, length), False).first(prefix[:, -self.window:])

    def next(self, seq: torch.Tensor, length: int) -> torch.Tensor:
        if length <= self.window:
            return self.inner.next(seq, length)
        lo = length - self.window
        return self.new_stepper(self._pad(lo, length), False).first(seq[:, lo:length])


# ---- choosing the next token ----
def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Set to -inf every token outside the nucleus: the smallest set, most probable first,
    whose total probability reaches top_p (Holtzman et al. 2020). The top token always stays."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs  # probability mass of the tokens ranked above
    drop_sorted = before >= top_p
    drop_sorted[..., 0] = False
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def top_k_filter(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """Set to -inf every token scoring below the k-th best."""
    kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def tempered(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """logits / temperature in float32. A temperature so small that the quotient overflows (1e-300)
    would give softmax inf/inf = NaN; then the logits are first shifted to a row maximum of 0, which
    softmax does not see, and divided in float64 (where 1e-300 is not 0, and 0 / T stays 0), so the
    distribution is the same (all mass on the maximum) and finite."""
    logits = logits.float()
    scaled = logits / temperature
    if not bool(torch.isfinite(scaled.amax(dim=-1)).all()):
        wide = logits.double()
        scaled = ((wide - wide.amax(dim=-1, keepdim=True)) / temperature).float()
    return scaled


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row drawn from softmax(logits / temperature), after top-k and top-p filtering."""
    logits = tempered(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None and top_p < 1.0:
        logits = top_p_filter(logits, top_p)
    return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator).squeeze(1)


def _sampler(temperature: float, top_k: int | None, top_p: float | None, generator):
    return lambda logits: sample_next(logits, temperature, top_k, top_p, generator)


def _greedy(logits: torch.Tensor) -> torch.Tensor:
    return logits.argmax(dim=-1)


# ---- checks ----
def _as_batch(ids, name: str) -> torch.Tensor:
    if isinstance(ids, (list, tuple)):
        if not ids:
            raise InputError(f"{name} is empty; give at least one token id")
        ids = torch.tensor(ids if isinstance(ids[0], (list, tuple)) else [ids], dtype=torch.long)
    if not isinstance(ids, torch.Tensor):
        raise InputError(f"{name} must be a tensor or list of token ids, got {type(ids).__name__}")
    return ids.unsqueeze(0) if ids.dim() == 1 else ids


def _check_options(strategy, max_new_tokens, beam_size, temperature, top_k, top_p, length_penalty):
    if strategy not in STRATEGIES:
        raise InputError(f"strategy={strategy!r} is not one of {', '.join(STRATEGIES)}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise InputError(f"max_new_tokens={max_new_tokens!r} must be a positive integer")
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:
        raise InputError(f"beam_size={beam_size!r} must be a positive integer")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 < temperature < math.inf:
        raise InputError(f"temperature={temperature!r} must be a finite number > 0 (strategy='greedy' takes the argmax)")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise InputError(f"top_k={top_k!r} must be a positive integer or None")
    if top_p is not None and (isinstance(top_p, bool) or not (isinstance(top_p, (int, float)) and 0 < top_p <= 1)):
        raise InputError(f"top_p={top_p!r} must be in (0, 1] or None")
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)) or not math.isfinite(length_penalty):
        raise InputError(f"length_penalty={length_penalty!r} must be a finite number (0 = no length penalty)")


def generate(model, ids, max_new_tokens: int = 32, strategy: str = "greedy", beam_size: int = 4,
             length_penalty: float = 1.0, temperature: float = 1.0, top_k: int | None = None,
             top_p: float | None = None, eos_id: int | None = None, use_cache: bool = True,
             src_padding_mask: torch.Tensor | None = None, generator: torch.Generator | None = None,
             return_cross_attention: bool = False, padding_mask: torch.Tensor | None = None,
             precision: str = "fp32", window: int | None = None):
    """Generate token ids with `model` (a DecoderLM or an EncoderDecoder).

    Decoder-only: `ids` is the prompt (batch, prompt_len), left-padded with pad_id if rows
    differ (or give `padding_mask`); returns (batch, prompt_len + new) ids, prompt included.
    Encoder-decoder: `ids` are source ids; returns target ids (batch, tgt_len) starting with
    the decoder start token. Generation stops at eos_id (default config.eos_id); rows that
    finished earlier are padded with pad_id. With return_cross_attention=True (encoder-decoder,
    greedy or sampling) also returns (batch, new, src_len): the last decoder layer's
    cross-attention, averaged over heads, of the query that produced each new token.
    A learned position table (pe='learned') ends generation at max_len positions.
    precision='int8' or 'bf16' decodes with low-precision weights (nn/precision.py): the prepared
    step's products — every decoder layer's projections, the encoder memory's cross-attention keys
    and values, the output head — read int8 (per-output-channel scales) or bf16 copies of the weights,
    made for this generation only; the encoder, the prompt and the KV cache stay float32.
    window=W (decoder-only, greedy or sampling): each new token reads at most the last W tokens, at
    positions 0..W-1 — give the length the model trained on (`glassformer train`'s block_size) to
    generate past it without reading positions it never saw (`WindowStepper`); tokens past the window
    are read in float32, so a low `precision` is refused where the text outgrows the window.
    """
    low_precision.check(precision)
    # no autograd bookkeeping in the loop; derived weight copies (the fused W_QKV, the decode
    # step's layouts) built once for this generation and dropped after it (nn/prepared.py)
    with torch.inference_mode(), prepared(model):
        out = _generate(model, ids, max_new_tokens, strategy, beam_size, length_penalty, temperature, top_k,
                        top_p, eos_id, use_cache, src_padding_mask, generator, return_cross_attention,
                        padding_mask, precision, window)
    # clone outside inference mode: the caller may feed the ids to a model that trains
    return tuple(t.clone() for t in out) if isinstance(out, tuple) else out.clone()


def _generate(model, ids, max_new_tokens, strategy, beam_size, length_penalty, temperature, top_k, top_p,
              eos_id, use_cache, src_padding_mask, generator, return_cross_attention, padding_mask, precision,
              window):
    cfg = model.config
    if cfg.arch == "encoder":
        raise InputError("an encoder-only model cannot generate; use arch='decoder' or 'encoder-decoder'")
    _check_options(strategy, max_new_tokens, beam_size, temperature, top_k, top_p, length_penalty)
    seq2seq = cfg.arch == "encoder-decoder"
    ids = _as_batch(ids, "src_ids" if seq2seq else "ids")
    param = next(model.parameters(), None)
    if param is not None and isinstance(ids, torch.Tensor) and ids.device != param.device:
        ids = ids.to(param.device)  # token ids typed on the CPU, model on the accelerator
    eos = cfg.eos_id if eos_id is None else eos_id
    fill = cfg.pad_id if cfg.pad_id is not None else (eos if eos is not None else 0)
    if return_cross_attention and (not seq2seq or strategy == "beam"):
        raise InputError("return_cross_attention needs an encoder-decoder model and strategy 'greedy' or 'sample'")
    memory = src_pad = prompt_pad = None
    if seq2seq:
        if cfg.start_id is None:
            raise InputError("the model config has no bos_id or decoder_start_id; set one to start decoding")
        memory, src_pad = model.encode(ids, src_padding_mask)
        prefix = torch.full((ids.shape[0], 1), cfg.start_id, dtype=torch.long, device=ids.device)
    else:
        prefix = ids
        prompt_pad = model._padding(ids, padding_mask, "padding_mask")
    slides = window is not None and _check_window(window, cfg, seq2seq, strategy, return_cross_attention,
                                                  prefix.shape[1] + max_new_tokens, precision)
    if cfg.pe == "learned" and not slides:  # §3: a learned table has max_len rows; decoding ends where they end
        room = cfg.max_len - prefix.shape[1]
        if room < 1:
            raise InputError(f"the prompt fills all max_len={cfg.max_len} learned positions; give a shorter one")
        max_new_tokens = min(max_new_tokens, room)
    if strategy == "beam":
        from .beam import beam_search
        return beam_search(model, prefix, max_new_tokens, beam_size, length_penalty, eos, fill,
                           use_cache, memory, src_pad, prompt_pad, precision)
    pick = _greedy if strategy == "greedy" else _sampler(temperature, top_k, top_p, generator)
    new_stepper = lambda: Stepper(model, use_cache, prefix.shape[1] + max_new_tokens, memory, src_pad,  # noqa: E731
                                  prompt_pad, eos=eos, precision=precision)
    if slides:
        stepper = WindowStepper(lambda pad, cached: Stepper(model, use_cache and cached, window, None, None, pad,
                                                            eos=eos), window, prompt_pad)
        return _decode_loop(stepper, prefix, max_new_tokens, pick, eos, fill)
    if not return_cross_attention:
        return _decode_loop(new_stepper(), prefix, max_new_tokens, pick, eos, fill)
    return _with_cross_attention(model, new_stepper, prefix, max_new_tokens, pick, eos, fill)


def _check_window(window, cfg, seq2seq: bool, strategy: str, cross_attention: bool, total: int,
                  precision: str) -> bool:
    """Refuse a window generation cannot honour; True where the text outgrows it (the window slides)."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise InputError(f"window={window!r} must be a positive integer (None: read the whole text)")
    if seq2seq:
        raise InputError("window applies to a decoder-only model; an encoder-decoder's target starts at "
                         "position 0 and ends at eos")
    if cfg.pe == "learned" and window > cfg.max_len:
        raise InputError(f"window={window} is past the learned position table's max_len={cfg.max_len} rows; "
                         f"give a window of at most {cfg.max_len}")
    if total <= window:
        return False
    if strategy == "beam" or cross_attention:
        raise InputError(f"a window of {window} slides with strategy 'greedy' or 'sample' only; the text reaches "
                         f"{total} tokens (give a window of at least {total}, or window=None)")
    if precision != "fp32":
        raise InputError(f"precision={precision!r}: past the window each token re-reads the last {window} as a "
                         "prompt, in float32; use precision='fp32', or a window of at least "
                         f"{total} (the prompt plus max_new_tokens)")
    return True


def _decode_loop(stepper: Stepper, prefix: torch.Tensor, max_new_tokens: int, pick, eos, fill) -> torch.Tensor:
    """Greedy or sampling: one token per step until every row has produced eos."""
    batch, start = prefix.shape
    seq = prefix.new_full((batch, start + max_new_tokens), fill)
    seq[:, :start] = prefix
    finished = torch.zeros(batch, dtype=torch.bool, device=prefix.device) if eos is not None else None
    logits = stepper.first(prefix)
    length = start
    for step in range(max_new_tokens):
        token = pick(logits)
        if finished is not None:
            token = token.masked_fill(finished, fill)
            finished |= token == eos
        seq[:, length] = token
        length += 1
        if step == max_new_tokens - 1 or (finished is not None and bool(finished.all())):
            break
        logits = stepper.next(seq, length)
    return seq[:, :length]


def _with_cross_attention(model, new_stepper, prefix, max_new_tokens, pick, eos, fill):
    """The decode loop, recording the last decoder layer's cross-attention row of each step.

    The stepper is made under the hook, so it sees it and takes the module path (which has it)."""
    from .trace import hooks
    rows: list[torch.Tensor] = []

    def record(pattern: torch.Tensor, _name: str) -> None:
        rows.append(pattern[:, :, -1, :].float().mean(dim=1))  # (batch, src): last query, heads averaged

    last = model.config.dec_layers - 1
    with hooks(model, {f"dec.{last}.cross_attn.pattern": record}):
        seq = _decode_loop(new_stepper(), prefix, max_new_tokens, pick, eos, fill)
    return seq, torch.stack(rows[:seq.shape[1] - prefix.shape[1]], dim=1)
