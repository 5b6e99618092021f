// Unit tests of the pieces around the pool: protocol parsing, source hashing,
// GPU discovery parsing, cache keys and files, process-tree killing.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "eval/cache.h"
#include "eval/calibration.h"
#include "eval/gpus.h"
#include "eval/inputs.h"
#include "eval/proc.h"
#include "eval/protocol.h"
#include "eval/sources.h"
#include "util/env.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/subprocess.h"
#include "support/testing.h"

namespace mk::eval {
namespace {

using nlohmann::json;

TEST(VerdictStatus, RoundTrip) {
  for (auto s : {VerdictStatus::kCorrect, VerdictStatus::kIncorrect, VerdictStatus::kCheating, VerdictStatus::kCompileError,
                 VerdictStatus::kRuntimeError, VerdictStatus::kTimeout, VerdictStatus::kCrashed})
    EXPECT_EQ(status_from_string(to_string(s)), s);
  EXPECT_FALSE(status_from_string("fine").has_value());
}

TEST(Protocol, ParsesAFullResult) {
  json msg = json::parse(R"({"id":3,"type":"result","status":"incorrect","kind":"mismatch",
      "reasons":["first mismatch at [0,1]", {"file":"k.py","line":12,"rule":"torch-compute","message":"torch.matmul"}],
      "message":"max error 0.5","max_abs_err":0.5,"runtime_ms":{"median":1.5,"mean":1.7},
      "baseline_ms":{"eager":{"median_ms":3.0,"mean_ms":3.1},"compile":null},"uses_pytorch":true})");
  Verdict r = parse_eval_result(msg);
  EXPECT_EQ(r.status, VerdictStatus::kIncorrect);
  EXPECT_EQ(r.kind, "mismatch");
  ASSERT_EQ(r.reasons.size(), 2u);
  EXPECT_EQ(r.reasons[1], "k.py:12: torch-compute: torch.matmul");
  EXPECT_EQ(r.feedback, "max error 0.5");
  ASSERT_TRUE(r.max_abs_err.has_value());
  EXPECT_DOUBLE_EQ(*r.max_abs_err, 0.5);
  EXPECT_TRUE(r.runtime.valid);
  EXPECT_DOUBLE_EQ(r.runtime.median_ms, 1.5);
  EXPECT_DOUBLE_EQ(r.runtime.mean_ms, 1.7);
  EXPECT_TRUE(r.eager.valid);
  EXPECT_FALSE(r.compiled.valid);
  EXPECT_TRUE(r.uses_pytorch);
}

TEST(Protocol, ACandidatesTextIsScrubbedOfEveryKnownSecret) {
  // A candidate read a credential (a config file's key, a password in the
  // --base-url) and raised or printed it: the verdict that carries its text to
  // prompts, logs and caches holds none of it.
  register_secret("cfg-key-0123456789abcdef");
  register_credentials("https://bob:url-pass-9876543210@llm.internal/v1");
  json msg = {{"id", 1},
              {"type", "result"},
              {"status", "runtime_error"},
              {"kind", "runtime_error"},
              {"message", "RuntimeError: cfg-key-0123456789abcdef"},
              {"reasons", json::array({"leaked url-pass-9876543210"})},
              {"stderr_tail", "print: cfg-key-0123456789abcdef and url-pass-9876543210"},
              {"checks", {{"deep", {{"list", json::array({"cfg-key-0123456789abcdef"})}}}}}};
  Verdict r = parse_eval_result(msg);
  std::string all = r.to_json().dump();
  EXPECT_EQ(all.find("cfg-key-0123456789abcdef"), std::string::npos) << all;
  EXPECT_EQ(all.find("url-pass-9876543210"), std::string::npos) << all;
  EXPECT_NE(r.feedback.find("[REDACTED]"), std::string::npos);
}

TEST(Protocol, MalformedAnswersBecomeCrashed) {
  Verdict a = parse_eval_result(json::parse(R"({"id":1,"type":"result","status":"splendid"})"));
  EXPECT_EQ(a.status, VerdictStatus::kCrashed);
  EXPECT_EQ(a.kind, "protocol_error");
  EXPECT_NE(a.feedback.find("splendid"), std::string::npos);
  Verdict b = parse_eval_result(json::parse(R"({"id":1,"type":"result"})"));
  EXPECT_EQ(b.status, VerdictStatus::kCrashed);
  EXPECT_NE(b.feedback.find("no status"), std::string::npos);
  Verdict c = parse_eval_result(json::parse(R"({"id":1,"type":"error","message":"boom"})"));
  EXPECT_EQ(c.status, VerdictStatus::kCrashed);
  EXPECT_NE(c.feedback.find("boom"), std::string::npos);
  Verdict d = parse_eval_result(json::parse(R"({"id":1,"type":"result","status":"correct","reasons":"x","runtime_ms":"fast","max_abs_err":"big"})"));
  EXPECT_EQ(d.status, VerdictStatus::kCorrect);
  EXPECT_FALSE(d.runtime.valid);
  EXPECT_FALSE(d.max_abs_err.has_value());
  EXPECT_EQ(parse_eval_result(json::array()).status, VerdictStatus::kCrashed);
}

TEST(Protocol, NestedResultObjectIsAccepted) {
  Verdict r = parse_eval_result(json::parse(R"({"id":1,"type":"result","result":{"status":"correct","runtime_ms":2}})"));
  EXPECT_EQ(r.status, VerdictStatus::kCorrect);
  EXPECT_DOUBLE_EQ(r.runtime.median_ms, 2.0);
}

TEST(Verdict, RoundTripKeepsEveryField) {
  Verdict r;
  r.status = VerdictStatus::kCorrect;
  r.kind = "";
  r.reasons = {"a", "b"};
  r.feedback = "fine";
  r.runtime = {1.0, 1.1, true};
  r.eager = {2.0, 2.0, true};
  r.compiled = {1.5, 1.5, true};
  r.speedup_eager = 2.0;
  r.speedup_compile = 1.5;
  r.max_abs_err = 1e-6;
  r.uses_pytorch = true;
  r.gpu = 1;
  r.cached = true;
  r.queued_s = 0.5;
  r.eval_s = 3.0;
  r.baseline_s = 1.0;
  r.raw = json{{"checks", {{"static", "clean"}}}, {"harness_retries", 1}};
  json j = r.to_json();
  EXPECT_EQ(j["v"], kVerdictSchema);
  auto back = Verdict::from_json(j);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->status, r.status);
  EXPECT_EQ(back->reasons, r.reasons);
  EXPECT_EQ(back->feedback, "fine");
  EXPECT_DOUBLE_EQ(back->runtime.median_ms, 1.0);
  EXPECT_DOUBLE_EQ(back->runtime.mean_ms, 1.1);
  EXPECT_DOUBLE_EQ(back->eager.median_ms, 2.0);
  EXPECT_DOUBLE_EQ(back->compiled.median_ms, 1.5);
  EXPECT_DOUBLE_EQ(back->speedup_eager, 2.0);
  EXPECT_DOUBLE_EQ(back->speedup_compile, 1.5);
  ASSERT_TRUE(back->max_abs_err.has_value());
  EXPECT_DOUBLE_EQ(*back->max_abs_err, 1e-6);
  EXPECT_TRUE(back->uses_pytorch);
  EXPECT_TRUE(back->cached);
  EXPECT_EQ(back->gpu, 1);
  EXPECT_DOUBLE_EQ(back->queued_s, 0.5);
  EXPECT_DOUBLE_EQ(back->eval_s, 3.0);
  EXPECT_DOUBLE_EQ(back->baseline_s, 1.0);
  EXPECT_EQ(back->raw, r.raw);
  EXPECT_EQ(back->to_json(), j);  // one form: read and written again, nothing changes
}

