// The field table's codec (records/fields.h) and the one parser of every
// record (records::parse_event).
#include "records/events.h"

#include <set>

#include <gtest/gtest.h>

namespace mk::records {
namespace {

struct Inner {
  std::string name{};
  int n = 0;
  static constexpr auto fields() { return std::tuple{field("name", &Inner::name), field("n", &Inner::n)}; }
};

struct Sample {
  std::string text{};
  int64_t count = 0;
  bool flag = true;
  std::optional<double> maybe{};
  std::optional<double> gone{};
  std::vector<std::string> words{};
  std::vector<Inner> inner{};
  nlohmann::json obj{};
  static constexpr auto fields() {
    return std::tuple{field("text", &Sample::text),
                      field("count", &Sample::count),
                      field("flag", &Sample::flag),
                      field("maybe", &Sample::maybe),
                      field("gone", &Sample::gone, When::kIfSet),
                      field("words", &Sample::words, When::kIfSet),
                      field("inner", &Sample::inner),
                      field("obj", &Sample::obj, When::kIfObject)};
  }
};

// A type with a JSON shape of its own: a level written as its name.
enum class Level { kLow, kHigh };

}  // namespace

template <>
struct ValueCodec<Level> {
  static nlohmann::json encode(Level l) { return l == Level::kHigh ? "high" : "low"; }
  static bool decode(const nlohmann::json& j, Level& l) {
    if (j == "high") l = Level::kHigh;
    else if (j == "low") l = Level::kLow;
    else return false;
    return true;
  }
  static bool is_set(Level l) { return l != Level::kLow; }
};

namespace {

struct Nested {
  std::optional<double> fast{}, slow{};
  double ratio = 0;
  int64_t total = 0;
  Level level = Level::kLow;
  std::optional<Level> maybe_level{};
  static constexpr auto fields() {
    return std::tuple{field("speed/fast", &Nested::fast, When::kPositive),
                      field("speed/slow", &Nested::slow, When::kPositive),
                      field("speed/ratio", &Nested::ratio, When::kPositive),
                      field("tokens/total", &Nested::total),
                      field("level", &Nested::level, When::kIfSet),
                      field("maybe_level", &Nested::maybe_level)};
  }
};

// Tables the writer refuses when they are compiled (held here as values, so
// that a detector that let them through fails the build of this test).
struct KeyInsideAnother {
  std::string a{}, b{};
  static constexpr auto fields() { return std::tuple{field("x", &KeyInsideAnother::a), field("x/y", &KeyInsideAnother::b)}; }
};
struct PositiveString {
  std::string a{};
  static constexpr auto fields() { return std::tuple{field("a", &PositiveString::a, When::kPositive)}; }
};
static_assert(!table_is_sound<KeyInsideAnother>());
static_assert(!table_is_sound<PositiveString>());
static_assert(table_is_sound<Nested>());

TEST(FieldTable, APositiveIntegerIsWrittenAsAnInteger) {
  struct Count {
    int64_t n = 0;
    static constexpr auto fields() { return std::tuple{field("n", &Count::n, When::kPositive)}; }
  };
  Count c;
  c.n = 7;
  EXPECT_EQ(write_fields(c).dump(), R"({"n":7})");
  c.n = 0;
  EXPECT_EQ(write_fields(c).dump(), R"({"n":null})");
}

TEST(FieldTable, SlashedKeysPositiveNumbersAndOwnShapes) {
  Nested n;
  n.fast = 2.5;
  n.slow = 0.0;  // not above 0: unknown, written as null
  n.ratio = -1;
  n.total = 7;
  auto j = write_fields(n);
  EXPECT_EQ(j, nlohmann::json::parse(R"({"speed":{"fast":2.5,"slow":null,"ratio":null},"tokens":{"total":7},
                                         "maybe_level":null})"));
  n.level = Level::kHigh;
  n.maybe_level = Level::kHigh;
  j = write_fields(n);
  EXPECT_EQ(j["level"], "high");
  EXPECT_EQ(j["maybe_level"], "high");

  Nested back;
  read_fields(nlohmann::json::parse(R"({"speed":{"fast":0,"slow":3,"ratio":1.5},"tokens":{"total":9},
                                        "level":"high","maybe_level":"middle"})"),
              back);
  EXPECT_FALSE(back.fast.has_value());  // 0 is not a speed: older files wrote it for unknown
  EXPECT_EQ(back.slow, 3.0);
  EXPECT_EQ(back.ratio, 1.5);
  EXPECT_EQ(back.total, 9);
  EXPECT_EQ(back.level, Level::kHigh);
  EXPECT_FALSE(back.maybe_level.has_value());  // not a level: left alone
  // A path through something that is not an object reads nothing.
  Nested none;
  read_fields(nlohmann::json::parse(R"({"speed":[1],"tokens":5})"), none);
  EXPECT_FALSE(none.slow.has_value());
  EXPECT_EQ(none.total, 0);
  EXPECT_EQ((top_level_keys<Nested>()), (std::vector<std::string>{"speed", "tokens", "level", "maybe_level"}));
}

TEST(FieldTable, WritesWhatTheTableSays) {
  Sample s;
  s.text = "a";
  s.count = 3;
  auto j = write_fields(s);
  EXPECT_EQ(j, nlohmann::json::parse(R"({"text":"a","count":3,"flag":true,"maybe":null,"inner":[]})"));
  s.gone = 1.5;
  s.words = {"x"};
  s.obj = nlohmann::json::array();  // not an object: not written
  j = write_fields(s);
  EXPECT_EQ(j["gone"], 1.5);
  EXPECT_EQ(j["words"], nlohmann::json::array({"x"}));
  EXPECT_FALSE(j.contains("obj"));
}

TEST(FieldTable, ReadingIsTolerant) {
  // Mistyped fields keep their defaults; numbers are taken however written;
  // array elements of the wrong type are skipped; an obj that is no object is not read.
  auto j = nlohmann::json::parse(
      R"({"text":7,"count":4.0,"flag":"yes","maybe":2,"words":["a",1,"b"],
          "inner":[{"name":"k","n":2.9},"junk",{"n":"x"}],"obj":[1]})");
  Sample s;
  read_fields(j, s);
  EXPECT_EQ(s.text, "");
  EXPECT_EQ(s.count, 4);
  EXPECT_TRUE(s.flag);
  EXPECT_EQ(s.maybe, 2.0);
  EXPECT_EQ(s.words, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(s.inner.size(), 2u);
  EXPECT_EQ(s.inner[0].name, "k");
  EXPECT_EQ(s.inner[0].n, 2);
  EXPECT_EQ(s.inner[1].n, 0);
  EXPECT_TRUE(s.obj.is_null());
  EXPECT_EQ(field_keys<Inner>(), (std::vector<std::string>{"name", "n"}));
}

TEST(ParseEvent, DispatchesOnTheTypeOnce) {
  LlmCall c;
  c.agent = "generate";
  c.task = "t";
  auto j = c.to_json();
  j["seq"] = 4;
  j["newer_field"] = {{"x", 1}};
  Event e = parse_event(j);
  ASSERT_TRUE(std::holds_alternative<LlmCall>(e));
  EXPECT_EQ(std::get<LlmCall>(e).agent, "generate");
  EXPECT_EQ(type_of(e), "llm_call");
  ASSERT_NE(meta_of(e), nullptr);
  EXPECT_EQ(meta_of(e)->seq, 4);
  EXPECT_EQ(to_json(e), j);  // a newer writer's field survives

  // The live progress events have types of their own.
  EXPECT_TRUE(std::holds_alternative<EvalStart>(parse_event({{"type", "eval_start"}, {"task", "x"}})));
  EXPECT_TRUE(std::holds_alternative<EvalDone>(parse_event({{"type", "eval_done"}, {"status", "correct"}})));
  EXPECT_TRUE(std::holds_alternative<LlmStart>(parse_event({{"type", "llm_start"}, {"agent", "a"}})));
  EXPECT_FALSE(EvalStart{}.to_json().contains("v"));  // live progress is never logged: no schema version
  EXPECT_EQ((LlmStart{.agent = "a", .task = "t", .sample = 2}.to_json()),
            (nlohmann::json{{"type", "llm_start"}, {"agent", "a"}, {"task", "t"}, {"sample", 2}}));
  LlmDone done(c);
  auto dj = done.to_json();
  EXPECT_EQ(dj["type"], "llm_done");
  ASSERT_TRUE(std::holds_alternative<LlmDone>(parse_event(dj)));
  EXPECT_EQ(std::get<LlmDone>(parse_event(dj)).agent, "generate");

  // A type this build does not know, and what is no record, are kept whole.
  nlohmann::json other = {{"type", "from_the_future"}, {"x", 1}};
  Event u = parse_event(other);
  ASSERT_TRUE(std::holds_alternative<UnknownRecord>(u));
  EXPECT_EQ(type_of(u), "from_the_future");
  EXPECT_EQ(to_json(u), other);
  EXPECT_EQ(meta_of(u), nullptr);
  EXPECT_EQ(type_of(parse_event(nlohmann::json::array())), "");
  EXPECT_EQ(type_of(parse_event({{"type", 3}})), "");
}

TEST(ParseEvent, EveryRecordTypeRoundTrips) {
  // One record of each type, written and parsed back: the same record, by its own parser.
  std::vector<nlohmann::json> all = {
      RunStart{}.to_json(),  Resume{}.to_json(),    Preflight{}.to_json(),     LlmCall{}.to_json(),
      ReplyError{}.to_json(), VerifyDecomposition{}.to_json(), TopologyChange{}.to_json(), Budget{}.to_json(),
      Eval{}.to_json(),      Judge{}.to_json(),     ReuseMatch{}.to_json(),    CompositionFailure{}.to_json(),
      Iteration{}.to_json(), Best{}.to_json(),      Swap{}.to_json(),          SwapSkipped{}.to_json(),
      SwapRejected{}.to_json(), Postfuse{}.to_json(), FinalCheck{}.to_json(),  RunEnd{}.to_json()};
  std::set<std::string> types;
  for (const auto& j : all) {
    Event e = parse_event(j);
    EXPECT_FALSE(std::holds_alternative<UnknownRecord>(e)) << j.dump();
    EXPECT_EQ(to_json(e), j);
    types.insert(type_of(e));
  }
  EXPECT_EQ(types.size(), all.size());  // no two records share a type
}

}  // namespace
}  // namespace mk::records

