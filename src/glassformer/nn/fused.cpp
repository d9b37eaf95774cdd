// The training step's elementwise work in single passes: RMSNorm, SwiGLU and the rotary rotation,
// forward and backward (nn/fused.py; issue 32 §3). Part of the same extension as gemv.cpp.
//
// With LLaMA's block (the auto LM since stop 61) a third of a d_model-128 step's time went to
// elementwise operators, and most of that to moving memory: each operator reads its operands from
// memory and writes a new tensor (SwiGLU's product and its gradients alone are three passes over
// (tokens, d_ff) tensors forward and five backward, each 4 MB at the recipe's LM), and autograd's
// composite RMSNorm is eleven operators. Each function here reads its inputs once and writes its
// outputs once, with the formulas of the explicit math (nn/norms.py, nn/feedforward.py,
// nn/positional.py), whose autograd is the reference the tests hold these to (float32 rounding).

#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

namespace {

using Vec = at::vec::Vectorized<float>;

constexpr int64_t kGrain = 2048;  // values per thread's chunk below which one thread does it all

inline float sum_sq(const float* x, int64_t d) {
  Vec acc(0.f);
  int64_t j = 0;
  for (; j + Vec::size() <= d; j += Vec::size()) {
    const Vec v = Vec::loadu(x + j);
    acc = at::vec::fmadd(v, v, acc);
  }
  float s = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, acc);
  for (; j < d; ++j) s += x[j] * x[j];
  return s;
}

// σ(g) with ATen's exp_u20 (≤ 20 ULP, the exp of its softmax kernels): SLEEF's exact-to-1-ULP exp made
// the SwiGLU passes bound by arithmetic (1.29 and 1.63 ms a call at the recipe's LM, one thread)
inline Vec sigmoid(const Vec& g) { return Vec(1.f) / (Vec(1.f) + g.neg().exp_u20()); }

void check(const torch::Tensor& t, const char* what) {
  TORCH_CHECK(t.scalar_type() == at::kFloat && t.device().is_cpu() && t.is_contiguous(), what,
              ": a contiguous float32 CPU tensor expected");
}

// bf16 operands (a step under autocast: its products' outputs): read as float, computed in float as the
// float32 kernels compute, each result rounded once to bf16 — where the composite rounds after every operator
using BVec = at::vec::Vectorized<at::BFloat16>;

// kPair values (two float vectors, one bf16 vector) read as float, and written back in the operand's type
constexpr int64_t kPair = 2 * Vec::size();
static_assert(BVec::size() == kPair, "a bf16 vector holds two float vectors' values");

inline void load_pair(const float* p, Vec& lo, Vec& hi) {
  lo = Vec::loadu(p);
  hi = Vec::loadu(p + Vec::size());
}

inline void load_pair(const at::BFloat16* p, Vec& lo, Vec& hi) {
  std::tie(lo, hi) = at::vec::convert_bfloat16_float(BVec::loadu(p));
}

inline void store_pair(float* p, const Vec& lo, const Vec& hi) {
  lo.store(p);
  hi.store(p + Vec::size());
}

inline void store_pair(at::BFloat16* p, const Vec& lo, const Vec& hi) {
  at::vec::convert_float_bfloat16(lo, hi).store(p);
}

inline float to_float(float v) { return v; }
inline float to_float(at::BFloat16 v) { return static_cast<float>(v); }

// Vec::size() values from p as float (a bf16 vector holds twice as many: the first half is read)
inline Vec load_as_float(const float* p) { return Vec::loadu(p); }
inline Vec load_as_float(const at::BFloat16* p) {
  return std::get<0>(at::vec::convert_bfloat16_float(BVec::loadu(p, Vec::size())));
}

