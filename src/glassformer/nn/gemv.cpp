// y = x·W + b for the few rows x (m, K) of a decode step, W (K, N) row-major (nn/gemv.py, issue 29).
//
// At batch 1 a decode step's products are matrix-vector products: each weight is read once and used
// for one multiply-add, so the time is the time to stream W from memory. This kernel does only that:
// it walks W's rows in order, sixteen at a time, and adds x[i]·W[i, :] into the output rows (in L1 or
// L2). Threads split W's rows, so each reads one contiguous stretch of memory front to back into
// partial sums of its own, added at the end. (Splitting the columns instead, or blocking them so that
// y stays in L1, cut W into strided pieces the prefetchers follow worse: 2× slower on the LM's
// shapes.) Nothing else: no packing, no copy of W, no dispatch on shapes — which is what the general
// GEMMs it replaces spend their time on at these sizes.
//
// Summation order differs from BLAS (float32 rounding; tested against torch.mm in
// tests/test_gemv.py and against Hugging Face's logits through the decode step).

#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>  // ATen's own vectors: φ with the formulas and erf/tanh/exp of its kernels

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

constexpr int64_t R = 16;  // rows of W per pass over y (tried 4, 8, 16: 3.6, 3.1, 3.0 ms for the LM's
                           // 25 products at one thread, a sum over the same bytes 2.2–2.5)

// y[r, :] += Σ_{i ≤ k < i + G} x[r, k] · W[k, :], one pass over y for G consecutive rows of W
template <int64_t G>
inline void pass(const float* x, const float* W, float* y, int64_t m, int64_t K, int64_t N, int64_t i) {
  const float* w = W + i * N;  // G rows of W: one contiguous stretch of memory
  for (int64_t r = 0; r < m; ++r) {  // the G rows of W are in L1/L2 after the first row of x
    float a[G];
    for (int64_t g = 0; g < G; ++g) a[g] = x[r * K + i + g];
    float* __restrict__ yr = y + r * N;
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) {
      float s = 0.f;
      for (int64_t g = 0; g < G; ++g) s += a[g] * w[g * N + j];
      yr[j] += s;
    }
  }
}

// y[r, :] += Σ_{i0 ≤ i < i1} x[r, i] · W[i, :] for every row r: W's rows i0…i1, read front to back once
void rows(const float* x, const float* W, float* y, int64_t m, int64_t K, int64_t N, int64_t i0, int64_t i1) {
  int64_t i = i0;
  for (; i + R <= i1; i += R) pass<R>(x, W, y, m, K, N, i);
  for (; i + 4 <= i1; i += 4) pass<4>(x, W, y, m, K, N, i);
  for (; i < i1; ++i) pass<1>(x, W, y, m, K, N, i);
}

// The epilogue (issue 29 §2): φ(y) + r over the output while it is still in L1/L2. After a product
// that streamed W, any other kernel runs from cold caches (its code and y pushed out by the stream:
// a separate GELU over 2,048 values took 31–79 µs there, 10 µs hot; an add 14–37 µs, 1 µs hot), so
// the FFN's φ and the residual's add are done here, by the code that just wrote y.
// φ as ATen's CPU kernels compute it (aten/src/ATen/native/cpu/Activation.cpp), same vector functions.
enum Act : int64_t { kNone = 0, kRelu = 1, kGelu = 2, kGeluTanh = 3, kSilu = 4 };

using Vec = at::vec::Vectorized<float>;

inline Vec phi(Vec x, int64_t act) {
  switch (act) {
    case kRelu:
      return at::vec::clamp_min(x, Vec(0.f));
    case kGelu:  // x · ½ · (1 + erf(x / √2))
      return x * Vec(0.5f) * (Vec(1.f) + (x * Vec(static_cast<float>(M_SQRT1_2))).erf());
    case kGeluTanh: {  // ½ · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))
      const Vec inner = Vec(static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5)) * (x + Vec(0.044715f) * x * x * x);
      return Vec(0.5f) * x * (Vec(1.f) + inner.tanh());
    }
    case kSilu:  // x / (1 + e^(−x))
      return x / (Vec(1.f) + x.neg().exp());
    default:
      return x;
  }
}