#include "records/run_config.h"

namespace mk::records {
namespace {

TEST(RunConfigRecord, RoundTripsAndKeepsANewerWritersFields) {
  auto j = nlohmann::json::parse(R"({"command":"run","problem":"p","problem_file":"/x/p.py","problem_hash":"h",
      "llm":"replay:s.jsonl","judge":"","base_url":"","config":"","test_cpu":true,
      "options":{"method":"mkevolve"},"from_the_future":[1]})");
  auto c = RunConfig::from_json(j);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->llm, "replay:s.jsonl");
  EXPECT_TRUE(c->test_cpu);
  EXPECT_EQ(c->problem_id, "");
  EXPECT_EQ(c->to_json(), j);  // problem_id is not written for a lone run; the unknown field survives
  c->problem_id = "L1-relu";
  EXPECT_EQ(c->to_json()["problem_id"], "L1-relu");
  EXPECT_FALSE(RunConfig::from_json(nlohmann::json::array()));
  // Mistyped fields read as their defaults instead of throwing.
  auto bad = RunConfig::from_json({{"llm", 3}, {"test_cpu", "yes"}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->llm, "");
  EXPECT_FALSE(bad->test_cpu);
}

}  // namespace
}  // namespace mk::records

#include "records/tally.h"

namespace mk::records {
namespace {

TEST(LlmTally, CountsWhatEveryViewShows) {
  LlmTally t;
  LlmCall paid;
  paid.agent = "generate";
  paid.usage = {100, 20, 5, 1, false};
  LlmCall cached = paid;
  cached.agent = "decompose";
  cached.cached = true;
  LlmCall failed;
  failed.agent = "debug";
  failed.ok = false;
  failed.usage.estimated = true;
  for (const auto& c : {paid, cached, failed}) t.add(c);
  EXPECT_EQ(t.calls, 3);
  EXPECT_EQ(t.cached, 1);
  EXPECT_EQ(t.failed, 1);
  EXPECT_EQ(t.kernel_calls, 2);  // generate and debug; decompose is outside the kernel budget
  EXPECT_EQ(t.total(), 126);     // the cached reply's tokens were paid for by the call that filled the cache
  EXPECT_EQ(t.total(), paid.billed_tokens() + cached.billed_tokens() + failed.billed_tokens());
  EXPECT_TRUE(t.estimated);
}

}  // namespace
}  // namespace mk::records

