#include "bench/metrics.h"

#include <algorithm>
#include <cmath>

namespace mk::bench {

namespace {

const double kFastPs[] = {0.5, 1.0, 2.0};

std::string p_key(double p) { return p == 0.5 ? "0.5" : std::to_string(static_cast<int>(p)); }

double geomean(const std::vector<double>& xs) {
  if (xs.empty()) return 0;
  double s = 0;
  for (double x : xs) s += std::log(x);
  return std::exp(s / static_cast<double>(xs.size()));
}

// The state of a problem after `calls` calls: the last timeline point at or
// before it (nothing correct before the first point).
run::TimelinePoint state_at(const run::Outcome& o, int64_t calls) {
  run::TimelinePoint st;
  for (const auto& tp : o.timeline) {
    if (tp.calls > calls) break;
    st = tp;
  }
  st.calls = calls;
  return st;
}

}  // namespace

double fast_p(const std::vector<run::Outcome>& outcomes, double p, bool vs_eager) {
  if (outcomes.empty()) return 0;
  int n = 0;
  // An unknown speedup (no baseline) is never "faster than p".
  for (const auto& o : outcomes)
    if (o.correct && (vs_eager ? o.speedup_eager : o.speedup_compile).value_or(0) > p) ++n;
  return static_cast<double>(n) / static_cast<double>(outcomes.size());
}

MethodMetrics compute_metrics(const std::string& method, const std::vector<run::Outcome>& outcomes) {
  MethodMetrics m;
  m.method = method;
  m.problems = static_cast<int>(outcomes.size());
  if (outcomes.empty()) return m;
  std::vector<double> sc, se;
  int correct = 0;
  for (const auto& o : outcomes) {
    m.total_tokens += o.tokens;
    if (o.uses_pytorch) ++m.with_pytorch;
    if (o.status != "finished") ++m.failed_runs;
    if (o.test_mode) ++m.test_mode;
    if (!o.correct) continue;
    ++correct;
    // Unknown stays out of the geomeans (and is counted, so the report can say why).
    if (o.speedup_compile) sc.push_back(*o.speedup_compile);
    else ++m.no_compile_baseline;
    if (o.speedup_eager) se.push_back(*o.speedup_eager);
    else ++m.no_eager_baseline;
  }
  m.correct = static_cast<double>(correct) / m.problems;
  for (double p : kFastPs) {
    m.fast_compile[p_key(p)] = fast_p(outcomes, p, false);
    m.fast_eager[p_key(p)] = fast_p(outcomes, p, true);
  }
  if (!sc.empty()) m.geomean_compile = geomean(sc);
  if (!se.empty()) m.geomean_eager = geomean(se);
  m.mean_tokens = static_cast<double>(m.total_tokens) / m.problems;
  return m;
}

WinRate compute_win_rate(const std::map<std::string, std::vector<run::Outcome>>& by_method) {
  WinRate w;
  for (const auto& [m, _] : by_method) w.methods.push_back(m);
  size_t n = w.methods.size();
  w.rate.assign(n, std::vector<double>(n, 0));
  w.shared.assign(n, std::vector<int>(n, 0));
  // Incorrect counts as 0; a correct kernel without a torch.compile baseline
  // has no speedup to compare, so its problem is left out of that pair.
  std::vector<std::map<std::string, double>> speed(n);
  for (size_t i = 0; i < n; ++i)
    for (const auto& o : by_method.at(w.methods[i]))
      if (!o.correct || o.speedup_compile) speed[i][o.problem_id] = o.correct ? *o.speedup_compile : 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      int both = 0, wins = 0;
      for (const auto& [pid, si] : speed[i]) {
        auto it = speed[j].find(pid);
        if (it == speed[j].end()) continue;
        ++both;
        if (si > it->second) ++wins;
      }
      w.shared[i][j] = both;
      w.rate[i][j] = both ? static_cast<double>(wins) / both : 0;
    }
  }
  return w;
}

std::vector<CurvePoint> compute_curve(const std::vector<run::Outcome>& outcomes, int64_t step) {
  std::vector<CurvePoint> curve;
  if (outcomes.empty() || step <= 0) return curve;
  int64_t max_calls = 0;
  for (const auto& o : outcomes)
    for (const auto& tp : o.timeline) max_calls = std::max(max_calls, tp.calls);
  for (int64_t c = step; c < max_calls + step; c += step) {
    int64_t at = std::min(c, max_calls);
    std::vector<run::Outcome> snap;
    double tokens = 0;
    for (const auto& o : outcomes) {
      run::TimelinePoint st = state_at(o, at);
      run::Outcome s;
      s.correct = st.correct;
      s.speedup_compile = st.speedup_compile;
      s.speedup_eager = st.speedup_eager;
      snap.push_back(s);
      tokens += static_cast<double>(st.tokens);
    }
    CurvePoint cp;
    cp.calls = at;
    cp.mean_tokens = tokens / static_cast<double>(outcomes.size());
    cp.correct = 0;
    for (const auto& x : snap) cp.correct += x.correct ? 1.0 : 0.0;
    cp.correct /= static_cast<double>(snap.size());
    cp.fast_0_5 = fast_p(snap, 0.5, false);
    cp.fast_1 = fast_p(snap, 1.0, false);
    cp.fast_2 = fast_p(snap, 2.0, false);
    curve.push_back(cp);
    if (at == max_calls) break;
  }
  return curve;
}

}  // namespace mk::bench