// The worker writes its verdict from one dataclass (mkevolve_worker/verdict.py);
// every key it can write is either read into a typed member here or kept in
// raw on purpose. A new worker field fails this until someone decides which.
TEST(Verdict, EveryKeyTheWorkerWritesHasAPlaceInTheCppTable) {
  SubprocessOptions o;
  o.argv = {testing::test_python(), "-c",
            "import json, sys; sys.path.insert(0, 'worker'); "
            "from mkevolve_worker.verdict import worker_fields; print(json.dumps(worker_fields()))"};
  o.cwd = MKEVOLVE_SOURCE_DIR;
  auto r = run_subprocess(o, {}, std::chrono::seconds(60));
  ASSERT_TRUE(r.ok()) << r.describe() << ": " << r.err;
  auto worker = json::parse(r.out);
  ASSERT_TRUE(worker.is_array());
  ASSERT_GE(worker.size(), 10u);
  auto typed = verdict_typed_keys(), kept = verdict_worker_raw_keys();
  for (const auto& k : worker) {
    const std::string key = k.get<std::string>();
    const bool is_typed = std::find(typed.begin(), typed.end(), key) != typed.end();
    const bool is_kept = std::find(kept.begin(), kept.end(), key) != kept.end();
    EXPECT_TRUE(is_typed || is_kept) << "the worker writes '" << key << "', which eval::Verdict neither reads nor keeps";
    EXPECT_FALSE(is_typed && is_kept) << key << " is both typed and kept raw";
  }
  // And the raw keys named here are the worker's, not stale names.
  for (const auto& key : kept)
    EXPECT_NE(std::find(worker.begin(), worker.end(), key), worker.end()) << key << " is no longer written by the worker";
}

