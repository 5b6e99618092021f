// The Verdict: one evaluation's result, with ONE JSON form (schema kVerdictSchema).
// The worker's answer (protocol.cc), the verdict cache (cache.cc) and
// `mkevolve eval --json` all read or write this form; docs/EVAL.md lists its
// fields. A field this build does not know (the worker's checks, a newer
// writer's) is kept in `raw` and written back at the top level.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "records/fields.h"
#include "records/worker_checks.h"
#include "util/result.h"

namespace mk::eval {

/// Coarse outcome, as printed by `mkevolve eval --json`.
/// kNoVerdict: the harness (the reference side, or memory on the machine), not
/// the candidate, failed even after retries: no verdict on the candidate, no
/// reward, never fed back to an LLM as the candidate's failure.
enum class VerdictStatus { kCorrect, kIncorrect, kCheating, kCompileError, kRuntimeError, kTimeout, kCrashed, kNoVerdict };
const char* to_string(VerdictStatus s);
std::optional<VerdictStatus> status_from_string(const std::string& s);

struct Timing {
  double median_ms = 0;
  double mean_ms = 0;
  bool valid = false;
};

/// A timing as the worker writes it: a number (the median), or an object with
/// median/mean or median_ms/mean_ms. Anything else is invalid.
Timing parse_timing(const nlohmann::json& j);

/// The schema version of the Verdict's JSON form ("v"). A form without "v" is
/// the worker's answer (protocol v1), read as version 1.
inline constexpr int kVerdictSchema = 1;

}  // namespace mk::eval

namespace mk::records {
/// A status is written as its name.
template <>
struct ValueCodec<eval::VerdictStatus> {
  static nlohmann::json encode(eval::VerdictStatus s) { return eval::to_string(s); }
  static bool decode(const nlohmann::json& j, eval::VerdictStatus& s) {
    auto st = j.is_string() ? eval::status_from_string(j.get<std::string>()) : std::nullopt;
    if (st) s = *st;
    return st.has_value();
  }
  static bool is_set(eval::VerdictStatus) { return true; }
};
/// A timing is written as its median (null when not measured), and read
/// however the worker writes it (parse_timing).
template <>
struct ValueCodec<eval::Timing> {
  static nlohmann::json encode(const eval::Timing& t) { return t.valid ? nlohmann::json(t.median_ms) : nlohmann::json(nullptr); }
  static bool decode(const nlohmann::json& j, eval::Timing& t) {
    t = eval::parse_timing(j);
    return true;
  }
  static bool is_set(const eval::Timing& t) { return t.valid; }
};
}  // namespace mk::records

namespace mk::eval {

struct Verdict {
  VerdictStatus status = VerdictStatus::kCrashed;
  std::string kind;                   ///< fine-grained: syntax_error, import_error, triton_compile_error,
                                      ///< illegal_memory_access, device_assert, segfault, hang, oom,
                                      ///< exit_without_result, wrong_shape, wrong_dtype, nan, mismatch, ...
  std::vector<std::string> reasons;   ///< one line each, e.g. "kernel.py:12: torch-compute: torch.matmul"
  std::string feedback;               ///< concise text an LLM can act on (trimmed traceback, first mismatch)
  Timing runtime;
  Timing eager, compiled;             ///< baselines on the same GPU
  Timing compiled_tf32;               ///< --baseline-tf32: torch.compile with TF32 on (not valid otherwise)
  double speedup_eager = 0;           ///< eager / candidate (0 unless correct)
  double speedup_compile = 0;         ///< torch.compile / candidate (0 unless correct): the reward
  double speedup_compile_tf32 = 0;    ///< torch.compile with TF32 on / candidate (0 unless correct and measured)
  std::optional<double> max_abs_err;  ///< only when the outputs were compared
  bool uses_pytorch = false;          ///< passed only under the allow_pytorch policy
  int gpu = -1;
  bool cached = false;
  double queued_s = 0;                ///< pool: waited this long for a slot (0 when not measured)
  double eval_s = 0;                  ///< pool: the evaluation itself took this long (0 when not measured)
  double baseline_s = 0;              ///< pool: of eval_s, measuring (or waiting for) the problem's baselines
  double server_start_s = 0;          ///< pool: of eval_s, starting the slot's worker server (0: it was up)
  /// Every field of the JSON form that the members above do not hold: the
  /// worker's checks, baseline_error, harness_retries, subkernel_runtime_ms, ...
  /// and a newer writer's fields. An object (null only when nothing was read).
  nlohmann::json raw = nlohmann::json::object();
  int v = kVerdictSchema;             ///< the schema version it was read in (written: kVerdictSchema)

