// bench/cpu_rnn_probe.cpp: what oneDNN's RNN primitives give on this CPU in FP32 and in bf16 (issue 35
// item 3: bf16 on the CPU where it has AVX512-BF16 or AMX). For one L-layer unidirectional LSTM or GRU
// stack (input = hidden, so oneDNN runs it as one primitive), batch-major, it builds the training
// forward and the backward in each precision, says which bf16 layouts of the gradients oneDNN accepts,
// times a training step (forward + backward, weights and gradients in their primitives' layouts) as
// the median of --repeats loops of --steps, and checks the bf16 outputs and weight gradients against
// FP32's (the largest difference relative to the largest FP32 value). oneDNN's own ISA line
// (ONEDNN_VERBOSE=1) says which kernels ran.
//
//   rnntrain_cpu_rnn_probe [--cell lstm|gru] [--layers 2] [--hidden 256] [--batch 32] [--time 100]
//                          [--steps 10] [--repeats 3]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

namespace {

using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

struct Options {
  bool gru = false;
  int64_t L = 2, H = 256, B = 32, T = 100;
  int steps = 10, repeats = 3;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    const long n = std::strtol(v.c_str(), nullptr, 10);
    if (a == "--cell") o.gru = v == "gru";
    else if (a == "--layers") o.L = n;
    else if (a == "--hidden") o.H = n;
    else if (a == "--batch") o.B = n;
    else if (a == "--time") o.T = n;
    else if (a == "--steps") o.steps = static_cast<int>(n);
    else if (a == "--repeats") o.repeats = static_cast<int>(n);
    else std::fprintf(stderr, "cpu_rnn_probe: unknown argument %s\n", a.c_str()), std::exit(2);
  }
  if (o.L < 1 || o.H < 1 || o.B < 1 || o.T < 1 || o.steps < 1 || o.repeats < 1)
    std::fprintf(stderr, "cpu_rnn_probe: sizes must be positive\n"), std::exit(2);
  return o;
}

// One precision's primitives and buffers; `f` ones are f32 memories the host fills and reads.
struct Run {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream st{eng};
  dnnl::primitive fwd, bwd;
  std::vector<std::pair<int, memory>> fargs, bargs;
  memory dst, dwl, dwi, db;  // outputs to compare
  std::string status;
};

// A memory of layout `want` holding `values`, given in the f32 layout `plain`.
memory filled(const dnnl::engine& eng, dnnl::stream& st, const memory::desc& want, const memory::desc& plain,
              const std::vector<float>& values) {
  memory host(plain, eng), out(want, eng);
  std::memcpy(host.get_data_handle(), values.data(), values.size() * sizeof(float));
  dnnl::reorder(host, out).execute(st, host, out);
  st.wait();
  return out;
}

std::vector<float> read(const dnnl::engine& eng, dnnl::stream& st, const memory& m, const memory::desc& plain_f32) {
  memory host(plain_f32, eng);
  dnnl::reorder(m, host).execute(st, const_cast<memory&>(m), host);
  st.wait();
  const float* p = static_cast<const float*>(host.get_data_handle());
  return std::vector<float>(p, p + plain_f32.get_size() / sizeof(float));
}