#include "records/manifest.h"

namespace mk::records {
namespace {

TEST(SolutionManifestRecord, RoundTripsWhatThePackageAndSwapWrite) {
  // A test-mode run's manifest: the unknown flags are null, not false; a
  // newer writer's fields (top level and inside a subkernel) survive.
  auto j = nlohmann::json::parse(R"({"problem":"p","problem_hash":"h","llm":"replay:x","method":"mkevolve",
      "iteration":2,"speedup":1.5,"correct":true,"origin":"decompose","monolithic":false,
      "contains_pytorch_subkernels":null,"uses_pytorch":null,"test_mode":true,"test_mode_note":"TEST MODE",
      "subkernels":[{"name":"a","problem_hash":"ha","kernel_hash":"ka","pytorch":null,"newer":1}],
      "e2e":{"status":"correct"},"from_the_future":true})");
  auto m = SolutionManifest::from_json(j);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->to_json(), j);
  EXPECT_FALSE(m->contains_pytorch_subkernels);
  ASSERT_NE(m->find("a"), nullptr);
  EXPECT_FALSE(m->find("a")->pytorch);
  // A swap's edits: the entry, the flags, the swaps list.
  m->find("a")->pytorch = true;
  m->contains_pytorch_subkernels = true;
  m->swaps.push_back({"a", "ka", "pytorch"});
  auto back = m->to_json();
  EXPECT_EQ(back["subkernels"][0]["pytorch"], true);
  EXPECT_EQ(back["subkernels"][0]["newer"], 1);
  EXPECT_EQ(back["swaps"][0]["to"], "pytorch");
  // A scratch package's manifest has no figures: none are written.
  SolutionManifest scratch;
  scratch.problem = "p";
  auto sj = scratch.to_json();
  EXPECT_FALSE(sj.contains("iteration"));
  EXPECT_FALSE(sj.contains("correct"));
  EXPECT_TRUE(sj["contains_pytorch_subkernels"].is_null());
  EXPECT_FALSE(SolutionManifest::from_json({{"problem", "p"}}));  // no subkernels: no manifest
}

}  // namespace
}  // namespace mk::records