TEST(Verdict, UnknownIsNullAndANewerWritersFieldsAreKept) {
  Verdict r;
  r.status = VerdictStatus::kIncorrect;
  r.kind = "mismatch";
  json j = r.to_json();
  EXPECT_TRUE(j["runtime_ms"].is_null());
  EXPECT_TRUE(j["baseline_ms"]["eager"].is_null());
  EXPECT_TRUE(j["speedup"]["compile"].is_null());
  EXPECT_TRUE(j["max_abs_err"].is_null());
  EXPECT_FALSE(j.contains("eval_s"));
  j["v"] = kVerdictSchema + 1;
  j["from_the_future"] = {{"x", 1}};
  auto back = Verdict::from_json(j);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->v, kVerdictSchema + 1);
  EXPECT_FALSE(back->max_abs_err.has_value());
  EXPECT_EQ(back->to_json()["from_the_future"], j["from_the_future"]);
  EXPECT_FALSE(Verdict::from_json(json::array()).ok());
  EXPECT_FALSE(Verdict::from_json(json{{"status", "fine"}}).ok());
}

TEST(Verdict, AnOlderBuildsFlatSummaryStillReads) {
  // As manifests, swap events and candidates' result.json held it before the one form.
  auto old = Verdict::from_json(json::parse(R"({"status":"correct","kind":"","reasons":[],"speedup_compile":1.25,
      "speedup_eager":2.5,"max_abs_err":0.0,"uses_pytorch":false,"cached":false,"runtime_ms":0.4,"compile_ms":0.5,
      "eager_ms":1.0,"feedback":"ok","reward":1.25})"));
  ASSERT_TRUE(old.ok()) << old.error();
  EXPECT_EQ(old->v, 1);
  EXPECT_DOUBLE_EQ(old->speedup_compile, 1.25);
  EXPECT_DOUBLE_EQ(old->speedup_eager, 2.5);
  EXPECT_DOUBLE_EQ(old->compiled.median_ms, 0.5);
  EXPECT_DOUBLE_EQ(old->eager.median_ms, 1.0);
  EXPECT_EQ(old->feedback, "ok");
  EXPECT_EQ(old->raw, (json{{"reward", 1.25}}));  // the search's field beside it is kept
  json now = old->to_json();  // written again: the one form
  EXPECT_EQ(now["speedup"]["compile"], 1.25);
  EXPECT_FALSE(now.contains("speedup_compile"));
}

TEST(Verdict, TheWorkersAnswerAndTheJsonFormReadAlike) {
  // The worker's form (timings as objects, no "v") and the written form give one verdict.
  Verdict wire = parse_eval_result(json::parse(R"({"id":3,"type":"result","status":"correct",
      "runtime_ms":{"median":1.5,"mean":1.7},"baseline_ms":{"eager":{"median_ms":3.0},"compile":2.0},
      "max_abs_err":-1,"checks":{"static":"clean"}})"));
  EXPECT_FALSE(wire.raw.contains("id"));
  EXPECT_FALSE(wire.raw.contains("type"));
  EXPECT_EQ(wire.raw["checks"]["static"], "clean");
  EXPECT_FALSE(wire.max_abs_err.has_value());  // -1: not compared
  auto again = Verdict::from_json(wire.to_json());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->to_json(), wire.to_json());
  EXPECT_DOUBLE_EQ(again->runtime.mean_ms, 1.7);
  EXPECT_DOUBLE_EQ(again->compiled.median_ms, 2.0);
}

TEST(Protocol, OptionsCarryEverySetting) {
  EvalOptions o;
  o.trials = 7;
  o.atol = 1e-3;
  o.test_cpu = true;
  o.measure_perf = false;
  json j = options_to_json(o);
  EXPECT_EQ(j["trials"], 7);
  EXPECT_DOUBLE_EQ(j["atol"].get<double>(), 1e-3);
  EXPECT_EQ(j["test_cpu"], true);
  EXPECT_EQ(j["perf"], false);
  EXPECT_EQ(j["baselines"], false);
  // Unset tolerances go as null: the worker then judges by the output's dtype.
  EXPECT_TRUE(j["rtol"].is_null());
  EXPECT_TRUE(j["pass_rate"].is_null());
  o.pass_rate = 0.85;
  EXPECT_DOUBLE_EQ(options_to_json(o)["pass_rate"].get<double>(), 0.85);
  EXPECT_EQ(j["trials_dist"], "x1,x3,x0.01,neg");
}

