// z = softmax(q·Kᵀ · scale + bias) · V for the few queries of a decode step (seed 000 §2.3–2.4;
// nn/decode_step.py, issue 29 §2). Part of the same extension as gemv.cpp (nn/gemv.py loads both).
//
// A decode step asks attention for one query per row (self-attention over the cache) or a source's
// beams (cross-attention over its memory): a few dot products per head. PyTorch's
// scaled_dot_product_attention answers through its flash-attention kernel, built for long query
// blocks, and the step needed four more operator calls around it (the cache's two narrows, the
// heads' transpose and reshape): at ~5 µs a call in eager mode that was more than the arithmetic.
// This does the arithmetic only — the scores, a two-pass softmax (max, then Σ exp), the weighted
// sum of V — reading the cache in place up to `length`, and writes z with its heads side by side,
// (batch, queries, head, d_k): the (rows, H·d_k) layout W_O reads, so no copy follows.
//
// Summation order differs from SDPA's (float32 rounding; tested against the explicit-math
// attention in tests/test_gemv.py and through the decode step against the explicit-math model).

#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace {

using Vec = at::vec::Vectorized<float>;

inline float dot(const float* a, const float* b, int64_t d) {
  Vec acc(0.f);
  int64_t j = 0;
  for (; j + Vec::size() <= d; j += Vec::size()) acc = at::vec::fmadd(Vec::loadu(a + j), Vec::loadu(b + j), acc);
  float s = at::vec::vec_reduce_all<float>([](Vec& x, Vec& y) { return x + y; }, acc);
  for (; j < d; ++j) s += a[j] * b[j];
  return s;
}

// acc[0:d] += p · v[0:d]
inline void axpy(float p, const float* v, float* acc, int64_t d) {
  const Vec pv(p);
  int64_t j = 0;
  for (; j + Vec::size() <= d; j += Vec::size())
    at::vec::fmadd(pv, Vec::loadu(v + j), Vec::loadu(acc + j)).store(acc + j);
  for (; j < d; ++j) acc[j] += p * v[j];
}

}  // namespace