// Builds and runs one training step of precision `d` (f32 or bf16), diff layouts in `gd`; false when
// oneDNN refuses the configuration (status says which part).
bool build(Run& r, const Options& o, dt d, dt gd, const std::vector<float>& x, const std::vector<float>& wl,
           const std::vector<float>& wi, const std::vector<float>& bias, const std::vector<float>& dy) {
  const int64_t G = o.gru ? 3 : 4, BG = o.gru ? 4 : 4;
  const memory::dims layer{o.T, o.B, o.H}, wdims{o.L, 1, o.H, G, o.H}, bdims{o.L, 1, o.gru ? BG : G, o.H};
  const memory::desc src(layer, d, tag::ntc), dst(layer, d, tag::ntc), none;
  const memory::desc any_wl(wdims, d, tag::any), any_wi(wdims, d, tag::any), b(bdims, dt::f32, tag::ldgo);
  const memory::desc dsrc(layer, gd, tag::ntc), ddst(layer, gd, tag::ntc);
  const memory::desc dwl(wdims, dt::f32, tag::ldigo), dwi(wdims, dt::f32, tag::ldigo), dbias(bdims, dt::f32, tag::ldgo);
  const auto dir = dnnl::rnn_direction::unidirectional_left2right;
  try {
    memory::desc fwl, fwi, bwl, bwi, ws;
    if (!o.gru) {
      dnnl::lstm_forward::primitive_desc f(
          dnnl::lstm_forward::desc(dnnl::prop_kind::forward_training, dir, src, none, none, any_wl, any_wi, b, dst, none, none),
          r.eng);
      r.status = "backward";
      dnnl::lstm_backward::primitive_desc bk(
          dnnl::lstm_backward::desc(dnnl::prop_kind::backward, dir, src, none, none, any_wl, any_wi, b, dst, none, none,
                                    dsrc, none, none, dwl, dwi, dbias, ddst, none, none),
          r.eng, f);
      r.fwd = dnnl::lstm_forward(f), r.bwd = dnnl::lstm_backward(bk);
      fwl = f.weights_layer_desc(), fwi = f.weights_iter_desc(), ws = f.workspace_desc();
      bwl = bk.weights_layer_desc(), bwi = bk.weights_iter_desc();
    } else {
      dnnl::lbr_gru_forward::primitive_desc f(
          dnnl::lbr_gru_forward::desc(dnnl::prop_kind::forward_training, dir, src, none, any_wl, any_wi, b, dst, none), r.eng);
      r.status = "backward";
      dnnl::lbr_gru_backward::primitive_desc bk(
          dnnl::lbr_gru_backward::desc(dnnl::prop_kind::backward, dir, src, none, any_wl, any_wi, b, dst, none, dsrc, none,
                                       dwl, dwi, dbias, ddst, none),
          r.eng, f);
      r.fwd = dnnl::lbr_gru_forward(f), r.bwd = dnnl::lbr_gru_backward(bk);
      fwl = f.weights_layer_desc(), fwi = f.weights_iter_desc(), ws = f.workspace_desc();
      bwl = bk.weights_layer_desc(), bwi = bk.weights_iter_desc();
    }
    r.status = "ok";
    const memory::desc plain_w(wdims, dt::f32, tag::ldigo), plain_b(bdims, dt::f32, tag::ldgo);
    memory mx = filled(r.eng, r.st, src, memory::desc(layer, dt::f32, tag::ntc), x);
    memory mwl = filled(r.eng, r.st, fwl, plain_w, wl), mwi = filled(r.eng, r.st, fwi, plain_w, wi);
    memory mbwl = filled(r.eng, r.st, bwl, plain_w, wl), mbwi = filled(r.eng, r.st, bwi, plain_w, wi);
    memory mb = filled(r.eng, r.st, b, plain_b, bias);
    memory mdy = filled(r.eng, r.st, ddst, memory::desc(layer, dt::f32, tag::ntc), dy);
    r.dst = memory(dst, r.eng);
    memory mws(ws, r.eng), mdx(dsrc, r.eng);
    r.dwl = memory(dwl, r.eng), r.dwi = memory(dwi, r.eng), r.db = memory(dbias, r.eng);
    r.fargs = {{DNNL_ARG_SRC_LAYER, mx}, {DNNL_ARG_WEIGHTS_LAYER, mwl}, {DNNL_ARG_WEIGHTS_ITER, mwi},
               {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST_LAYER, r.dst}, {DNNL_ARG_WORKSPACE, mws}};
    r.bargs = {{DNNL_ARG_SRC_LAYER, mx}, {DNNL_ARG_WEIGHTS_LAYER, mbwl}, {DNNL_ARG_WEIGHTS_ITER, mbwi},
               {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST_LAYER, r.dst}, {DNNL_ARG_WORKSPACE, mws},
               {DNNL_ARG_DIFF_DST_LAYER, mdy}, {DNNL_ARG_DIFF_SRC_LAYER, mdx}, {DNNL_ARG_DIFF_WEIGHTS_LAYER, r.dwl},
               {DNNL_ARG_DIFF_WEIGHTS_ITER, r.dwi}, {DNNL_ARG_DIFF_BIAS, r.db}};
    return true;
  } catch (const dnnl::error& e) {
    r.status += std::string(" refused: ") + e.what();
    return false;
  }
}