TEST(Calibration, FileRoundTripAndTheWorkersOption) {
  TempDir dir{"mk-cal"};
  fs::path f = dir.path() / "sub" / "calibration.json";
  auto cf = CalibrationFile::load(f);  // missing: empty
  ASSERT_TRUE(cf) << cf.error();
  EXPECT_EQ(cf->size(), 0u);
  EXPECT_FALSE(cf->entry("h1"));
  json answer{{"outputs", {{"[0]", {{"dtype", "bfloat16"}, {"by_kind", {{"x1", {{"atol", 0.0312}, {"max", 0.02}}},
                                                                            {"x3", {{"atol", 0.125}}}}}}}}},
              {"runs", 20},
              {"rule", "max + 3 sigma"}};
  ASSERT_TRUE(cf->put("h1", "/p/attend.py", answer));
  auto back = CalibrationFile::load(f);
  ASSERT_TRUE(back) << back.error();
  auto e = back->entry("h1");
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["name"], "attend");
  EXPECT_EQ((*e)["file"], "/p/attend.py");
  json opt = calibrated_option(*e, f.string());
  EXPECT_EQ(opt, (json{{"outputs", {{"[0]", {{"x1", 0.0312}, {"x3", 0.125}}}}}, {"source", f.string()}}));
  // A bad answer is refused, naming what is wrong; so is a file of another kind or version.
  json bad = answer;
  bad["outputs"]["[0]"]["by_kind"]["x1"]["atol"] = -1;
  auto st = cf->put("h2", "/p/q.py", bad);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("output [0], x1 inputs: \"atol\" must be a non-negative number"), std::string::npos)
      << st.error();
  ASSERT_TRUE(write_file_atomic(f, R"({"format":"mkevolve-calibration","version":9,"problems":{}})"));
  auto v9 = CalibrationFile::load(f);
  ASSERT_FALSE(v9);
  EXPECT_NE(v9.error().find("version 9; this mkevolve reads version 1"), std::string::npos) << v9.error();
  ASSERT_TRUE(write_file_atomic(f, R"({"problems":{}})"));
  auto other = CalibrationFile::load(f);
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().find(f.string() + ": not a calibration file"), std::string::npos) << other.error();
  // --tolerance's values.
  EXPECT_EQ(calibration_path("default", "/r/calibration.json"), fs::path());
  EXPECT_EQ(calibration_path("calibrated", "/r/calibration.json"), fs::path("/r/calibration.json"));
  EXPECT_EQ(calibration_path("/x/mine.json", "/r/calibration.json"), fs::path("/x/mine.json"));
}

class SourcesTest : public ::testing::Test {
 protected:
  TempDir dir{"mk-sources"};
  std::filesystem::path write(const std::string& rel, const std::string& text) {
    auto p = dir.path() / rel;
    EXPECT_TRUE(write_file_atomic(p, text).ok());
    return p;
  }
};

TEST_F(SourcesTest, FollowsSiblingImports) {
  auto k = write("k.py", "import torch\nimport helper\nfrom pkg.sub import f\nfrom . import other, missing\n");
  write("helper.py", "from deep import x\n");
  write("deep.py", "X = 1\n");
  write("pkg/__init__.py", "");
  write("pkg/sub.py", "def f(): pass\n");
  write("other.py", "");
  write("unrelated.py", "");
  auto files = source_files(k);
  std::vector<std::string> names;
  for (auto& f : files) names.push_back(f.lexically_relative(dir.path()).string());
  EXPECT_EQ(names, (std::vector<std::string>{"deep.py", "helper.py", "k.py", "other.py", "pkg/__init__.py", "pkg/sub.py"}));
}

TEST_F(SourcesTest, HashChangesWithImportedSiblingOnly) {
  auto k = write("k.py", "import helper\n");
  write("helper.py", "A = 1\n");
  write("unrelated.py", "B = 1\n");
  auto h1 = hash_sources(k);
  ASSERT_TRUE(h1.ok());
  write("unrelated.py", "B = 2\n");
  EXPECT_EQ(*hash_sources(k), *h1);
  write("helper.py", "A = 2\n");
  EXPECT_NE(*hash_sources(k), *h1);
}

TEST_F(SourcesTest, SameContentUnderAnotherNameHashesAlike) {
  auto a = write("a/kernel.py", "class ModelNew: pass\n");
  auto b = write("b/other_name.py", "class ModelNew: pass\n");
  EXPECT_EQ(*hash_sources(a), *hash_sources(b));
}

TEST_F(SourcesTest, SolutionPackageHashesTheWholeDirectory) {
  auto s = write("sol/decomposed_solution.py", "from subkernels import a\n");
  write("sol/subkernels/a.py", "X = 1\n");
  auto h1 = *hash_sources(s);
  write("sol/subkernels/b.py", "Y = 1\n");  // not imported, still part of the package
  EXPECT_NE(*hash_sources(s), h1);
  auto resolved = resolve_kernel_path(dir.path() / "sol");
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->filename(), "decomposed_solution.py");
  auto bad = resolve_kernel_path(dir.path() / "sol" / "subkernels");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("decomposed_solution.py"), std::string::npos);
  EXPECT_FALSE(resolve_kernel_path(dir.path() / "nope.py").ok());
}

