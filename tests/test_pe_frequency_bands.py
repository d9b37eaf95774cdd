"""`pe-frequency-bands` (seed 000 §3.3, reason 3): the band-masked encoding against the sinusoid written
out in NumPy, the where(3) labels and the absolute-position bound counted by hand, the arms' position
coming from the band alone (a bidirectional encoder with no band is permutation-equivariant), and the
quick row through the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from glassformer.cli import app
from glassformer.experiments.base import tiny_config
from glassformer.experiments.claims_doc import build
from glassformer.experiments.pe_frequency_bands import (BANDS, D_MODEL, N_MAX, N_MIN, EncoderTagger,
                                                         absolute_only_bound, keep_band, wavelength)
from glassformer.experiments.synthetic import TaggingTask
from glassformer.trace import run_with_trace


def _numpy_band(n: int, d: int, pairs: range) -> np.ndarray:
    """§3.2 by hand: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same), other pairs zero."""
    pe = np.zeros((n, d))
    for pos in range(n):
        for i in pairs:
            angle = pos / 10000 ** (2 * i / d)
            pe[pos, 2 * i], pe[pos, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return pe


@pytest.mark.parametrize("arm", list(BANDS))
def test_band_table_is_the_numpy_sinusoid_with_the_other_pairs_zeroed(arm):
    cfg = tiny_config(11, arch="encoder", d_model=D_MODEL, n_layers=1)
    torch.manual_seed(0)
    model = keep_band(EncoderTagger(cfg), BANDS[arm]).eval()
    want = _numpy_band(N_MAX, D_MODEL, BANDS[arm])
    got = model.pos(torch.arange(N_MAX)).double().numpy()
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert np.count_nonzero(np.abs(got).sum(0)) == 2 * len(BANDS[arm])  # 16 dimensions per single band
    # the model's input x0 is the untouched token embedding (× √d_model, embed_scale) plus that band
    ids = torch.randint(3, 11, (2, N_MAX), generator=torch.Generator().manual_seed(1))
    _, tr = run_with_trace(model, ids, names=["x0"])
    tokens = model.embed.W_E.detach()[ids].double().numpy() * math.sqrt(D_MODEL)
    np.testing.assert_allclose(tr["x0"].double().numpy(), tokens + want[None], atol=1e-5)


def test_bands_sit_where_the_docstring_says_against_the_rows():
    # λ_i = 2π·10000^(2i/64): λ_0 = 2π (the seed's 6.28), λ_8 = 20π, λ_16 = 200π
    assert wavelength(0) == pytest.approx(2 * math.pi)
    assert wavelength(8) == pytest.approx(20 * math.pi) and wavelength(16) == pytest.approx(200 * math.pi)
    high, low = BANDS["high (i 0–7)"], BANDS["low (i 8–15)"]
    assert len(high) == len(low) == len(BANDS["lowest (i 24–31)"]) == 8  # equal dimension counts
    assert max(wavelength(i) for i in high) < N_MIN  # every high pair cycles within the shortest row
    assert min(wavelength(i) for i in low) > 0.95 * N_MAX  # no low pair completes much more than one cycle
    assert (N_MAX - 1) / wavelength(24) < 0.064 / (2 * math.pi) * 1.01  # lowest: ≤ 0.064 rad over a row


def test_where_labels_are_the_third_of_each_row_by_hand():
    task = TaggingTask("where", n_symbols=5, min_len=4, max_len=11, a=3)
    assert task.n_classes == 3 and task.chance == pytest.approx(1 / 3)
    ids, y = task.batch(32, torch.Generator().manual_seed(0))
    for row_ids, row_y in zip(ids.tolist(), y.tolist()):
        n = sum(t != 0 for t in row_ids)
        for t in range(len(row_ids)):
            third = 0 if t < n / 3 else 1 if t < 2 * n / 3 else 2  # "句首、句中还是句末"
            assert row_y[t] == (third + 3 if t < n else -100), (n, t)


def test_absolute_only_bound_counted_by_hand():
    # rows of 4 or 5, halves: n=4 -> 0 0 1 1, n=5 -> 0 0 0 1 1; only t = 2 disagrees: 8 of 9 right
    assert absolute_only_bound(4, 5, 2) == pytest.approx(8 / 9)
    assert absolute_only_bound(6, 6, 3) == 1.0  # one length: position alone decides


def test_without_a_band_the_encoder_tagger_is_permutation_equivariant():
    """Position reaches the tagger only through the kept band: no causal mask to count with."""
    cfg = tiny_config(11, arch="encoder", d_model=D_MODEL, n_layers=1)
    torch.manual_seed(0)
    model = keep_band(EncoderTagger(cfg), range(0)).eval()
    ids = torch.randint(3, 11, (1, 12), generator=torch.Generator().manual_seed(2))
    perm = torch.randperm(12, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(model(ids[:, perm]), model(ids)[:, perm], atol=1e-5, rtol=1e-5)
        banded = keep_band(EncoderTagger(cfg), BANDS["high (i 0–7)"]).eval()
        assert (banded(ids[:, perm]) - banded(ids)[:, perm]).abs().max() > 1e-2


def test_quick_row_has_the_pre_registered_checks_and_its_seed_claim(tmp_path):
    rows_path = tmp_path / "rows.json"
    result = CliRunner().invoke(app, ["ablate", "pe-frequency-bands", "--quick", "--out", str(tmp_path / "out"),
                                      "--json", str(rows_path)])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(rows_path.read_text(encoding="utf-8"))
    assert {v["name"] for v in row["variants"]} == {f"lag(2): {a}" for a in list(BANDS)[:3]} | \
        {f"where(3): {a}" for a in BANDS}
    main = [(c["better"], c["worse"], c["min_effect"]) for c in row["checks"] if c["main"]]
    assert main == [("lag(2): high (i 0–7)", "lag(2): low (i 8–15)", 0.1),
                    ("where(3): low (i 8–15)", "where(3): high (i 0–7)", 0.1)]
    assert len(row["checks"]) == 5
    doc = build([row], {})
    (claim,) = doc["seed_claims"]
    assert claim["section"] == "seed 000 §3.3" and "句首、句中还是句末" in claim["seed_claim"]
    assert len(claim["decided_by"]) == 2 and len(claim["supporting"]) == 3
    assert all("pre-registered" in c["delta_source"] for c in doc["checks"])