void check_pair(const torch::Tensor& a, const torch::Tensor& b, const char* what) {
  TORCH_CHECK((a.scalar_type() == at::kFloat || a.scalar_type() == at::kBFloat16) && a.scalar_type() == b.scalar_type()
              && a.device().is_cpu() && b.device().is_cpu() && a.is_contiguous() && b.is_contiguous()
              && a.sizes() == b.sizes(), what, ": two contiguous CPU tensors of one shape, both float32 or both bf16");
}

}  // namespace

// RMSNorm (seed 000 §5.2's LayerNorm without centring, as LLaMA has it): y = gamma · x · rstd,
// rstd = 1/√(mean(x²) + eps) per row of x (rows, d). Returns (y, rstd): rstd is what backward needs.
std::vector<torch::Tensor> rms_norm_forward(const torch::Tensor& x, const torch::Tensor& gamma, double eps) {
  check(x, "rms_norm x");
  check(gamma, "rms_norm gamma");
  const int64_t d = x.size(-1), rows = x.numel() / d;
  auto y = torch::empty_like(x);
  auto rstd = torch::empty({rows}, x.options());
  const float *xp = x.data_ptr<float>(), *gp = gamma.data_ptr<float>();
  float *yp = y.data_ptr<float>(), *rp = rstd.data_ptr<float>();
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrain / d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = xp + r * d;
      const float s = 1.f / std::sqrt(sum_sq(xr, d) / d + static_cast<float>(eps));
      rp[r] = s;
      float* yr = yp + r * d;
      int64_t j = 0;
      for (; j + Vec::size() <= d; j += Vec::size())
        (Vec::loadu(xr + j) * Vec(s) * Vec::loadu(gp + j)).store(yr + j);
      for (; j < d; ++j) yr[j] = xr[j] * s * gp[j];
    }
  });
  return {y, rstd};
}

// Its gradients, with x̂ = x · rstd and g = dy · gamma:
//   dx = rstd · (g − x̂ · mean(g · x̂)),   dgamma = Σ_rows dy · x̂
// (the centring terms of LayerNorm's backward drop out with the mean). dgamma is summed per thread,
// then across threads.
std::vector<torch::Tensor> rms_norm_backward(const torch::Tensor& dy, const torch::Tensor& x,
                                             const torch::Tensor& rstd, const torch::Tensor& gamma) {
  check(dy, "rms_norm dy");
  check(x, "rms_norm x");
  const int64_t d = x.size(-1), rows = x.numel() / d;
  auto dx = torch::empty_like(x);
  const int64_t threads = at::get_num_threads();
  auto partial = torch::zeros({threads, d}, x.options());
  const float *dyp = dy.data_ptr<float>(), *xp = x.data_ptr<float>(), *rp = rstd.data_ptr<float>();
  const float* gp = gamma.data_ptr<float>();
  float *dxp = dx.data_ptr<float>(), *pp = partial.data_ptr<float>();
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrain / d), [&](int64_t r0, int64_t r1) {
    float* acc = pp + at::get_thread_num() * d;
    for (int64_t r = r0; r < r1; ++r) {
      const float *dyr = dyp + r * d, *xr = xp + r * d;
      const float s = rp[r];
      Vec dot(0.f);
      int64_t j = 0;
      for (; j + Vec::size() <= d; j += Vec::size()) {
        const Vec xhat = Vec::loadu(xr + j) * Vec(s), dyv = Vec::loadu(dyr + j);
        dot = at::vec::fmadd(dyv * Vec::loadu(gp + j), xhat, dot);
        at::vec::fmadd(dyv, xhat, Vec::loadu(acc + j)).store(acc + j);
      }
      float c = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, dot);
      for (; j < d; ++j) {
        const float xhat = xr[j] * s;
        c += dyr[j] * gp[j] * xhat;
        acc[j] += dyr[j] * xhat;
      }
      c /= d;
      float* dxr = dxp + r * d;
      j = 0;
      for (; j + Vec::size() <= d; j += Vec::size()) {
        const Vec xhat = Vec::loadu(xr + j) * Vec(s);
        (Vec(s) * (Vec::loadu(dyr + j) * Vec::loadu(gp + j) - xhat * Vec(c))).store(dxr + j);
      }
      for (; j < d; ++j) dxr[j] = s * (dyr[j] * gp[j] - xr[j] * s * c);
    }
  });
  return {dx, partial.sum(0)};
}

