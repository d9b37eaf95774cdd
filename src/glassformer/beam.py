"""Beam search: keep the beam_size most probable partial sequences instead of one.

Each step extends every beam by every token, scores the candidates by their summed log
probability, and keeps the best beam_size that do not end. A candidate ending in eos becomes a
finished hypothesis, ranked by score / length**length_penalty (the length normalisation of
Wu et al. 2016 as Hugging Face applies it: length counts the generated tokens, eos included;
0 ranks by raw log probability, > 0 favours longer output). A batch row stops when no running
beam can still beat its worst kept hypothesis.
"""

from __future__ import annotations

import heapq

import torch

from .generate import Stepper


def _bound(best_running: float, length: int, max_length: int, alpha: float) -> float:
    """The best normalised score a running beam could still reach (log probs only fall).

    With alpha > 0 the divisor grows with length, so the bound is at the longest length."""
    return best_running / (max_length if alpha > 0 else length) ** alpha


def beam_search(model, prefix: torch.Tensor, max_new_tokens: int, beam_size: int, alpha: float,
                eos: int | None, fill: int, use_cache: bool, memory=None, src_pad=None,
                prompt_pad=None, precision: str = "fp32") -> torch.Tensor:
    """Best sequence per row of `prefix` (batch, start): (batch, start + generated) ids."""
    B, start = prefix.shape
    K = beam_size
    expand = lambda t: None if t is None else t.repeat_interleave(K, dim=0)  # noqa: E731
    stepper = Stepper(model, use_cache, start + max_new_tokens, expand(memory), expand(src_pad), expand(prompt_pad),
                      group=K, eos=eos, precision=precision)
    seq = prefix.new_full((B * K, start + max_new_tokens), fill)
    seq[:, :start] = expand(prefix)
    scores = torch.full((B, K), float("-inf"), device=prefix.device)
    scores[:, 0] = 0.0  # all beams start equal: keep one, or the first step picks duplicates
    finished: list[list[tuple[float, int, torch.Tensor]]] = [[] for _ in range(B)]  # min-heaps
    done = [False] * B
    logits = stepper.first(expand(prefix))
    length, counter = start, 0
    for step in range(max_new_tokens):
        logp = torch.log_softmax(logits.float(), dim=-1)  # (B*K, V)
        V = logp.shape[-1]
        cand = (scores.view(-1, 1) + logp).view(B, K * V)
        top_scores, top_idx = cand.topk(min(2 * K, K * V), dim=1)  # 2K: room for eos candidates
        ts, ti = top_scores.tolist(), top_idx.tolist()  # one host sync per step
        inf = float("-inf")
        new_scores = [inf] * (B * K)
        src = [b * K for b in range(B) for _ in range(K)]  # empty slots copy the group's first row
        tok = [fill] * (B * K)
        n_new = step + 1
        for b in range(B):
            if done[b]:
                continue
            k = 0
            for rank, (s, i) in enumerate(zip(ts[b], ti[b])):
                if s == inf or k == K:
                    break
                beam, t = divmod(i, V)
                row = b * K + beam
                if eos is not None and t == eos:
                    if rank < K:  # an eos below the top K would not have survived anyway
                        hyp = torch.cat([seq[row, :length], seq.new_tensor([eos])])
                        counter = _keep(finished[b], s / n_new ** alpha, counter, hyp, K)
                    continue
                new_scores[b * K + k], src[b * K + k], tok[b * K + k] = s, row, t
                k += 1
            best_running = new_scores[b * K]
            if best_running == inf or (len(finished[b]) >= K and finished[b][0][0] >=
                                       _bound(best_running, n_new, max_new_tokens, alpha)):
                done[b] = True
        if all(done):
            break
        src = torch.tensor(src, device=prefix.device)
        seq = seq.index_select(0, src)
        seq[:, length] = torch.tensor(tok, device=prefix.device)
        length += 1
        scores = torch.tensor(new_scores, device=prefix.device).view(B, K)
        if step == max_new_tokens - 1:
            break
        stepper.reorder(src)
        logits = stepper.next(seq, length)
    final = scores.tolist()
    for b in range(B):  # beams still running at the length limit compete too
        if not done[b]:
            for k, s in enumerate(final[b]):
                if s > float("-inf"):
                    counter = _keep(finished[b], s / (length - start) ** alpha, counter,
                                    seq[b * K + k, :length].clone(), K)
    best = [max(h, key=lambda x: (x[0], -x[1]))[2] for h in finished]
    out = prefix.new_full((B, max(len(t) for t in best)), fill)
    for b, t in enumerate(best):
        out[b, :len(t)] = t
    return out


def _keep(heap: list, score: float, counter: int, hyp: torch.Tensor, K: int) -> int:
    """Add a finished hypothesis, keeping the K best (heap[0] is the worst kept)."""
    item = (score, counter, hyp)
    if len(heap) < K:
        heapq.heappush(heap, item)
    elif score > heap[0][0]:
        heapq.heapreplace(heap, item)
    return counter + 1