// y[0:n] ← LayerNorm(y) with gamma and beta (optional): Post-LN's Norm after the Add (seed 000 §5.2),
// in ATen's form (aten/src/ATen/native/cpu/layer_norm_kernel.cpp): (y · rstd − rstd · μ) · gamma + beta,
// rstd = 1/√(σ² + eps); the moments summed in double (torch's Welford sums are float32: the two agree
// to float32 rounding).
void layer_norm(float* y, int64_t n, const float* gamma, const float* beta, double eps) {
  double sum = 0.0, sq = 0.0;
  for (int64_t j = 0; j < n; ++j) sum += y[j];
  const double mean = sum / n;
  for (int64_t j = 0; j < n; ++j) sq += (y[j] - mean) * (y[j] - mean);
  const float rstd = static_cast<float>(1.0 / std::sqrt(sq / n + eps));
  const float shift = -rstd * static_cast<float>(mean);
  int64_t j = 0;
  for (; j + Vec::size() <= n; j += Vec::size()) {
    Vec v = at::vec::fmadd(Vec::loadu(y + j), Vec(rstd), Vec(shift)) * Vec::loadu(gamma + j);
    if (beta) v = v + Vec::loadu(beta + j);
    v.store(y + j);
  }
  for (; j < n; ++j) y[j] = (y[j] * rstd + shift) * gamma[j] + (beta ? beta[j] : 0.f);
}

// y ← φ(y) + r (r optional), n values
void epilogue(float* y, const float* r, int64_t n, int64_t act) {
  int64_t j = 0;
  for (; j + Vec::size() <= n; j += Vec::size()) {
    Vec v = phi(Vec::loadu(y + j), act);
    if (r) v = v + Vec::loadu(r + j);
    v.store(y + j);
  }
  if (j < n) {  // the tail: a partial vector
    const int64_t rest = n - j;
    Vec v = phi(Vec::loadu(y + j, rest), act);
    if (r) v = v + Vec::loadu(r + j, rest);
    v.store(y + j, rest);
  }
}

// the whole epilogue over the m output rows: φ, + r, then the LayerNorm of each row
void finish(float* y, const float* r, int64_t m, int64_t N, int64_t act, const float* gamma, const float* beta,
            double eps) {
  if (act != kNone || r) epilogue(y, r, m * N, act);
  if (gamma)
    for (int64_t row = 0; row < m; ++row) layer_norm(y + row * N, N, gamma, beta, eps);
}

}  // namespace

// out (m, N) = x (m, K) · W (K, N) + b (N): float32, contiguous, on the CPU
// = φ(x · W + b) + residual, given an activation `act` (Act) and/or a residual (m, N); then, given gamma
// (and beta), each row's LayerNorm with eps
torch::Tensor gemv(const torch::Tensor& x, const torch::Tensor& W, const c10::optional<torch::Tensor>& b,
                   const c10::optional<torch::Tensor>& out, int64_t act,
                   const c10::optional<torch::Tensor>& residual, const c10::optional<torch::Tensor>& gamma,
                   const c10::optional<torch::Tensor>& beta, double eps) {
  TORCH_CHECK(x.dim() == 2 && W.dim() == 2 && x.size(1) == W.size(0), "gemv: x (m, K) and W (K, N) expected");
  TORCH_CHECK(x.scalar_type() == at::kFloat && W.scalar_type() == at::kFloat, "gemv: float32 only");
  TORCH_CHECK(x.is_contiguous() && W.is_contiguous(), "gemv: contiguous x and W only");
  TORCH_CHECK(x.device().is_cpu() && W.device().is_cpu(), "gemv: CPU tensors only");
  const int64_t m = x.size(0), K = W.size(0), N = W.size(1);
  torch::Tensor y = out.has_value() ? *out : torch::empty({m, N}, W.options());
  TORCH_CHECK(y.sizes() == torch::IntArrayRef({m, N}) && y.is_contiguous() && y.scalar_type() == at::kFloat,
              "gemv: out must be a contiguous float32 (m, N)");
  const float* bp = nullptr;
  if (b.has_value()) {
    TORCH_CHECK(b->dim() == 1 && b->size(0) == N && b->scalar_type() == at::kFloat && b->is_contiguous(),
                "gemv: b (N,) expected");
    bp = b->data_ptr<float>();
  }
  TORCH_CHECK(act >= kNone && act <= kSilu, "gemv: act must be 0 (none), 1 (relu), 2 (gelu), 3 (gelu_tanh) or 4 (silu)");
  const float* rp = nullptr;
  if (residual.has_value()) {
    TORCH_CHECK(residual->sizes() == torch::IntArrayRef({m, N}) && residual->is_contiguous() &&
                    residual->scalar_type() == at::kFloat,
                "gemv: residual must be a contiguous float32 (m, N)");
    rp = residual->data_ptr<float>();
  }
  const float* gp = nullptr;  // LayerNorm over each output row, last (then beta, optional)
  const float* betap = nullptr;
  for (const auto* t : {&gamma, &beta}) {
    if (t->has_value()) {
      TORCH_CHECK((*t)->dim() == 1 && (*t)->size(0) == N && (*t)->is_contiguous() && (*t)->scalar_type() == at::kFloat,
                  "gemv: gamma and beta must be contiguous float32 (N,)");
    }
  }
  TORCH_CHECK(gamma.has_value() || !beta.has_value(), "gemv: beta without gamma");
  if (gamma.has_value()) gp = gamma->data_ptr<float>();
  if (beta.has_value()) betap = beta->data_ptr<float>();
  const float* xp = x.data_ptr<float>();
  const float* Wp = W.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  // y is written before x and the residual are last read: neither may share its memory
  TORCH_CHECK(!(xp < yp + m * N && yp < xp + m * K) && !(rp && rp < yp + m * N && yp < rp + m * N),
              "gemv: out must not overlap x or the residual");
  // y starts at b (or 0): plain loops, not ATen calls, which cost microseconds each at these sizes
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < N; ++j) yp[r * N + j] = bp ? bp[j] : 0.f;
  const int64_t threads = at::get_num_threads();
  const int64_t groups = (K + R - 1) / R;  // threads split W's rows in groups of R
  if (threads == 1 || m * K * N < (1 << 15) || groups < 2) {  // small: waking a thread costs more
    rows(xp, Wp, yp, m, K, N, 0, K);
    finish(yp, rp, m, N, act, gp, betap, eps);
    return y;
  }
  // each thread streams one contiguous stretch of W's rows into its own partial sums, added after
  std::vector<float> partial(threads * m * N, 0.f);
  float* pp = partial.data();
  at::parallel_for(0, groups, 1, [&](int64_t g0, int64_t g1) {
    rows(xp, Wp, pp + at::get_thread_num() * m * N, m, K, N, R * g0, std::min(R * g1, K));
  });
  for (int64_t t = 0; t < threads; ++t)
    for (int64_t k = 0; k < m * N; ++k) yp[k] += pp[t * m * N + k];
  finish(yp, rp, m, N, act, gp, betap, eps);
  return y;
}