TEST_F(SourcesTest, PeekNamesWhatIsMissing) {
  auto problem = write("p.py", "import torch\nclass Model: pass\ndef get_inputs(): return []\n");
  auto no_inputs = write("q.py", "class Model: pass\n");
  auto kernel = write("k.py", "try:\n    from fast import ModelNew\nexcept ImportError:\n    pass\n");
  auto no_new = write("n.py", "class Model: pass\ndef get_inputs(): pass\n");
  auto broken = write("b.py", "class ModelNew(:\n");
  auto star = write("s.py", "from elsewhere import *\n");
  auto configs = write("c.py", "class Model: pass\ndef get_input_configs(): return []\n");
  auto defs = peek_definitions(mk::testing::test_python(), {problem, no_inputs, kernel, no_new, broken, star, configs});
  ASSERT_TRUE(defs.ok()) << defs.error();
  EXPECT_EQ(problem_input_error((*defs)[0]), "");
  EXPECT_NE(problem_input_error((*defs)[1]).find("q.py: no get_inputs"), std::string::npos);
  EXPECT_EQ(kernel_input_error((*defs)[2]), "");
  EXPECT_NE(kernel_input_error((*defs)[3]).find("n.py: no ModelNew"), std::string::npos);
  EXPECT_NE(kernel_input_error((*defs)[3]).find("problem file?"), std::string::npos);
  EXPECT_EQ(kernel_input_error((*defs)[4]), "");  // the worker reports syntax errors as compile errors
  EXPECT_NE(problem_input_error((*defs)[4]).find("line 1"), std::string::npos);
  EXPECT_EQ(kernel_input_error((*defs)[5]), "");
  EXPECT_EQ(problem_input_error((*defs)[6]), "");  // get_input_configs() alone is a complete problem
  auto nopy = peek_definitions("/nonexistent/python", {problem});
  ASSERT_FALSE(nopy.ok());
  EXPECT_NE(nopy.error().find("/nonexistent/python"), std::string::npos);
}

TEST(Gpus, ParsesNvidiaSmiAndVisibleDevices) {
  auto phys = parse_nvidia_smi_list(
      "GPU 0: NVIDIA H200 (UUID: GPU-aaaa-1111)\nGPU 1: NVIDIA H200 (UUID: GPU-bbbb-2222)\n"
      "  MIG 1g.18gb Device 0: (UUID: MIG-cccc)\n");
  ASSERT_EQ(phys.size(), 2u);
  EXPECT_EQ(phys[1].name, "NVIDIA H200");
  EXPECT_EQ(phys[1].uuid, "GPU-bbbb-2222");
  EXPECT_EQ(visible_gpus(phys, nullptr, true).size(), 2u);
  auto one = visible_gpus(phys, "1", true);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].index, 0);
  EXPECT_EQ(one[0].device, "1");
  EXPECT_EQ(visible_gpus(phys, "GPU-bbbb", true).at(0).uuid, "GPU-bbbb-2222");
  EXPECT_TRUE(visible_gpus(phys, "", true).empty());
  EXPECT_TRUE(visible_gpus(phys, "-1", true).empty());
  EXPECT_EQ(visible_gpus(phys, "0,7,1", true).size(), 1u);  // stops at the invalid 7
  EXPECT_TRUE(visible_gpus({}, nullptr, false).empty());
  auto blind = visible_gpus({}, "0,1", false);
  ASSERT_EQ(blind.size(), 2u);
  EXPECT_EQ(blind[1].device, "1");
}

