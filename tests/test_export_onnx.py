"""`glassformer export --format onnx`: ONNX Runtime's logits equal ours (≤ 1e-4) on the test split.

A translator is encoder.onnx + decoder.onnx, a language model model.onnx; the inputs here have other
batch sizes and lengths than the export's example, so a shape traced in as a constant would show.
(The dynamo exporter takes ~20 s a graph on 2 busy cores: two runs, three graphs.)
"""

import onnxruntime as ort
import pytest
import torch
from transformers import AutoTokenizer

from cli_helpers import run
from export_helpers import held_out, train_runs
from glassformer.train.checkpoint import load_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return train_runs(tmp_path_factory.mktemp("runs"), ["zh-en", "lm-auto"])


@pytest.mark.parametrize("name", ["zh-en", "lm-auto"])
def test_onnx_runtime_logits_equal_ours(name, runs, tmp_path, monkeypatch, capsys):
    out = tmp_path / "onnx"
    code, stdout, err = run(monkeypatch, capsys, "export", "--ckpt", str(runs[name]), "--format", "onnx",
                            "--out", str(out))
    assert code == 0, err
    ck = load_checkpoint(runs[name])
    model, cfg = ck.model, ck.model.config
    tok = AutoTokenizer.from_pretrained(out / "hf")
    test = held_out(ck, 5)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1

    def session(name):
        return ort.InferenceSession(str(out / name), opts, providers=["CPUExecutionProvider"])

    with torch.no_grad():
        if cfg.arch == "encoder-decoder":
            batch = tok([s for s, _ in test], return_tensors="np", padding=True)
            feed = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}
            memory = session("encoder.onnx").run(None, feed)[0]
            tgt = [[cfg.start_id, *ck.tgt_tokenizer.encode(t)][:6] for _, t in test]
            tgt = torch.tensor([t + [cfg.eos_id] * (6 - len(t)) for t in tgt])
            got = session("decoder.onnx").run(None, {"decoder_input_ids": tgt.numpy(), "encoder_hidden_states": memory,
                                                     "attention_mask": batch.attention_mask})[0]
            pad = torch.from_numpy(batch.attention_mask == 0)
            ours = model(torch.from_numpy(batch.input_ids), tgt, src_padding_mask=pad)
            err = (torch.from_numpy(got)[..., :cfg.out_vocab_size] - ours).abs().max().item()
        else:
            batch = tok(test, return_tensors="np", padding=True)
            got = session("model.onnx").run(None, {"input_ids": batch.input_ids,
                                                   "attention_mask": batch.attention_mask})[0]
            pad = torch.from_numpy(batch.attention_mask == 0)
            ours = model(torch.from_numpy(batch.input_ids), padding_mask=pad)
            err = (torch.from_numpy(got) - ours)[~pad].abs().max().item()
    print(f"{name}: ONNX Runtime max abs logit error {err:.2e}")
    assert ours.abs().max() > 0.5 and err <= 1e-4