// attend.cpp: the decode step's attention over the cache or the memory, in the same extension
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t length,
                     double scale, const c10::optional<torch::Tensor>& bias,
                     const c10::optional<torch::Tensor>& new_k, const c10::optional<torch::Tensor>& new_v);

// fused.cpp: the training step's RMSNorm, SwiGLU and rotary rotation, in the same extension
std::vector<torch::Tensor> rms_norm_forward(const torch::Tensor& x, const torch::Tensor& gamma, double eps);
std::vector<torch::Tensor> rms_norm_backward(const torch::Tensor& dy, const torch::Tensor& x,
                                             const torch::Tensor& rstd, const torch::Tensor& gamma);
torch::Tensor swiglu_forward(const torch::Tensor& gate, const torch::Tensor& pre);
std::vector<torch::Tensor> swiglu_backward(const torch::Tensor& d_act, const torch::Tensor& gate,
                                           const torch::Tensor& pre);
torch::Tensor rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, double sign);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, module) {
  module.def("rms_norm_forward", &rms_norm_forward, "(y, rstd): y = gamma · x / √(mean(x²) + eps) per row");
  module.def("rms_norm_backward", &rms_norm_backward, "(dx, dgamma) of rms_norm_forward");
  module.def("swiglu_forward", &swiglu_forward, "SiLU(gate) ⊙ pre");
  module.def("swiglu_backward", &swiglu_backward, "(d_gate, d_pre) of swiglu_forward");
  module.def("rotary", &rotary, "x (B, H, S, d) turned pairwise by cos, sin (sign −1: the other way)");
  module.def("attend", &attend, "z (B, M, H, d) = softmax(q·Kᵀ·scale + bias)·V over the first `length` keys",
             pybind11::arg("q"), pybind11::arg("k"), pybind11::arg("v"), pybind11::arg("length"),
             pybind11::arg("scale"), pybind11::arg("bias") = pybind11::none(),
             pybind11::arg("new_k") = pybind11::none(), pybind11::arg("new_v") = pybind11::none());
  module.def("gemv", &gemv, "out (m, N) = LayerNorm(φ(x (m, K) · W (K, N) + b) + residual), reading W once",
             pybind11::arg("x"), pybind11::arg("W"), pybind11::arg("b") = pybind11::none(),
             pybind11::arg("out") = pybind11::none(), pybind11::arg("act") = 0,
             pybind11::arg("residual") = pybind11::none(), pybind11::arg("gamma") = pybind11::none(),
             pybind11::arg("beta") = pybind11::none(), pybind11::arg("eps") = 1e-5);
}