#include "records/worker_checks.h"

namespace mk::records {
namespace {

TEST(WorkerChecksRecord, ReadsThePartsTheHarnessUses) {
  auto c = WorkerChecks::from_json(nlohmann::json::parse(R"({
      "correctness": {"atol": 1e-5, "rtol": 1e-5, "max_abs_err": 0.1},
      "footprint": {"host_peak_bytes": 100, "device_peak_bytes": 2e9, "output_bytes": "x"},
      "phases_s": {"trials": 1.5}, "work": {"bytes": 10}, "ncu": 3, "isolation": {"pid": 1}})"));
  ASSERT_TRUE(c.correctness);
  EXPECT_EQ(c.correctness->atol, 1e-5);
  ASSERT_TRUE(c.footprint);
  EXPECT_EQ(c.footprint->device_peak_bytes, 2e9);
  EXPECT_EQ(c.footprint->output_bytes, 0);  // mistyped: empty
  EXPECT_EQ(c.phases_s["trials"], 1.5);
  EXPECT_FALSE(WorkerChecks::from_json(nlohmann::json::array()).correctness);
  // A worker before the phase rule says neither: rule 1, not known complete.
  EXPECT_EQ(c.footprint->device_rule_version, 1);
  EXPECT_FALSE(c.footprint->device_complete);
  auto p = WorkerChecks::from_json(nlohmann::json::parse(
      R"({"footprint": {"device_peak_bytes": 2e9, "device_rule_version": 2, "device_complete": true}})"));
  EXPECT_EQ(p.footprint->device_rule_version, 2);
  EXPECT_TRUE(p.footprint->device_complete);
}

}  // namespace
}  // namespace mk::records
