"""CTranslate2 from the Hugging Face folder, by CTranslate2's own converter, checked by its runtime.

The HF folder is written first (export_folder.py) and given to `ctranslate2.converters.
TransformersConverter`. For the two translator families our training produces, CTranslate2's
loaders assume things of the released checkpoints that our models do not share, so those two
loaders are narrowed for the conversion (and restored after):

- Marian: CTranslate2 starts the decoder from a zero embedding and drops a trailing <pad> from the
  vocabulary (true of Opus-MT, where decoding starts from <pad>); ours starts from <bos>, whose
  embedding is a trained row, and <pad> is id 0 — so the decoder starts from the start token's own
  embedding, and nothing is dropped;
- Marian and Pegasus: one vocabulary is registered for both sides; ours may have a separate
  target vocabulary (and the Pegasus folder pads both tables to one size), so the source and target
  vocabularies are registered from their own tokenizers and the padding rows cut off again;
- Pegasus: CTranslate2 decodes from <pad>; ours from the config's decoder start token.

Then greedy decoding in CTranslate2 is compared with ours on probe inputs; a difference stops
the export with one line.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import torch

from ..errors import InputError
from .export_folder import TARGET_TOKENIZER, probe

NO_LOADER = {"openai-gpt": "OpenAI GPT (the Post-LN language model of --recipe paper)"}


def _translator_loader(base_cls, target_tok, src_size: int, tgt_size: int, start_id: int, pre_norm: bool):
    from ctranslate2.converters.transformers import BartLoader

    class Loader(base_cls):
        def get_model_spec(self, model):
            model.config.normalize_before = pre_norm
            model.config.normalize_embedding = False
            spec = BartLoader.get_model_spec(self, model)  # the parent's, without Marian's pad removal
            spec.encoder.embeddings[0].weight = spec.encoder.embeddings[0].weight[:src_size]
            for part in (spec.decoder.embeddings, spec.decoder.projection):
                part.weight = part.weight[:tgt_size]
            if spec.decoder.projection.has_bias():
                spec.decoder.projection.bias = spec.decoder.projection.bias[:tgt_size]
            return spec

        def set_decoder(self, spec, decoder):
            BartLoader.set_decoder(self, spec, decoder)  # from the start token's own embedding

        def set_config(self, config, model, tokenizer):
            config.bos_token = tokenizer.bos_token
            config.eos_token = tokenizer.eos_token
            config.unk_token = tokenizer.unk_token
            config.decoder_start_token = target_tok.convert_ids_to_tokens(start_id)

        def set_vocabulary(self, spec, tokens):
            spec.register_source_vocabulary(tokens[:src_size])
            spec.register_target_vocabulary(_tokens(target_tok)[:tgt_size])

    return Loader()


def _tokens(tok) -> list[str]:
    return [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])]


@contextmanager
def _loader(name: str, loader):
    from ctranslate2.converters import transformers as ct2_transformers
    registry = ct2_transformers._MODEL_LOADERS
    before = registry.get(name)
    registry[name] = loader
    try:
        yield
    finally:
        registry[name] = before


def write_ctranslate2(model, folder: Path, tokenizers, int8: bool, write_hf) -> dict:
    try:
        import ctranslate2
        from ctranslate2.converters import TransformersConverter
        from ctranslate2.converters.transformers import MarianMTLoader, PegasusLoader
    except ImportError:
        raise InputError("--format ctranslate2 needs the ctranslate2 package: pip install 'glassformer[dev]'") from None
    if not tokenizers:
        raise InputError("--format ctranslate2 needs the checkpoint's tokenizers (CTranslate2 works on tokens); "
                         "this checkpoint has none")
    from transformers import AutoTokenizer

    from .export import plan
    family = plan(model).family  # before writing anything
    if family in NO_LOADER:
        raise InputError(f"CTranslate2 has no converter for {NO_LOADER[family]}; use --format hf or onnx")
    hf_dir = folder / "hf"
    report = write_hf(model, hf_dir, tokenizers)
    cfg = model.config
    quant = "int8" if int8 else None
    ct2_dir = folder / ".ctranslate2"  # the converter replaces its output folder: files moved up after
    converter = TransformersConverter(str(hf_dir))
    if family in ("marian", "pegasus"):
        target_dir = hf_dir / TARGET_TOKENIZER
        target = AutoTokenizer.from_pretrained(target_dir if target_dir.exists() else hf_dir)
        base = MarianMTLoader if family == "marian" else PegasusLoader
        loader = _translator_loader(base, target, cfg.vocab_size, cfg.out_vocab_size, cfg.start_id,
                                    pre_norm=family == "pegasus")
        with _loader("MarianConfig" if family == "marian" else "PegasusConfig", loader):
            converter.convert(str(ct2_dir), quantization=quant, force=True)
    else:
        converter.convert(str(ct2_dir), quantization=quant, force=True)
    for f in ct2_dir.iterdir():  # ctranslate2.Translator(DIR) / Generator(DIR); the HF folder (tokenizers) in DIR/hf
        f.rename(folder / f.name)
    ct2_dir.rmdir()
    report.update(format="ctranslate2", int8=int8, hf_folder="hf")
    if cfg.arch != "encoder":
        # int8 rounds every weight: its greedy tokens may part from ours, so they are reported, not required
        report["ctranslate2_greedy_equal"] = _check_greedy(ctranslate2, model, folder, hf_dir)
        if not report["ctranslate2_greedy_equal"] and not int8:
            raise InputError(f"CTranslate2's greedy tokens differ from ours for this {family} model; nothing was written")
    return report


def greedy_tokens(ctranslate2, model, ct2_dir: Path, hf_dir: Path, ids: torch.Tensor, pad: torch.Tensor):
    """(CTranslate2's greedy ids, ours) for each row of `ids`, each without start token and after eos."""
    from transformers import AutoTokenizer
    cfg = model.config
    src_tok = AutoTokenizer.from_pretrained(hf_dir)
    target_dir = hf_dir / TARGET_TOKENIZER
    tgt_tok = AutoTokenizer.from_pretrained(target_dir) if target_dir.exists() else src_tok
    rows = [row[~p].tolist() for row, p in zip(ids, pad)]
    pad_token = [[tgt_tok.convert_ids_to_tokens(cfg.pad_id)]] if cfg.pad_id not in (None, cfg.eos_id) else None
    ours = []
    with torch.no_grad():
        if cfg.arch == "encoder-decoder":
            translator = ctranslate2.Translator(str(ct2_dir), device="cpu", intra_threads=1)
            results = translator.translate_batch([src_tok.convert_ids_to_tokens(r) for r in rows], beam_size=1,
                                                 max_decoding_length=32, min_decoding_length=0,  # ours may end at once
                                                 suppress_sequences=pad_token)
            theirs = [tgt_tok.convert_tokens_to_ids(r.hypotheses[0]) for r in results]
            for r in rows:
                ours.append(_cut(model.generate(torch.tensor([r]))[0, 1:].tolist(), cfg.eos_id))
        else:
            generator = ctranslate2.Generator(str(ct2_dir), device="cpu", intra_threads=1)
            results = generator.generate_batch([src_tok.convert_ids_to_tokens(r) for r in rows], max_length=32,
                                               sampling_topk=1, include_prompt_in_result=False, min_length=0,
                                               suppress_sequences=pad_token)
            theirs = [_cut(list(r.sequences_ids[0]), cfg.eos_id) for r in results]
            for r in rows:
                ours.append(_cut(model.generate(torch.tensor([r]))[0, len(r):].tolist(), cfg.eos_id))
    return theirs, ours


def _cut(ids: list[int], eos: int | None) -> list[int]:
    return ids[:ids.index(eos)] if eos is not None and eos in ids else ids


def _check_greedy(ctranslate2, model, ct2_dir, hf_dir) -> bool:
    src, pad, _ = probe(model.config, seed=1)
    if model.config.arch == "decoder":
        src, pad = src[:, :3], pad[:, :3]
    theirs, ours = greedy_tokens(ctranslate2, model, ct2_dir, hf_dir, src, pad)
    return theirs == ours