  bool correct() const { return status == VerdictStatus::kCorrect; }

  /// The JSON form's one table. What it cannot say, to_json and from_json
  /// add (verdict.cc): "v", runtime_mean_ms beside runtime_ms, the
  /// compile_tf32 speedup only where its baseline was measured, the pool's
  /// clocks only where measured, reasons given as {file, line, rule,
  /// message} objects, and the older dialects (a worker's "feedback", an
  /// older build's flat summary).
  static constexpr auto fields() {
    using records::field, records::When;
    return std::tuple{field("status", &Verdict::status),
                      field("kind", &Verdict::kind),
                      field("reasons", &Verdict::reasons),
                      field("message", &Verdict::feedback),
                      field("runtime_ms", &Verdict::runtime),
                      field("baseline_ms/eager", &Verdict::eager),
                      field("baseline_ms/compile", &Verdict::compiled),
                      field("baseline_ms/compile_tf32", &Verdict::compiled_tf32, When::kIfSet),
                      field("speedup/eager", &Verdict::speedup_eager, When::kPositive),
                      field("speedup/compile", &Verdict::speedup_compile, When::kPositive),
                      field("speedup/compile_tf32", &Verdict::speedup_compile_tf32, When::kPositive),
                      field("max_abs_err", &Verdict::max_abs_err),
                      field("uses_pytorch", &Verdict::uses_pytorch),
                      field("cached", &Verdict::cached),
                      field("gpu", &Verdict::gpu),
                      field("queued_s", &Verdict::queued_s),
                      field("eval_s", &Verdict::eval_s),
                      field("baseline_s", &Verdict::baseline_s),
                      field("server_start_s", &Verdict::server_start_s)};
  }
  /// Zeroes the pool's clocks (queued_s, eval_s, baseline_s, server_start_s,
  /// and the server's account of its start, checks.server_startup_s): they
  /// belong to the evaluation that measured them, not to a copy of its verdict.
  void clear_pool_clocks();

  /// The worker's checks (raw's "checks": work, runtime kernels, correctness,
  /// phases, footprint, shapes, ...), an empty object when it has none.
  const nlohmann::json& checks() const;
  /// The same, for the pool's own additions (admission, baselines' clocks):
  /// made an object first when it is none.
  nlohmann::json& mutable_checks();
  /// The parts of checks() this build reads, typed.
  records::WorkerChecks worker_checks() const { return records::WorkerChecks::from_json(checks()); }

  /// The one JSON form: status, kind, reasons, message, runtime_ms,
  /// runtime_mean_ms, baseline_ms {eager, compile[, compile_tf32]}, speedup {eager,
  /// compile[, compile_tf32]} (compile_tf32 only when --baseline-tf32 measured it),
  /// max_abs_err, uses_pytorch, cached, gpu, v; queued_s, eval_s, baseline_s,
  /// server_start_s when measured; then raw's fields. Unknown values are null, never 0.
  nlohmann::json to_json() const;
  /// Reads the JSON form or a worker's result body (runtime_ms may then be an
  /// object {median, mean}; "feedback" is read where "message" is missing).
  /// Never throws: an error when j is not an object or has no known status.
  static Result<Verdict> from_json(const nlohmann::json& j);
};

/// The verdict as records embed it (a candidate's result, the solution
/// manifest, swap events): its JSON form without raw (the worker's checks)
/// and without the pool's wall-clock times (clear_pool_clocks),
/// so that a resumed or replayed run writes the same records. The one
/// trimmed form: the search, `mkevolve swap` and the manifest all use it.
nlohmann::json summary_json(Verdict r);

/// The verdict's table, as a test holds the worker's (mkevolve_worker.verdict)
/// against it: the top-level keys read into the typed members above, and the
/// worker's keys kept in `raw` on purpose. A key the worker writes that is in
/// neither is a field nobody decided about.
std::vector<std::string> verdict_typed_keys();
std::vector<std::string> verdict_worker_raw_keys();

/// One reason line from a string or a {file, line, rule, message} object.
std::string reason_line(const nlohmann::json& j);

}  // namespace mk::eval
