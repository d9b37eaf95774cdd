"""Head outputs in two dimensions with PCA or t-SNE (seed 003 §2).

Seed 003 §2 looks at what different heads produce with t-SNE and finds heads that specialise.
Each head's output is compared where the heads meet: in the residual stream. Head h of a layer
writes z_h · W_O[h] (its rows of W_O, §2.4) — the per-head terms whose sum (+ b_O) is the
attention output — so every token gives one d_model point per head, and points of a head that
does one job cluster together.
"""

from __future__ import annotations

import numpy as np


def head_contributions(z: np.ndarray, W_O: np.ndarray) -> np.ndarray:
    """Per-head writes into the residual stream.

    z: (head, seq, d_k) pattern·V of each head; W_O: (head·d_k, d_model).
    Returns (head, seq, d_model) with Σ_h out[h] = concat(z)·W_O.
    """
    z = np.asarray(z, dtype=np.float64)
    H, _, d_k = z.shape
    W = np.asarray(W_O, dtype=np.float64).reshape(H, d_k, -1)
    return np.einsum("hsk,hkd->hsd", z, W)


def project(X: np.ndarray, method: str = "pca", seed: int = 0) -> np.ndarray:
    """(n, dim) points -> (n, 2) with scikit-learn's PCA or t-SNE."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 3:
        raise ValueError(f"need at least 3 points of shape (n, dim), got {X.shape}")
    if method == "pca":
        from sklearn.decomposition import PCA
        # eigen-decomposition of the (dim × dim) covariance: same axes as the SVD, far cheaper
        # for many points of moderate width (d_model ≤ a few thousand)
        try:
            return PCA(n_components=2, svd_solver="covariance_eigh", random_state=seed).fit_transform(X)
        except ValueError:  # scikit-learn < 1.5 has no covariance_eigh
            return PCA(n_components=2, random_state=seed).fit_transform(X)
    if method == "tsne":
        from sklearn.manifold import TSNE
        perplexity = float(min(30, max(2, (X.shape[0] - 1) // 3)))
        # exact gradients below 1000 points: faster there than Barnes-Hut's tree, and deterministic
        algo = "exact" if X.shape[0] <= 1000 else "barnes_hut"
        return TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed,
                    method=algo).fit_transform(X)
    raise ValueError(f"method={method!r} is not one of pca, tsne")


def separation(Y: np.ndarray, labels: np.ndarray) -> float:
    """Silhouette score of the 2-D points by label (1: heads apart, 0: mixed together)."""
    from sklearn.metrics import silhouette_score
    return float(silhouette_score(np.asarray(Y), np.asarray(labels)))