// SwiGLU's product (seed 000 §6 with LLaMA's gate): act = SiLU(gate) ⊙ pre, SiLU(g) = g · σ(g).
template <typename T>
void swiglu_forward_impl(const T* gp, const T* pp, T* ap, int64_t n) {
  at::parallel_for(0, n, kGrain, [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + kPair <= i1; i += kPair) {
      Vec g[2], p[2];
      load_pair(gp + i, g[0], g[1]);
      load_pair(pp + i, p[0], p[1]);
      store_pair(ap + i, g[0] * sigmoid(g[0]) * p[0], g[1] * sigmoid(g[1]) * p[1]);
    }
    for (; i < i1; ++i) {
      const float g = to_float(gp[i]);
      ap[i] = static_cast<T>(g / (1.f + std::exp(-g)) * to_float(pp[i]));
    }
  });
}

torch::Tensor swiglu_forward(const torch::Tensor& gate, const torch::Tensor& pre) {
  check_pair(gate, pre, "swiglu gate and pre");
  auto act = torch::empty_like(pre);
  if (gate.scalar_type() == at::kBFloat16)
    swiglu_forward_impl(gate.data_ptr<at::BFloat16>(), pre.data_ptr<at::BFloat16>(), act.data_ptr<at::BFloat16>(),
                        act.numel());
  else
    swiglu_forward_impl(gate.data_ptr<float>(), pre.data_ptr<float>(), act.data_ptr<float>(), act.numel());
  return act;
}

// Its gradients: d_pre = d_act · SiLU(gate), d_gate = d_act · pre · σ(g) · (1 + g · (1 − σ(g))).
template <typename T>
void swiglu_backward_impl(const T* dp, const T* gp, const T* pp, T* dgp, T* dpp, int64_t n) {
  at::parallel_for(0, n, kGrain, [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + kPair <= i1; i += kPair) {
      Vec g[2], d[2], p[2], d_pre[2], d_gate[2];
      load_pair(gp + i, g[0], g[1]);
      load_pair(dp + i, d[0], d[1]);
      load_pair(pp + i, p[0], p[1]);
      for (int h = 0; h < 2; ++h) {
        const Vec s = sigmoid(g[h]);
        d_pre[h] = d[h] * g[h] * s;
        d_gate[h] = d[h] * p[h] * s * (Vec(1.f) + g[h] * (Vec(1.f) - s));
      }
      store_pair(dpp + i, d_pre[0], d_pre[1]);
      store_pair(dgp + i, d_gate[0], d_gate[1]);
    }
    for (; i < i1; ++i) {
      const float g = to_float(gp[i]), s = 1.f / (1.f + std::exp(-g)), da = to_float(dp[i]);
      dpp[i] = static_cast<T>(da * g * s);
      dgp[i] = static_cast<T>(da * to_float(pp[i]) * s * (1.f + g * (1.f - s)));
    }
  });
}

std::vector<torch::Tensor> swiglu_backward(const torch::Tensor& d_act, const torch::Tensor& gate,
                                           const torch::Tensor& pre) {
  check_pair(d_act, gate, "swiglu d_act and gate");
  auto d_gate = torch::empty_like(gate), d_pre = torch::empty_like(pre);
  if (gate.scalar_type() == at::kBFloat16)
    swiglu_backward_impl(d_act.data_ptr<at::BFloat16>(), gate.data_ptr<at::BFloat16>(), pre.data_ptr<at::BFloat16>(),
                         d_gate.data_ptr<at::BFloat16>(), d_pre.data_ptr<at::BFloat16>(), gate.numel());
  else
    swiglu_backward_impl(d_act.data_ptr<float>(), gate.data_ptr<float>(), pre.data_ptr<float>(),
                         d_gate.data_ptr<float>(), d_pre.data_ptr<float>(), gate.numel());
  return {d_gate, d_pre};
}

