// The search's options as config.json keeps them (to_json, options_from_json),
// and the kernel prompts' sentence on how outputs are judged.
#include <fmt/format.h>

#include "search/search.h"

namespace mk::search {

nlohmann::json to_json(const SearchOptions& o) {
  return {{"method", o.method},
          {"iterations", o.iterations},
          {"refine_every", o.refine_every},
          {"calls_per_iter", o.calls_per_iter},
          {"beam_width", o.beam_width},
          {"expansion", o.expansion},
          {"fuse", o.fuse},
          {"allocate", o.allocate},
          {"swap_tau", o.swap_tau ? nlohmann::json(*o.swap_tau) : nlohmann::json(nullptr)},
          {"swap_with", o.swap_with},
          {"postfuse", o.postfuse},
          {"decompose_workers", o.decompose_workers},
          {"decompose_attempts", o.decompose_attempts},
          {"refine_attempts", o.refine_attempts},
          {"max_tokens", o.max_tokens},
          {"reasoning_effort", o.reasoning_effort},
          {"judge_failure", o.judge_failure},
          {"reuse", o.reuse ? o.reuse->to_json() : nlohmann::json(nullptr)},
          {"total_budget", o.total_budget()},
          {"eval",
           {{"trials", o.eval.trials},
            {"perf_trials", o.eval.perf_trials},
            {"warmup", o.eval.warmup},
            {"atol", o.eval.atol ? nlohmann::json(*o.eval.atol) : nlohmann::json(nullptr)},
            {"rtol", o.eval.rtol ? nlohmann::json(*o.eval.rtol) : nlohmann::json(nullptr)},
            {"pass_rate", o.eval.pass_rate ? nlohmann::json(*o.eval.pass_rate) : nlohmann::json(nullptr)},
            {"trials_dist", o.eval.trials_dist},
            {"shapes", o.eval.shapes},
            {"tolerance", o.eval.tolerance},
            {"calibration_runs", o.eval.calibration_runs},
            {"timeout_s", o.eval.timeout_s},
            {"seed", o.eval.seed},
            {"test_cpu", o.eval.test_cpu},
            {"timing", o.eval.timing},
            {"compile_timeout_s", o.eval.compile_timeout_s},
            {"gpu", o.eval.gpu}}}};
}

std::string correctness_fact(const eval::EvalOptions& o) {
  std::string s = "Correctness: every output element within atol + rtol * |expected| of the reference";
  if (o.tolerance != "default") {
    s += ", at each output's own calibrated atol with rtol = 0: the largest error of the reference in its own "
         "precision against a float64 run of it over many input draws, plus 3 standard deviations (at least one "
         "unit in the last place of the output's dtype). A kernel that accumulates in float32 and rounds once "
         "passes; one that accumulates in a lower precision, or changes the arithmetic, usually does not";
  } else if (o.atol && o.rtol) {
    s += fmt::format(", atol = {:.3g}, rtol = {:.3g} for every output dtype", *o.atol, *o.rtol);
  } else {
    s += ", by output dtype unless the problem file declares MKEVOLVE_TOLERANCE: float32 atol = rtol = 1e-4; "
         "float16 and bfloat16 atol = rtol = 1e-2; float8 atol = 0.1, rtol = 0.2 with 85% of elements within";
    if (o.atol) s += fmt::format(" (atol = {:.3g} for every dtype)", *o.atol);
    if (o.rtol) s += fmt::format(" (rtol = {:.3g} for every dtype)", *o.rtol);
  }
  if (o.pass_rate)
    s += fmt::format("; at least {:g}% of each output's elements must be within it", *o.pass_rate * 100);
  s += ". The output's dtype must be the reference's; a NaN or inf where the reference is finite always fails";
  return s;
}

Result<SearchOptions> options_from_json(const nlohmann::json& j) {
  try {
    SearchOptions o;
    o.method = j.value("method", o.method);
    o.iterations = j.value("iterations", o.iterations);
    o.refine_every = j.value("refine_every", o.refine_every);
    o.calls_per_iter = j.value("calls_per_iter", o.calls_per_iter);
    o.beam_width = j.value("beam_width", o.beam_width);
    o.expansion = j.value("expansion", o.expansion);
    o.fuse = j.value("fuse", o.fuse);
    o.allocate = j.value("allocate", std::string("runtime"));  // runs before the option: the paper's rule
    if (j.contains("swap_tau") && j["swap_tau"].is_number()) o.swap_tau = j["swap_tau"].get<double>();
    if (j.contains("swap_with") && j["swap_with"].is_object())
      o.swap_with = j["swap_with"].get<std::map<std::string, std::string>>();
    o.postfuse = j.value("postfuse", o.postfuse);
    o.decompose_workers = j.value("decompose_workers", o.decompose_workers);
    o.decompose_attempts = j.value("decompose_attempts", o.decompose_attempts);
    o.refine_attempts = j.value("refine_attempts", o.refine_attempts);
    o.max_tokens = j.value("max_tokens", o.max_tokens);
    o.reasoning_effort = j.value("reasoning_effort", o.reasoning_effort);
    o.judge_failure = j.value("judge_failure", o.judge_failure);
    if (j.contains("reuse") && j["reuse"].is_object()) {
      auto r = EarlierRun::from_json(j["reuse"]);
      if (!r) return Error{"run options: " + r.error()};
      o.reuse = std::move(*r);
    }
    if (j.contains("eval")) {
      const auto& e = j["eval"];
      o.eval.trials = e.value("trials", o.eval.trials);
      o.eval.perf_trials = e.value("perf_trials", o.eval.perf_trials);
      o.eval.warmup = e.value("warmup", o.eval.warmup);
      // null (or absent): by the output's dtype; a run recorded before
      // dtype defaults has its numbers, and keeps them.
      auto opt = [&](const char* k) -> std::optional<double> {
        if (e.contains(k) && e[k].is_number()) return e[k].get<double>();
        return std::nullopt;
      };
      o.eval.atol = opt("atol");
      o.eval.rtol = opt("rtol");
      o.eval.pass_rate = opt("pass_rate");
      // A run recorded before the scaled trials had none, and keeps none.
      o.eval.trials_dist = e.value("trials_dist", std::string("none"));
      o.eval.tolerance = e.value("tolerance", std::string("default"));
      // A run recorded before --shapes verified only the benchmark's shapes, and keeps to them.
      o.eval.shapes = e.value("shapes", std::string("benchmark"));
      o.eval.calibration_runs = e.value("calibration_runs", o.eval.calibration_runs);
      o.eval.timeout_s = e.value("timeout_s", o.eval.timeout_s);
      o.eval.seed = e.value("seed", o.eval.seed);
      o.eval.test_cpu = e.value("test_cpu", o.eval.test_cpu);
      o.eval.gpu = e.value("gpu", o.eval.gpu);
      o.eval.timing = e.value("timing", o.eval.timing);
      o.eval.compile_timeout_s = e.value("compile_timeout_s", o.eval.compile_timeout_s);
    }
    return o;
  } catch (const std::exception& e) {
    return Error{std::string("run options: ") + e.what()};
  }
}

}  // namespace mk::search
