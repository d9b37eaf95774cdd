"""`glassformer export --format onnx`: ONNX Runtime's logits equal ours (≤ 1e-4) on the test split, and
a greedy decode that feeds the past key values back step by step gives our greedy tokens.

A translator is encoder.onnx + decoder.onnx (first step) + decoder_with_past.onnx (every later step); a
language model is model.onnx with past key values (the paper LM's OpenAI GPT has none). The inputs
here have other batch sizes and lengths than the export's example, so a shape traced in as a
constant would show. ONNX Runtime is driven by hand here, not through interop.export_onnx.OnnxModel.
(The dynamo exporter takes ~5-20 s a graph on 2 busy cores.)
"""

import numpy as np
import onnxruntime as ort
import pytest
import torch
from transformers import AutoTokenizer

from export_helpers import held_out, train_runs
from glassformer.train.checkpoint import load_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")
NEW = 6  # greedy tokens compared per sequence


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return train_runs(tmp_path_factory.mktemp("runs"), ["zh-en", "lm-auto", "lm-bpe", "lm-paper"])


@pytest.fixture(scope="module")
def exported(runs, tmp_path_factory):
    """{name: onnx folder}, each written by `glassformer export --format onnx` in this process."""
    import sys
    from glassformer.cli import main
    out = {}
    for name, folder in runs.items():
        dest = tmp_path_factory.mktemp("onnx") / name
        mp = pytest.MonkeyPatch()
        mp.setattr(sys, "argv", ["glassformer", "export", "--ckpt", str(folder), "--format", "onnx", "--out", str(dest)])
        try:
            main()
        except SystemExit as e:
            assert e.code in (0, None), f"export of {name} failed"
        finally:
            mp.undo()
        out[name] = dest
    return out


def sessions(folder):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return {p.stem: ort.InferenceSession(str(p), opts, providers=["CPUExecutionProvider"]) for p in folder.glob("*.onnx")}


def past_inputs(session):
    return [i for i in session.get_inputs() if i.name.startswith("past_key_values.")]


def empty_past(session, batch):
    return {i.name: np.zeros((batch, i.shape[1], 0, i.shape[3]), np.float32) for i in past_inputs(session)}


def test_files_of_each_kind(exported):
    assert sorted(p.name for p in exported["zh-en"].glob("*.onnx")) == ["decoder.onnx", "decoder_with_past.onnx",
                                                                        "encoder.onnx"]
    names = [i.name for i in sessions(exported["lm-auto"])["model"].get_inputs()]
    assert names[:3] == ["input_ids", "attention_mask", "position_ids"] and "past_key_values.0.key" in names
    names = [i.name for i in sessions(exported["lm-paper"])["model"].get_inputs()]
    assert names == ["input_ids", "attention_mask"]  # OpenAI GPT: no cache in transformers


@pytest.mark.parametrize("name", ["zh-en", "lm-auto", "lm-bpe", "lm-paper"])
def test_onnx_runtime_logits_equal_ours(name, runs, exported):
    out = exported[name]
    ck = load_checkpoint(runs[name])
    model, cfg = ck.model, ck.model.config
    tok = AutoTokenizer.from_pretrained(out / "hf")
    test = held_out(ck, 5)
    s = sessions(out)
    with torch.no_grad():
        if cfg.arch == "encoder-decoder":
            batch = tok([x for x, _ in test], return_tensors="np", padding=True)
            feed = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}
            memory = s["encoder"].run(None, feed)[0]
            tgt = [[cfg.start_id, *ck.tgt_tokenizer.encode(t)][:6] for _, t in test]
            tgt = torch.tensor([t + [cfg.eos_id] * (6 - len(t)) for t in tgt])
            got = s["decoder"].run(None, {"decoder_input_ids": tgt.numpy(), "encoder_hidden_states": memory,
                                          "attention_mask": batch.attention_mask})[0]
            pad = torch.from_numpy(batch.attention_mask == 0)
            ours = model(torch.from_numpy(batch.input_ids), tgt, src_padding_mask=pad)
            err = (torch.from_numpy(got)[..., :cfg.out_vocab_size] - ours).abs().max().item()
        else:
            batch = tok(test, return_tensors="np", padding=True)
            feed = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}
            if "position_ids" in [i.name for i in s["model"].get_inputs()]:
                feed["position_ids"] = np.clip(batch.attention_mask.cumsum(1) - 1, 0, None)
                feed.update(empty_past(s["model"], len(test)))
            got = s["model"].run(None, feed)[0]
            pad = torch.from_numpy(batch.attention_mask == 0)
            ours = model(torch.from_numpy(batch.input_ids), padding_mask=pad)
            err = (torch.from_numpy(got) - ours)[~pad].abs().max().item()
    print(f"{name}: ONNX Runtime max abs logit error {err:.2e}")
    assert ours.abs().max() > 0.5 and err <= 1e-4


@pytest.mark.parametrize("name", ["zh-en", "lm-auto", "lm-bpe"])
def test_greedy_through_past_key_values_gives_our_tokens(name, runs, exported):
    """Encode (or read the prompt) once, then one token per call with the presents fed back as the
    past: the tokens equal `model.generate`'s greedy ones."""
    ck = load_checkpoint(runs[name])
    model, cfg = ck.model, ck.model.config
    s = sessions(exported[name])
    test = held_out(ck, 4)
    agree = 0
    for item in test:
        if cfg.arch == "encoder-decoder":
            src = torch.tensor([ck.src_tokenizer.encode(item[0])])
            ours = model.generate(src, max_new_tokens=NEW)[0, 1:].tolist()
            mask = np.ones(src.shape, np.int64)
            memory = s["encoder"].run(None, {"input_ids": src.numpy(), "attention_mask": mask})[0]
            out = s["decoder"].run(None, {"decoder_input_ids": np.array([[cfg.start_id]]),
                                          "encoder_hidden_states": memory, "attention_mask": mask})
            n = (len(out) - 1) // 2
            past, cross = out[1:1 + n], out[1 + n:]
            names = [i.name for i in past_inputs(s["decoder_with_past"])]
            got = [int(out[0][0, -1].argmax())]
            while len(got) < len(ours):
                out = s["decoder_with_past"].run(None, {"decoder_input_ids": np.array([[got[-1]]]),
                                                        "attention_mask": mask, **dict(zip(names, [*past, *cross]))})
                past = out[1:]
                got.append(int(out[0][0, -1].argmax()))
        else:
            prompt = torch.tensor([ck.tokenizer.encode(item)[:3]])
            ours = model.generate(prompt, max_new_tokens=NEW)[0, 3:].tolist()
            names = [i.name for i in past_inputs(s["model"])]
            feed = {"input_ids": prompt.numpy(), "attention_mask": np.ones((1, 3), np.int64),
                    "position_ids": np.arange(3)[None], **empty_past(s["model"], 1)}
            got, length = [], 3
            while len(got) < len(ours):
                out = s["model"].run(None, feed)
                got.append(int(out[0][0, -1].argmax()))
                length += 1
                feed = {"input_ids": np.array([[got[-1]]]), "attention_mask": np.ones((1, length), np.int64),
                        "position_ids": np.array([[length - 1]]), **dict(zip(names, out[1:]))}
        assert len(ours) > 0
        agree += got == ours
    assert agree == len(test)


def test_report_names_both_checks(exported):
    import json
    report = json.loads((exported["zh-en"] / "glassformer_export.json").read_text())
    assert set(report["onnx_errors"]) == {"full", "stepwise"} and report["past_key_values"] is True
    assert max(report["onnx_errors"].values()) <= 1e-4