TEST(Cache, KeysSeparateWhatMatters) {
  EvalOptions o;
  EvalIdentity id{"NVIDIA H200", "2.11.0", "3.6.0", "w1"};
  std::string k = result_key("p", "k", o, id);
  EXPECT_EQ(k, result_key("p", "k", o, id));
  EXPECT_NE(k, result_key("p", "k2", o, id));
  EXPECT_NE(k, result_key("p2", "k", o, id));
  EvalOptions o2 = o;
  o2.atol = 1e-3;
  EXPECT_NE(k, result_key("p", "k", o2, id));
  o2 = o;
  o2.atol = 1e-4;  // the fp32 default, but set: it binds every dtype
  EXPECT_NE(k, result_key("p", "k", o2, id));
  o2 = o;
  o2.pass_rate = 0.9;
  EXPECT_NE(k, result_key("p", "k", o2, id));
  o2 = o;
  o2.trials_dist = "none";
  EXPECT_NE(k, result_key("p", "k", o2, id));
  // Calibrated tolerances: their numbers make another verdict, not the file's name.
  o2 = o;
  o2.calibrated = json{{"outputs", {{"", {{"x1", 0.03}}}}}, {"source", "/a/calibration.json"}};
  std::string kc = result_key("p", "k", o2, id);
  EXPECT_NE(k, kc);
  o2.calibrated["source"] = "/b/calibration.json";
  EXPECT_EQ(kc, result_key("p", "k", o2, id));
  o2.calibrated["outputs"][""]["x1"] = 0.04;
  EXPECT_NE(kc, result_key("p", "k", o2, id));
  EvalIdentity id2 = id;
  id2.gpu_model = "NVIDIA A100";
  EXPECT_NE(k, result_key("p", "k", o, id2));
  id2 = id;
  id2.torch = "2.10.0";
  EXPECT_NE(k, result_key("p", "k", o, id2));
  id2 = id;
  id2.worker = "w2";
  EXPECT_NE(k, result_key("p", "k", o, id2));
  // Baselines ignore the candidate's correctness options but not the machine.
  EvalOptions o3 = o;
  o3.trials = 9;
  EXPECT_EQ(baseline_key("p", id, o), baseline_key("p", id, o3));
  id2 = id;
  id2.gpu_model = "x";
  EXPECT_NE(baseline_key("p", id, o), baseline_key("p", id2, o));
  // Device and synced timings are different numbers: neither may answer for the other.
  EvalOptions synced = o;
  synced.timing = "synced";
  EXPECT_NE(k, result_key("p", "k", synced, id));
  EXPECT_NE(baseline_key("p", id, o), baseline_key("p", id, synced));
  EXPECT_EQ(options_to_json(synced).at("timing"), "synced");
  EXPECT_EQ(options_to_json(o).at("timing"), "device");
  // --baseline-tf32: a verdict carrying the second baseline is another record;
  // the TF32-on baseline is another baseline, and the worker is told so.
  EvalOptions with_tf32 = o;
  with_tf32.baseline_tf32 = true;
  EXPECT_NE(k, result_key("p", "k", with_tf32, id));
  EXPECT_EQ(baseline_key("p", id, o), baseline_key("p", id, with_tf32));
  EvalOptions tf32_on = o;
  tf32_on.tf32 = true;
  EXPECT_NE(baseline_key("p", id, o), baseline_key("p", id, tf32_on));
  EXPECT_EQ(options_to_json(tf32_on).at("tf32"), true);
  EXPECT_EQ(options_to_json(o).at("tf32"), false);
}

TEST(Units, TheTf32BaselineSurvivesTheVerdictCache) {
  Verdict r;
  r.status = VerdictStatus::kCorrect;
  r.compiled_tf32 = Timing{0.5, 0.52, true};
  r.speedup_compile_tf32 = 1.25;
  json j = r.to_json();  // the cache stores the Verdict's one form
  EXPECT_DOUBLE_EQ(j["baseline_ms"]["compile_tf32"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["speedup"]["compile_tf32"].get<double>(), 1.25);
  auto back = Verdict::from_json(j);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_TRUE(back->compiled_tf32.valid);
  EXPECT_DOUBLE_EQ(back->compiled_tf32.median_ms, 0.5);
  EXPECT_DOUBLE_EQ(back->speedup_compile_tf32, 1.25);
  EXPECT_EQ(back->to_json(), j);
  json none = Verdict{}.to_json();  // not measured: no TF32 figure at all, not a 0
  EXPECT_FALSE(none["baseline_ms"].contains("compile_tf32"));
  auto back_none = Verdict::from_json(none);
  ASSERT_TRUE(back_none.ok());
  EXPECT_FALSE(back_none->compiled_tf32.valid);
}

TEST(Units, CompileTimeoutReachesTheWorkerAndKeysTheBaseline) {
  EvalOptions o;
  EXPECT_DOUBLE_EQ(options_to_json(o).at("compile_timeout_s").get<double>(), 0);  // the worker's default
  EvalOptions short_one = o;
  short_one.compile_timeout_s = 120;
  EXPECT_DOUBLE_EQ(options_to_json(short_one).at("compile_timeout_s").get<double>(), 120);
  EvalIdentity id{"NVIDIA H200", "2.11.0", "3.6.0", "w"};
  // A shorter compile deadline may give a baseline without torch.compile: never
  // the same cache entry as the default's.
  EXPECT_NE(baseline_key("h", id, o), baseline_key("h", id, short_one));
  EXPECT_EQ(baseline_key("h", id, o), baseline_key("h", id, EvalOptions{}));
}

TEST(Units, TheNsightComputeProfileReachesTheWorkerAndKeysTheVerdict) {
  EvalOptions o;
  EXPECT_EQ(options_to_json(o).at("profile_ncu"), false);
  EvalOptions n = o;
  n.profile = "ncu";
  EXPECT_EQ(options_to_json(n).at("profile_ncu"), true);
  EvalIdentity id{"NVIDIA H200", "2.11.0", "3.6.0", "w"};
  // A verdict with the counters is another record; the baselines are the same.
  EXPECT_NE(result_key("p", "k", o, id), result_key("p", "k", n, id));
  EXPECT_EQ(result_key("p", "k", o, id), result_key("p", "k", EvalOptions{}, id));
  EXPECT_EQ(baseline_key("p", id, o), baseline_key("p", id, n));
}

TEST(Cache, StoresAndReadsBack) {
  TempDir dir("mk-cache");
  ResultCache rc(dir.path() / "results");
  EXPECT_FALSE(rc.get("ab12").has_value());
  Verdict r;
  r.status = VerdictStatus::kTimeout;
  r.kind = "hang";
  r.feedback = "slow";
  ASSERT_TRUE(rc.put("ab12", r, json{{"kernel", "k.py"}}).ok());
  auto back = rc.get("ab12");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->status, VerdictStatus::kTimeout);
  EXPECT_TRUE(back->cached);
  ASSERT_TRUE(write_file_atomic(dir.path() / "results" / "cd" / "cd34.json", "{not json").ok());
  EXPECT_FALSE(rc.get("cd34").has_value());
  // The pool's timings belong to the evaluation that made the entry.
  r.eval_s = 4.0;
  r.queued_s = 1.0;
  ASSERT_TRUE(rc.put("ef56", r, json::object()).ok());
  EXPECT_DOUBLE_EQ(rc.get("ef56")->eval_s, 0.0);
  EXPECT_DOUBLE_EQ(rc.get("ef56")->queued_s, 0.0);
  // An entry whose verdict cannot be read (no status) is a miss, not an error.
  ASSERT_TRUE(write_file_atomic(dir.path() / "results" / "gh" / "gh78.json",
                                R"({"key":"gh78","result":{"verdict":"fine"}})").ok());
  EXPECT_FALSE(rc.get("gh78").has_value());

  BaselineCache bc(dir.path() / "baselines");
  auto b = parse_baseline(json::parse(R"({"id":2,"type":"result","eager":{"median_ms":4,"mean_ms":4.5},"compile":null})"));
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(bc.put("k1", *b, json::object()).ok());
  auto bb = bc.get("k1");
  ASSERT_TRUE(bb.has_value());
  EXPECT_DOUBLE_EQ(bb->eager.mean_ms, 4.5);
  EXPECT_FALSE(bb->compiled.valid);
  EXPECT_FALSE(parse_baseline(json::parse(R"({"type":"result","compile":{"median_ms":1}})")).ok());
  EXPECT_FALSE(parse_baseline(json::parse(R"({"type":"error","message":"x"})")).ok());
}