// RoPE (seed 000 §3.5 note 2), LLaMA's half-split pairing: each (x_i, x_{i+h}) of a head, h = d/2,
// turned by its angle, out_i = x_i·cos − x_{i+h}·sin, out_{i+h} = x_{i+h}·cos + x_i·sin.
// x (B, H, S, d) with any strides but a contiguous last dimension (Q and K are views of the fused QKV
// product); cos, sin (B or 1, 1, S, d) contiguous, their two halves equal (RotaryEmbedding's layout).
// sign −1 turns the other way: the backward, since the gradient of a rotation is its transpose.
// Returns a contiguous (B, H, S, d).
template <typename T>
void rotate_rows(const T* xp, const float* cp, const float* sp, float* op, int64_t B, int64_t H, int64_t S,
                 int64_t d, int64_t cb, int64_t xb, int64_t xh, int64_t xs, float sg) {
  const int64_t h = d / 2;
  at::parallel_for(0, B * H * S, std::max<int64_t>(1, kGrain / d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / (H * S), hd = (r / S) % H, s = r % S;
      const T* xr = xp + b * xb + hd * xh + s * xs;
      const float *c = cp + b * cb + s * d, *sn = sp + b * cb + s * d;
      float* o = op + r * d;
      int64_t j = 0;
      for (; j + Vec::size() <= h; j += Vec::size()) {
        const Vec x1 = load_as_float(xr + j), x2 = load_as_float(xr + h + j), cv = Vec::loadu(c + j);
        const Vec sv = Vec::loadu(sn + j) * Vec(sg);
        (x1 * cv - x2 * sv).store(o + j);
        (x2 * cv + x1 * sv).store(o + h + j);
      }
      for (; j < h; ++j) {
        const float x1 = to_float(xr[j]), x2 = to_float(xr[h + j]), sv = sn[j] * sg;
        o[j] = x1 * c[j] - x2 * sv;
        o[h + j] = x2 * c[j] + x1 * sv;
      }
    }
  });
}

// x may be bf16 (Q and K of autocast's QKV product): read as float; the result is float32, as the
// composite's x · cos (float32 angles) promotes it
torch::Tensor rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, double sign) {
  TORCH_CHECK(x.dim() == 4 && x.stride(3) == 1 && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16)
              && x.device().is_cpu(),
              "rotary: x must be a float32 or bf16 CPU (B, H, S, d) with a contiguous last dimension");
  check(cos, "rotary cos");
  check(sin, "rotary sin");
  const int64_t B = x.size(0), H = x.size(1), S = x.size(2), d = x.size(3);
  TORCH_CHECK(d % 2 == 0 && cos.dim() == 4 && cos.size(2) == S && cos.size(3) == d && cos.sizes() == sin.sizes()
              && (cos.size(0) == 1 || cos.size(0) == B), "rotary: cos and sin must be (B or 1, 1, S, d)");
  auto out = torch::empty({B, H, S, d}, x.options().dtype(at::kFloat));
  const int64_t cb = cos.size(0) == 1 ? 0 : S * d;
  const float *cp = cos.data_ptr<float>(), *sp = sin.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const float sg = static_cast<float>(sign);
  if (x.scalar_type() == at::kBFloat16)
    rotate_rows(x.data_ptr<at::BFloat16>(), cp, sp, op, B, H, S, d, cb, x.stride(0), x.stride(1), x.stride(2), sg);
  else
    rotate_rows(x.data_ptr<float>(), cp, sp, op, B, H, S, d, cb, x.stride(0), x.stride(1), x.stride(2), sg);
  return out;
}