double step_ms(Run& r, const Options& o) {
  auto once = [&] {
    std::memset(r.dwl.get_data_handle(), 0, r.dwl.get_desc().get_size());
    std::memset(r.dwi.get_data_handle(), 0, r.dwi.get_desc().get_size());
    std::memset(r.db.get_data_handle(), 0, r.db.get_desc().get_size());
    std::unordered_map<int, memory> fa(r.fargs.begin(), r.fargs.end()), ba(r.bargs.begin(), r.bargs.end());
    r.fwd.execute(r.st, fa);
    r.bwd.execute(r.st, ba);
    r.st.wait();
  };
  once();
  std::vector<double> ms;
  for (int k = 0; k < o.repeats; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.steps; ++i) once();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / o.steps);
  }
  std::sort(ms.begin(), ms.end());
  once();  // the compared outputs: one step from zeroed gradients
  return ms[ms.size() / 2];
}

double rel_diff(const std::vector<float>& a, const std::vector<float>& ref) {
  double d = 0.0, m = 0.0;
  for (size_t i = 0; i < a.size() && i < ref.size(); ++i) {
    d = std::max(d, static_cast<double>(std::fabs(a[i] - ref[i])));
    m = std::max(m, static_cast<double>(std::fabs(ref[i])));
  }
  return m > 0 ? d / m : d;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const int64_t G = o.gru ? 3 : 4, BG = o.gru ? 4 : G;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-0.1f, 0.1f), ux(-1.0f, 1.0f);
  auto fill = [&](int64_t n, auto& dist) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = dist(rng);
    return v;
  };
  const std::vector<float> x = fill(o.T * o.B * o.H, ux), wl = fill(o.L * o.H * G * o.H, u),
                           wi = fill(o.L * o.H * G * o.H, u), bias = fill(o.L * BG * o.H, u), dy = fill(o.T * o.B * o.H, ux);
  std::printf("cpu_rnn_probe: %s, %lld layers of %lld, batch %lld, %lld steps; %d OpenMP threads; oneDNN %d.%d.%d\n",
              o.gru ? "GRU" : "LSTM", static_cast<long long>(o.L), static_cast<long long>(o.H),
              static_cast<long long>(o.B), static_cast<long long>(o.T), omp_get_max_threads(), dnnl_version()->major,
              dnnl_version()->minor, dnnl_version()->patch);
  const memory::dims layer{o.T, o.B, o.H}, wdims{o.L, 1, o.H, G, o.H};
  const memory::desc plain_y(layer, dt::f32, tag::ntc), plain_w(wdims, dt::f32, tag::ldigo);
  Run ref;
  if (!build(ref, o, dt::f32, dt::f32, x, wl, wi, bias, dy)) {
    std::printf("f32: %s\n", ref.status.c_str());
    return 1;
  }
  const double ms32 = step_ms(ref, o);
  std::printf("f32: %.3f ms per training step\n", ms32);
  const std::vector<float> y32 = read(ref.eng, ref.st, ref.dst, plain_y), g32 = read(ref.eng, ref.st, ref.dwi, plain_w);
  for (dt gd : {dt::bf16, dt::f32}) {
    Run r;
    const char* how = gd == dt::bf16 ? "bf16, gradients of the activations bf16" : "bf16, gradients of the activations f32";
    if (!build(r, o, dt::bf16, gd, x, wl, wi, bias, dy)) {
      std::printf("%s: %s\n", how, r.status.c_str());
      continue;
    }
    const double ms = step_ms(r, o);
    const double ey = rel_diff(read(r.eng, r.st, r.dst, plain_y), y32), eg = rel_diff(read(r.eng, r.st, r.dwi, plain_w), g32);
    std::printf("%s: %.3f ms per training step (%.2fx f32); outputs differ from f32's by %.2g, recurrent weight "
                "gradients by %.2g (relative to the largest)\n", how, ms, ms32 / ms, ey, eg);
  }
  return 0;
}
