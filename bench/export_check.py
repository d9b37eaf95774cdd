"""How equal a trained LM's exports are to it, over its run's test split (README, "Export").

    python bench/export_check.py RUN [--lines N] [--new 32]

Exports RUN (its best/, else checkpoint/) to a temporary folder as CTranslate2 (float32 and int8; the
float32 folder holds the Hugging Face export it was converted from, in hf/) and ONNX, then, over the
test split of the run's own data (its first N items):
- the max abs logit error of transformers' Auto class against ours (padded batch, padding excluded);
- greedy outputs equal to ours, counted: transformers' generate(), CTranslate2 fp32 and int8
  (continuations of --new tokens from each line's first 6 characters);
- ONNX Runtime's error, as the export's own check reports it (whole sequences and one token at a time).
Prints one table row and writes nothing else. The references are the independent runtimes themselves.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch


def _until(ids: list[int], eos: int) -> list[int]:
    return ids[:ids.index(eos)] if eos in ids else ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--lines", type=int, default=200, help="test items to compare (default 200)")
    ap.add_argument("--new", type=int, default=32, help="an LM's continuation length in tokens (default 32)")
    a = ap.parse_args()
    import ctranslate2
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from glassformer.errors import InputError
    from glassformer.interop.export_folder import save
    from glassformer.train.checkpoint import load_checkpoint
    from glassformer.train.config import TrainConfig
    from glassformer.train.tasks import raw_splits

    torch.set_num_threads(1)
    try:
        ck = load_checkpoint(a.run)
    except InputError as e:
        raise SystemExit(f"error: {e}") from None
    model, cfg = ck.model.eval(), ck.model.config
    if cfg.arch != "decoder":
        raise SystemExit(f"{a.run}: a {cfg.arch} model; this check is for an LM (glassformer train --task lm)")
    test = raw_splits(TrainConfig.from_dict(ck.meta["train_config"]))["test"][:a.lines]
    toks = {"lm": ck.src_tokenizer}
    with tempfile.TemporaryDirectory() as tmp:
        out = {f: Path(tmp) / f for f in ("ct2", "int8", "onnx")}
        report = save(model, out["ct2"], "ctranslate2", toks)  # writes and checks ct2/hf first
        out["hf"] = out["ct2"] / report["hf_folder"]
        save(model, out["int8"], "ctranslate2", toks, int8=True)
        onnx = save(model, out["onnx"], "onnx", toks)
        tok = AutoTokenizer.from_pretrained(out["hf"])
        hf = AutoModelForCausalLM.from_pretrained(out["hf"]).eval()
        equal = {"hf": 0, "ct2": 0, "int8": 0}
        with torch.no_grad():
            batch = tok(test, return_tensors="pt", padding=True)
            pad = batch.attention_mask == 0
            err = (hf(**batch).logits - model(batch.input_ids, padding_mask=pad))[~pad].abs().max().item()
            gens = {k: ctranslate2.Generator(str(out[k]), device="cpu", intra_threads=1) for k in ("ct2", "int8")}
            for line in test:
                prompt = tok(line[:6]).input_ids
                ours = _until(model.generate(torch.tensor([prompt]), max_new_tokens=a.new)[0, len(prompt):].tolist(),
                              cfg.eos_id)
                theirs = hf.generate(torch.tensor([prompt]), max_new_tokens=a.new)[0, len(prompt):].tolist()
                equal["hf"] += _until(theirs, cfg.eos_id) == ours
                for k, g in gens.items():
                    r = g.generate_batch([tok.convert_ids_to_tokens(prompt)], max_length=a.new, sampling_topk=1,
                                         include_prompt_in_result=False)[0]
                    equal[k] += _until(list(r.sequences_ids[0]), cfg.eos_id) == ours
    n = len(test)
    print("| run | family | logits | generate() | CTranslate2 | int8 | ONNX |")
    print(f"| {a.run} | {report['family']} | {err:.1e} | {equal['hf']}/{n} | {equal['ct2']}/{n} | {equal['int8']}/{n}"
          f" | {onnx['onnx_max_abs_logit_error']:.1e} |")


if __name__ == "__main__":
    main()