// q (B, H, M, d), k and v (B, H, ≥ length, d), each with its last dimension contiguous and any other
// strides (views of the step's buffers and of the cache); bias broadcastable to (B, H, M, length) or
// none. Given new_k and new_v (B, H, 1, d), one query per row (self-attention): they are first written
// into the cache as its row length − 1 — the step's own key and value, which its query also attends
// to — so the cache write costs no operator calls of its own. Returns z (B, M, H, d), contiguous.
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t length,
                     double scale, const c10::optional<torch::Tensor>& bias,
                     const c10::optional<torch::Tensor>& new_k, const c10::optional<torch::Tensor>& new_v) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "attend: q, k, v must be (batch, head, seq, d_k)");
  TORCH_CHECK(q.scalar_type() == at::kFloat && k.scalar_type() == at::kFloat && v.scalar_type() == at::kFloat,
              "attend: float32 only");
  TORCH_CHECK(q.device().is_cpu() && k.device().is_cpu() && v.device().is_cpu(), "attend: CPU tensors only");
  const int64_t B = q.size(0), H = q.size(1), M = q.size(2), d = q.size(3);
  TORCH_CHECK(k.size(0) == B && v.size(0) == B && k.size(1) == H && v.size(1) == H && k.size(3) == d &&
                  v.size(3) == d && length >= 1 && length <= k.size(2) && length <= v.size(2),
              "attend: k and v must be (batch, head, ≥ length, d_k) like q, length ≥ 1");
  TORCH_CHECK(q.stride(3) == 1 && k.stride(3) == 1 && v.stride(3) == 1, "attend: d_k must be contiguous");
  TORCH_CHECK(new_k.has_value() == new_v.has_value(), "attend: new_k and new_v come together");
  const float* nkp = nullptr;
  const float* nvp = nullptr;
  if (new_k.has_value()) {
    for (const auto* t : {&*new_k, &*new_v}) {
      TORCH_CHECK(t->dim() == 4 && t->size(0) == B && t->size(1) == H && t->size(2) == 1 && t->size(3) == d &&
                      t->stride(3) == 1 && t->scalar_type() == at::kFloat,
                  "attend: new_k and new_v must be float32 (batch, head, 1, d_k) with d_k contiguous");
    }
    TORCH_CHECK(M == 1, "attend: new_k and new_v are a step's own key and value: one query per row");
    nkp = new_k->data_ptr<float>();
    nvp = new_v->data_ptr<float>();
  }
  const float* bp = nullptr;
  int64_t bs[4] = {0, 0, 0, 0};  // the bias's strides, 0 along a broadcast dimension
  if (bias.has_value()) {
    const auto& t = *bias;
    TORCH_CHECK(t.dim() == 4 && t.scalar_type() == at::kFloat, "attend: bias must be a float32 4-d tensor");
    const int64_t want[4] = {B, H, M, length};
    for (int i = 0; i < 4; ++i) {
      TORCH_CHECK(t.size(i) == want[i] || t.size(i) == 1, "attend: bias must broadcast to (batch, head, queries, length)");
      bs[i] = t.size(i) == 1 ? 0 : t.stride(i);
    }
    bp = t.data_ptr<float>();
  }
  torch::Tensor z = torch::empty({B, M, H, d}, q.options());
  const float* qp = q.data_ptr<float>();
  float* kp = k.data_ptr<float>();  // written only at row length − 1, given new_k and new_v
  float* vp = v.data_ptr<float>();
  float* zp = z.data_ptr<float>();
  const float s = static_cast<float>(scale);
  auto heads = [&](int64_t i0, int64_t i1) {
    std::vector<float> p(length);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / H, h = i % H;
      float* kh = kp + b * k.stride(0) + h * k.stride(1);
      float* vh = vp + b * v.stride(0) + h * v.stride(1);
      if (nkp) {  // this head's new key and value into the cache, before reading it
        const auto& nk = *new_k;
        const auto& nv = *new_v;
        std::copy_n(nkp + b * nk.stride(0) + h * nk.stride(1), d, kh + (length - 1) * k.stride(2));
        std::copy_n(nvp + b * nv.stride(0) + h * nv.stride(1), d, vh + (length - 1) * v.stride(2));
      }
      for (int64_t m = 0; m < M; ++m) {
        const float* qm = qp + b * q.stride(0) + h * q.stride(1) + m * q.stride(2);
        const float* bm = bp ? bp + b * bs[0] + h * bs[1] + m * bs[2] : nullptr;
        float top = -std::numeric_limits<float>::infinity();
        for (int64_t t = 0; t < length; ++t) {
          p[t] = dot(qm, kh + t * k.stride(2), d) * s + (bm ? bm[t * bs[3]] : 0.f);
          top = std::max(top, p[t]);
        }
        float sum = 0.f;
        for (int64_t t = 0; t < length; ++t) sum += (p[t] = std::exp(p[t] - top));
        float* zm = zp + ((b * M + m) * H + h) * d;
        std::fill(zm, zm + d, 0.f);
        for (int64_t t = 0; t < length; ++t) axpy(p[t] / sum, vh + t * v.stride(2), zm, d);
      }
    }
  };
  // Split heads between threads unless the keys and values are few (under 2^12 values): in a step
  // they come from memory, after the weights streamed through, and two threads read them faster. On the
  // AVX-512 EPYC (bench/gemv_ab.py's LM, two interleaved runs) this threshold made batch-1 decoding
  // 2.35 → 2.26 and 2.21 → 2.11 ms a token against one of 2^16 multiply-adds; the translator tied.
  const int64_t values = B * H * length * d * 2;
  if (values < (1 << 12) || at::get_num_threads() == 1) {
    heads(0, B * H);
  } else {
    at::parallel_for(0, B * H, 1, heads);
  }
  return z;
}