TEST(Cache, AnEntryNotSealedByThisUsersSecretIsDiscarded) {
  // A candidate that reached the cache folder rewrote a wrong kernel's verdict
  // as correct at 999x: without the secret it cannot seal it, so the entry is
  // discarded and the kernel evaluated again, never trusted.
  TempDir dir("mk-seal");
  auto seal = std::make_shared<const CacheSeal>(std::string(64, 'a'));
  ResultCache rc(dir.path() / "results", seal);
  Verdict wrong;
  wrong.status = VerdictStatus::kIncorrect;
  wrong.kind = "mismatch";
  ASSERT_TRUE(rc.put("ab12", wrong, json::object()).ok());
  ASSERT_TRUE(rc.get("ab12").has_value());
  const fs::path f = dir.path() / "results" / "ab" / "ab12.json";
  json entry = json::parse(*read_file(f));
  entry["result"]["status"] = "correct";
  entry["result"]["speedup"] = {{"compile", 999.0}, {"eager", 999.0}};
  ASSERT_TRUE(write_file_atomic(f, entry.dump()).ok());
  EXPECT_FALSE(rc.get("ab12").has_value());
  EXPECT_EQ(rc.discarded(), 1);
  // Its MAC recomputed without the secret, or dropped: discarded alike.
  entry["mac"] = hmac_sha256_hex("guessed", "ab12\n" + entry["result"].dump());
  ASSERT_TRUE(write_file_atomic(f, entry.dump()).ok());
  EXPECT_FALSE(rc.get("ab12").has_value());
  entry.erase("mac");
  ASSERT_TRUE(write_file_atomic(f, entry.dump()).ok());
  EXPECT_FALSE(rc.get("ab12").has_value());
  // Moved under another key (a correct kernel's entry copied to a wrong one's): discarded.
  Verdict right;
  right.status = VerdictStatus::kCorrect;
  ASSERT_TRUE(rc.put("cd34", right, json::object()).ok());
  ASSERT_TRUE(write_file_atomic(f, *read_file(dir.path() / "results" / "cd" / "cd34.json")).ok());
  EXPECT_FALSE(rc.get("ab12").has_value());
  // Another user's secret does not verify this user's entries either.
  ResultCache other(dir.path() / "results", std::make_shared<const CacheSeal>(std::string(64, 'b')));
  EXPECT_FALSE(other.get("cd34").has_value());
  EXPECT_TRUE(rc.get("cd34").has_value());
  // Baselines too: a forged eager time would forge every speedup against it.
  BaselineCache bc(dir.path() / "baselines", seal);
  auto b = parse_baseline(json::parse(R"({"eager":{"median_ms":4,"mean_ms":4.5},"compile":null})"));
  ASSERT_TRUE(bc.put("k1", *b, json::object()).ok());
  ASSERT_TRUE(bc.get("k1").has_value());
  json be = json::parse(*read_file(dir.path() / "baselines" / "k1.json"));
  be["baseline"]["eager"]["median_ms"] = 4000;
  ASSERT_TRUE(write_file_atomic(dir.path() / "baselines" / "k1.json", be.dump()).ok());
  EXPECT_FALSE(bc.get("k1").has_value());
}

