// What the worker's `checks` object in a verdict holds (the part of raw the
// C++ side reads), as typed members: read through Verdict::worker_checks()
// instead of by key at each reader. The worker writes it (evaluate.py);
// nothing on the C++ side writes it back except the pool's own additions
// (admission, the baselines' clocks), which go through Verdict::mutable_checks().
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "records/fields.h"

namespace mk::records {

/// The bound each output was held to (--atol/--rtol), for the debug prompt.
struct CorrectnessCheck {
  std::optional<double> atol{}, rtol{};
  static constexpr auto fields() {
    return std::tuple{field("atol", &CorrectnessCheck::atol), field("rtol", &CorrectnessCheck::rtol)};
  }
};

/// The memory one evaluation held, measured while it ran (admission's input).
struct FootprintCheck {
  double host_peak_bytes = 0, device_peak_bytes = 0, input_bytes = 0, output_bytes = 0;
  double reference_s = 0;  ///< what the reference itself took on the same input
  /// The rule device_peak_bytes was measured by (worker footprint.DEVICE_RULE_VERSION):
  /// 2, the processes' peaks summed over the phase that held the most; 1 (a
  /// worker without the field), every process's peak summed.
  int device_rule_version = 1;
  bool device_complete = false;  ///< every phase of the evaluation was seen (rule 2)
  static constexpr auto fields() {
    return std::tuple{field("host_peak_bytes", &FootprintCheck::host_peak_bytes),
                      field("device_peak_bytes", &FootprintCheck::device_peak_bytes),
                      field("input_bytes", &FootprintCheck::input_bytes),
                      field("output_bytes", &FootprintCheck::output_bytes),
                      field("reference_s", &FootprintCheck::reference_s),
                      field("device_rule_version", &FootprintCheck::device_rule_version),
                      field("device_complete", &FootprintCheck::device_complete)};
  }
};

struct WorkerChecks {
  std::optional<CorrectnessCheck> correctness{};
  std::optional<FootprintCheck> footprint{};
  nlohmann::json phases_s{};  ///< where the evaluation's time went, by phase (candidate records only)
  // The work record, runtime kernels and ncu counters are read by the
  // roofline's own typed parsers (eval/roofline.h), the shape variants by
  // eval::ShapesRecord: they are not copied here.
  static constexpr auto fields() {
    return std::tuple{field("correctness", &WorkerChecks::correctness),
                      field("footprint", &WorkerChecks::footprint),
                      field("phases_s", &WorkerChecks::phases_s, When::kIfSet)};
  }
  /// Tolerant: what is missing or mistyped is empty.
  static WorkerChecks from_json(const nlohmann::json& checks) {
    WorkerChecks c;
    read_fields(checks, c);
    return c;
  }
};

}  // namespace mk::records