TEST(Cache, TheSealsSecretIsMadeOnceOutsideTheCachesReadableByItsUserAlone) {
  TempDir dir("mk-seal-key");
  ::setenv("MKEVOLVE_CACHE_KEY", (dir.path() / "cfg" / "cache-key").c_str(), 1);
  EXPECT_EQ(CacheSeal::default_path(), dir.path() / "cfg" / "cache-key");
  ::unsetenv("MKEVOLVE_CACHE_KEY");
  ::setenv("XDG_CONFIG_HOME", (dir.path() / "xdg").c_str(), 1);
  EXPECT_EQ(CacheSeal::default_path(), dir.path() / "xdg" / "mkevolve" / "cache-key");
  ::unsetenv("XDG_CONFIG_HOME");
  const fs::path key = dir.path() / "cfg" / "cache-key";
  auto a = CacheSeal::open_or_make(key);
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_EQ(fs::status(key).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  auto b = CacheSeal::open_or_make(key);  // the same secret on the next start
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*a)->mac("k", json{{"x", 1}}), (*b)->mac("k", json{{"x", 1}}));
  ASSERT_TRUE(write_file_atomic(key, "short\n").ok());
  auto bad = CacheSeal::open_or_make(key);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("too short"), std::string::npos);
}

TEST(Cache, JobsThatStartTogetherShareOneWholeKey) {
  // e2e_slurm's two jobs once read the key file between its creation and its
  // write ("the cache key is too short"): no one may see it half written.
  for (int round = 0; round < 20; ++round) {
    TempDir dir("mk-seal-race");
    const fs::path key = dir.path() / "cfg" / "cache-key";
    std::vector<std::string> macs(8);
    std::vector<std::string> errors(8);
    std::vector<std::thread> ts;
    for (int i = 0; i < 8; ++i)
      ts.emplace_back([&, i] {
        auto s = CacheSeal::open_or_make(key);
        if (s.ok()) macs[i] = (*s)->mac("k", json{{"x", 1}});
        else errors[i] = s.error();
      });
    for (auto& t : ts) t.join();
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(errors[i], "") << "round " << round;
      EXPECT_EQ(macs[i], macs[0]) << "round " << round;
    }
    size_t files = 0;
    for (auto& e : fs::directory_iterator(key.parent_path())) files += e.is_regular_file();
    EXPECT_EQ(files, 1u) << "a temporary key file was left behind";
  }
}

TEST(Proc, KillsASetsidGrandchildFoundByToken) {
  std::string token = random_token();
  std::string marker = "mk-proc-test-" + token;
  SubprocessOptions o;
  // The shell starts a setsid'd sleeper and exits: the sleeper is orphaned and
  // in another session, so only the token finds it.
  TempDir dir("mk-proc");
  std::string flag = (dir.path() / "started").string();
  o.argv = {"/bin/sh", "-c",
            "setsid /bin/sh -c 'echo $$ > " + flag + "; exec sleep 1000' </dev/null >/dev/null 2>&1 & "
            "while [ ! -s " + flag + " ]; do sleep 0.01; done; exit 0"};
  o.env = Env{{"PATH", "/usr/bin:/bin"}, {kTokenVar, token}};
  auto r = run_subprocess(o, {}, std::chrono::seconds(10));
  ASSERT_TRUE(r.ok()) << r.describe();
  std::vector<pid_t> found;
  for (int i = 0; i < 200 && found.empty(); ++i) {
    found = processes_with_token(token);
    if (found.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(found.size(), 1u);
  EXPECT_GE(kill_process_tree(-1, token), 1);
  EXPECT_TRUE(processes_with_token(token).empty());
}

TEST(Proc, DescendantsOfFindsAChain) {
  auto sp_err = std::string();
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", "sleep 1000 & sleep 1000; wait"};
  auto sp = Subprocess::start(o, &sp_err);
  ASSERT_TRUE(sp) << sp_err;
  std::vector<pid_t> d;
  for (int i = 0; i < 200 && d.size() < 2; ++i) {
    d = descendants_of(sp->pid());
    if (d.size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(d.size(), 2u);
  kill_process_tree(sp->pid(), "");
  sp->terminate(std::chrono::milliseconds(0));
  for (pid_t p : d) EXPECT_FALSE(process_alive(p));
}

}  // namespace
}  // namespace mk::eval
