// The typed event records (run/events.h): each one's to_json and from_json
// are inverses, a newer writer's fields survive a read and a write, and a
// record of another type is not mistaken for one.
#include "records/events.h"

#include <gtest/gtest.h>

namespace mk::records {
namespace {

using nlohmann::json;

LlmCall full_call() {
  LlmCall c;
  c.agent = "optimize";
  c.task = "linear_gelu";
  c.usage = {1200, 340, 50, 7, true};
  c.cached = false;
  c.truncated = true;
  c.latency_ms = 2345;
  c.ok = false;
  c.error = "HTTP 529: overloaded";
  c.round = 2;
  c.candidate = "linear_gelu-s7";
  c.iteration = 3;
  c.sample = 7;
  c.model = "claude-opus-4-5";
  return c;
}

void expect_same(const LlmCall& a, const LlmCall& b) {
  EXPECT_EQ(a.agent, b.agent);
  EXPECT_EQ(a.task, b.task);
  EXPECT_EQ(a.usage.input, b.usage.input);
  EXPECT_EQ(a.usage.output, b.usage.output);
  EXPECT_EQ(a.usage.cache_read, b.usage.cache_read);
  EXPECT_EQ(a.usage.cache_write, b.usage.cache_write);
  EXPECT_EQ(a.usage.estimated, b.usage.estimated);
  EXPECT_EQ(a.cached, b.cached);
  EXPECT_EQ(a.truncated, b.truncated);
  EXPECT_EQ(a.latency_ms, b.latency_ms);
  EXPECT_EQ(a.ok, b.ok);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.round.value_or(-1), b.round.value_or(-1));
  EXPECT_EQ(a.candidate, b.candidate);
  EXPECT_EQ(a.iteration, b.iteration);
  EXPECT_EQ(a.sample, b.sample);
  EXPECT_EQ(a.model, b.model);
}

TEST(EventRecords, LlmCallRoundTrips) {
  const LlmCall c = full_call();
  const json j = c.to_json();
  EXPECT_EQ(j["type"], "llm_call");
  EXPECT_EQ(j["v"], kSchema);
  auto back = LlmCall::from_json(j);
  ASSERT_TRUE(back);
  expect_same(c, *back);
  EXPECT_TRUE(back->meta.extra.empty()) << back->meta.extra.dump();
  EXPECT_EQ(back->to_json(), j) << "written again, nothing changes";

  // A successful call without the optional fields: they stay absent.
  LlmCall plain;
  plain.agent = "decompose";
  plain.task = "p";
  json pj = plain.to_json();
  EXPECT_FALSE(pj.contains("error"));
  EXPECT_FALSE(pj.contains("round"));
  EXPECT_FALSE(pj.contains("candidate"));
  EXPECT_FALSE(pj.contains("model"));
  auto pb = LlmCall::from_json(pj);
  ASSERT_TRUE(pb);
  expect_same(plain, *pb);
  EXPECT_EQ(pb->to_json(), pj);
}

TEST(EventRecords, ReplayKeyIsTheTypeAndTheIdentifyingFieldsOnly) {
  // What a resumed run matches its re-emitted events against (RunSink): the
  // timestamps, seq and measured fields may differ, the identity may not.
  json a = {{"type", "eval"}, {"task", "t"}, {"candidate", "t-s1"}, {"iteration", 2}, {"seq", 5}, {"eval_s", 1.5}};
  json b = {{"type", "eval"}, {"task", "t"}, {"candidate", "t-s1"}, {"iteration", 2}, {"seq", 9}, {"eval_s", 7.0}};
  EXPECT_EQ(ReplayKey::of(a), ReplayKey::of(b));
  b["iteration"] = 3;
  EXPECT_FALSE(ReplayKey::of(a) == ReplayKey::of(b));
  json c = a;
  c["type"] = "llm_call";
  EXPECT_FALSE(ReplayKey::of(a) == ReplayKey::of(c));
  json d = a;
  d.erase("candidate");
  EXPECT_FALSE(ReplayKey::of(a) == ReplayKey::of(d)) << "an absent field differs from a present one";
  EXPECT_EQ(ReplayKey::of(json::array()).type, "");
}

TEST(EventRecords, LlmCallKeepsTheLogsEnvelopeAndANewerWritersFields) {
  json j = full_call().to_json();
  j["seq"] = 41;
  j["ts"] = "2026-11-30T08:30:01.120Z";
  j["v"] = kSchema + 1;                         // a newer writer...
  j["cost_usd"] = 0.12;                         // ...with a field this build does not know
  j["routing"] = {{"region", "eu"}, {"tries", 2}};
  auto c = LlmCall::from_json(j);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->meta.seq.value_or(-1), 41);
  EXPECT_EQ(c->meta.ts, "2026-11-30T08:30:01.120Z");
  EXPECT_EQ(c->meta.v, kSchema + 1);
  EXPECT_EQ(c->meta.extra, (json{{"cost_usd", 0.12}, {"routing", {{"region", "eu"}, {"tries", 2}}}}));
  EXPECT_EQ(c->to_json(), j) << "nothing is dropped";
  // A field the extra holds never overrides one this build writes.
  c->meta.extra["agent"] = "forged";
  EXPECT_EQ(c->to_json()["agent"], "optimize");
}

TEST(EventRecords, LlmCallFromOlderAndOtherRecords) {
  // Written before "v", "iteration", "round" and "latency_ms" existed.
  json old = {{"type", "llm_call"}, {"agent", "generate"}, {"task", "t"},
              {"usage", {{"input", 10}, {"output", 5}}}, {"cached", true}, {"tokens", 15}};
  auto c = LlmCall::from_json(old);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->meta.v, 1);
  EXPECT_FALSE(c->round);
  EXPECT_FALSE(c->latency_ms) << "a latency not measured is not 0 ms";
  EXPECT_FALSE(c->to_json().contains("latency_ms"));
  EXPECT_TRUE(c->ok) << "a record without ok was a successful call";
  EXPECT_EQ(c->usage.total(), 15);
  EXPECT_EQ(c->billed_tokens(), 0) << "a cached reply cost nothing this time";
  EXPECT_EQ(c->meta.extra, (json{{"tokens", 15}}));
  EXPECT_FALSE(LlmCall::from_json(json{{"type", "llm_done"}, {"agent", "generate"}}));
  EXPECT_FALSE(LlmCall::from_json(json{{"type", "eval"}}));
  EXPECT_FALSE(LlmCall::from_json(json::array()));
  EXPECT_FALSE(LlmCall::from_json(json{{"agent", "generate"}}));
}

TEST(EventRecords, EnvelopeOfAnyRecord) {
  auto e = Envelope::from_json(json{{"type", "a_newer_type"}, {"seq", 3}, {"ts", "2026-11-30T08:00:00.000Z"}});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, "a_newer_type");
  EXPECT_EQ(e->seq, 3);
  EXPECT_EQ(e->ts, "2026-11-30T08:00:00.000Z");
  auto bare = Envelope::from_json(json{{"type", "eval"}});
  ASSERT_TRUE(bare);
  EXPECT_FALSE(bare->seq);
  EXPECT_EQ(bare->ts, "");
  EXPECT_FALSE(Envelope::from_json(json{{"type", 1}}));
  EXPECT_FALSE(Envelope::from_json(json{{"seq", 1}}));
  EXPECT_FALSE(Envelope::from_json(json::array()));
}

// Every other record: written, read back and written again gives the same
// JSON (so from_json reads every field to_json writes), nothing is left over
// as unknown, and a newer writer's fields, nested ones included, survive.
template <class R>
void expect_round_trip(const R& r) {
  const json j = r.to_json();
  EXPECT_EQ(j["type"], R::kType);
  EXPECT_EQ(j["v"], kSchema);
  auto back = R::from_json(j);
  ASSERT_TRUE(back) << j.dump();
  EXPECT_TRUE(back->meta.extra.empty()) << R::kType << ": read as unknown: " << back->meta.extra.dump();
  EXPECT_EQ(back->to_json(), j) << R::kType;
  json newer = j;
  newer["seq"] = 7;
  newer["ts"] = "2026-11-30T08:00:00.000Z";
  newer["a_newer_field"] = {{"x", 1}};
  auto kept = R::from_json(newer);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->to_json(), newer) << R::kType;
  EXPECT_FALSE(R::from_json(json{{"type", "not_" + std::string(R::kType)}}));
}

TEST(EventRecords, EvalRoundTrips) {
  Eval e;
  e.task = "linear_gelu";
  e.candidate = "linear_gelu-s3";
  e.status = "correct";
  e.speedup_compile = 1.25;
  e.speedup_eager = 2.5;
  e.runtime_ms = 0.031;
  e.uses_pytorch = true;
  e.e2e = true;
  e.queued_s = 0.5;
  e.eval_s = 3.25;
  e.baseline_s = 1.0;
  e.waited_s = 0.75;
  e.scope = "e2e";
  e.iteration = 2;
  e.reward = 1.25;
  e.cached = true;
  expect_round_trip(e);
  EXPECT_FALSE(e.to_json().contains("compile_tf32_ms")) << "not measured: absent";
  e.compile_tf32_ms = 0.02;  // --baseline-tf32
  e.speedup_compile_tf32 = 0.65;
  expect_round_trip(e);
  Eval failed;
  failed.status = "incorrect";
  failed.kind = "mismatch";
  expect_round_trip(failed);
  EXPECT_TRUE(failed.to_json()["speedup_compile"].is_null()) << "unknown is null, never 0";
}

TEST(EventRecords, TopologyRoundTrips) {
  TopologyChange t;
  t.iteration = 3;
  t.change = "split";
  t.subproblems = {{"a", "correct"}, {"b1", "new"}, {"b2", "new"}};
  t.detail = "split b into b1, b2";
  t.from = {"b"};
  t.into = {"b1", "b2"};
  t.reason = "split";
  t.diff = {{"added", {"b1", "b2"}}, {"removed", {"b"}}, {"kept", {"a"}}};
  t.worker = 1;
  t.round = 0;
  t.failing = {"b"};
  t.subproblems_unknown = true;
  expect_round_trip(t);
  expect_round_trip(TopologyChange{.iteration = 0, .change = "fallback"});
}

TEST(EventRecords, IterationRoundTrips) {
  Iteration it;
  it.t = 2;
  it.e2e = {"skipped", std::nullopt, std::nullopt, std::nullopt, {"b"}};
  SubkernelSummary a;
  a.name = "a";
  a.correct = true;
  a.speedup_compile = 1.5;
  a.runtime_ms = 0.2;
  a.share = 0.4;
  a.uses_pytorch = true;
  a.roofline = {{"fraction", 0.5}, {"bound", "memory"}};
  a.calls = 4;
  a.budget = 2;
  SubkernelSummary b;
  b.name = "b";
  b.status = "incorrect";
  it.subkernels = {a, b};
  it.calls_used = 9;
  it.tokens = 1234;
  it.method = "mkevolve";
  it.topology_change = "split";
  it.speedup = 0.0;
  it.best_speedup = 1.1;
  it.correct = false;
  it.kernel_calls = 8;
  expect_round_trip(it);
  EXPECT_EQ(it.to_json()["iteration"], 2) << "older readers take t from 'iteration'";
  // A newer writer's field inside a subkernel and inside e2e stays where it was.
  json j = it.to_json();
  j["subkernels"][1]["new_per_kernel"] = 3;
  j["e2e"]["new_e2e"] = "x";
  auto back = Iteration::from_json(j);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->to_json(), j);
}

TEST(EventRecords, BestRoundTrips) {
  Best b;
  b.t = 2;
  b.speedup_compile = 1.1;
  b.method = "mkevolve";
  b.subproblems = {"a", "b"};
  b.contains_pytorch_subkernels = true;
  b.speedup = 1.1;
  expect_round_trip(b);
  // An older log's placeholder for an iteration without a correct solution.
  auto old = Best::from_json(json{{"type", "best"}, {"t", 1}, {"speedup_compile", nullptr}, {"correct", false}});
  ASSERT_TRUE(old);
  EXPECT_FALSE(old->correct);
  EXPECT_FALSE(old->speedup_compile);
}

TEST(EventRecords, TheSearchsOtherRecordsRoundTrip) {
  expect_round_trip(ReplyError{"p", "decompose", 0, "no files in the reply", ""});
  expect_round_trip(ReplyError{"a", "generate", 2, "no kernel.py", "a-s3"});
  expect_round_trip(VerifyDecomposition{"p", "split", 3, 1, false, {"b1: output differs"}, 0.25});
  expect_round_trip(VerifyDecomposition{"p", "decompose", 0, 0, true, {}, std::nullopt});
  expect_round_trip(Judge{"a", "a-s3", 1, "cheat", "calls torch.matmul", ""});
  expect_round_trip(Judge{"a", "final", 2, "failed", "HTTP 500", "hold"});
  expect_round_trip(ReuseMatch{"b", "/runs/r1", "b_old", "same source", "b-reused", "correct", true, 6});
  expect_round_trip(Budget{2, {{"a", 3}, {"b", 1}}, "runtime"});
  expect_round_trip(SwapSkipped{0.9, "fewer than two subkernels"});
  SwapRejected r;
  r.replaced = {{"a", "pytorch", 0.5}, {"b", "user kernel", std::nullopt}};
  r.tau = 0.9;
  r.speedup_before = 1.2;
  r.reason = "the composition with the replacements failed end to end";
  expect_round_trip(r);
  SwapRejected cli;
  cli.replaced = {{"a", "a_fast.py", std::nullopt}};
  cli.speedup_before = 1.2;
  cli.reason = "the replacement failed its check";
  cli.result = {{"status", "incorrect"}, {"kind", "mismatch"}};
  expect_round_trip(cli);
  // The older shape of `mkevolve swap`'s record reads into the one shape.
  auto old = SwapRejected::from_json(json{{"type", "swap_rejected"}, {"name", "a"}, {"to", "a_fast.py"},
                                          {"reason", "failed"}});
  ASSERT_TRUE(old);
  ASSERT_EQ(old->replaced.size(), 1u);
  EXPECT_EQ(old->replaced[0].with, "a_fast.py");
  EXPECT_TRUE(old->meta.extra.empty()) << old->meta.extra.dump();
}

TEST(EventRecords, TheRunsFrameRecordsRoundTrip) {
  RunStart rs;
  rs.method = "mkevolve";
  rs.problem = "mlp";
  rs.settings = {{"T", 2}, {"max_calls", 8}};
  rs.problem_hash = "abc";
  rs.options = {{"iterations", 2}};
  rs.prompts_version = "p1";
  rs.llm = "replay:s.jsonl";
  rs.judge = "";
  rs.hardware = "CPU";
  expect_round_trip(rs);
  expect_round_trip(Resume{12, {"took over a stale lock"}, {{"--llm", "openai:a", "openai:b"}}});
  expect_round_trip(Resume{3, {}, {}});
  expect_round_trip(Preflight{"problem", true, 0.25, ""});
  FinalCheck f;
  f.passed = true;
  f.seed = 43;
  f.status = "correct";
  f.speedup_compile = 1.2;
  f.iteration = 2;
  f.fallback = 1;
  expect_round_trip(f);
  f.speedup_compile_tf32 = 0.8;  // --baseline-tf32
  expect_round_trip(f);
  EXPECT_DOUBLE_EQ(f.to_json()["speedup_compile_tf32"].get<double>(), 0.8);
  Swap search;
  search.name = "a";
  search.from = "a-s3";
  search.to = "pytorch";
  search.speedup_before = 1.1;
  search.speedup_after = 1.2;
  search.triggered = true;
  search.tau = 0.9;
  search.correct = true;
  search.contains_pytorch_subkernels = true;
  expect_round_trip(search);
  EXPECT_TRUE(search.to_json()["subkernel_speedup"].is_null()) << "the search's: null when unknown";
  Swap cli;
  cli.name = "a";
  cli.from = "a-s3";
  cli.to = "a_fast.py";
  cli.local = {{"status", "correct"}};
  cli.e2e = {{"status", "correct"}};
  cli.contains_pytorch_subkernels = false;
  cli.by = "mkevolve swap";
  expect_round_trip(cli);
  Postfuse pf;
  pf.attempt = 4;
  pf.status = "not accepted";
  pf.accepted = false;
  pf.modular_speedup = 1.1;
  expect_round_trip(pf);
  expect_round_trip(Postfuse{.status = "skipped", .accepted = false, .detail = "the solution is already a single kernel"});
  RunEnd e;
  e.status = "finished";
  e.best_speedup_compile = 1.2;
  e.solution_dir = "solution";
  e.result = "ok";
  e.correct = true;
  e.contains_pytorch_subkernels = false;
  e.solution = {{"iteration", 2}};
  e.accounting = {{"calls", 9}};
  expect_round_trip(e);
  expect_round_trip(RunEnd{.status = "interrupted"});
}

TEST(EventRecords, TheFinalCheckOutcomeIsTheDecidingCheckAfterTheLastResume) {
  auto check = [](bool passed, const std::string& status, int iteration, int fallback, const std::string& msg = "") {
    FinalCheck f;
    f.passed = passed;
    f.seed = 43;
    f.status = status;
    f.kind = passed ? "ok" : "wrong_values";
    f.iteration = iteration;
    f.fallback = fallback;
    f.message = msg;
    return f.to_json();
  };
  EXPECT_TRUE(final_check_outcome({}).result.empty());
  EXPECT_TRUE(final_check_outcome({}).to_json().is_null());
  EXPECT_EQ(final_check_outcome({}).text(), "");
  // Two better solutions failed; the third, of iteration 2, passed.
  auto o = final_check_outcome(records::parse_log({check(false, "incorrect", 5, 0, "wrong"), check(false, "incorrect", 4, 1, "wrong"),
                                check(true, "correct", 2, 2)}));
  EXPECT_EQ(o.result, "passed");
  EXPECT_EQ(o.failed_before, 2);
  EXPECT_EQ(o.iteration, 2);
  EXPECT_EQ(o.text(), "passed by the solution of iteration 2 (fresh seed 43, every check on), after 2 better "
                      "solutions failed it");
  EXPECT_EQ(o.to_json()["result"], "passed");
  EXPECT_EQ(o.to_json()["failed_before"], 2);
  // All failed, and the run finished: no correct kernel.
  o = final_check_outcome(records::parse_log({check(false, "incorrect", 5, 0), check(false, "cheating", 4, 1),
                           RunEnd{.status = "finished", .result = "no_correct"}.to_json()}));
  EXPECT_EQ(o.result, "failed");
  EXPECT_EQ(o.text(), "failed by each of the 2 solutions checked (last: cheating, wrong_values): no correct kernel "
                      "is returned");
  // A failure the run stopped after (interrupted), or has not finished since, decides nothing yet.
  for (const auto& tail : std::vector<std::vector<json>>{{RunEnd{.status = "interrupted"}.to_json()}, {}}) {
    std::vector<json> ev{check(false, "incorrect", 5, 0)};
    ev.insert(ev.end(), tail.begin(), tail.end());
    o = final_check_outcome(records::parse_log(ev));
    EXPECT_EQ(o.result, "incomplete");
    EXPECT_EQ(o.text(), "not finished: the best solution failed it (last: incorrect, wrong_values) and the run "
                        "stopped before the next-best was checked; a resume checks again");
  }
  // The judge could not be asked: the evaluation itself passed.
  FinalCheck judged;
  judged.seed = 43;
  judged.status = "no_verdict";
  judged.kind = "judge_failed";
  judged.iteration = 3;
  judged.message = "the cheat judge could not be asked: timeout";
  o = final_check_outcome(records::parse_log({judged.to_json()}));
  EXPECT_EQ(o.text(), "no verdict from the cheat judge (the cheat judge could not be asked: timeout): the solution "
                      "of iteration 3 passed the fresh-seed evaluation (fresh seed 43, every check on) and is "
                      "returned without the judge's second look");
  // No verdict after one failure.
  o = final_check_outcome(records::parse_log({check(false, "incorrect", 5, 0), check(false, "no_verdict", 4, 1, "the worker died")}));
  EXPECT_EQ(o.result, "no_verdict");
  EXPECT_EQ(o.text(), "no verdict (the worker died): the solution of iteration 4 is returned on its verdict from "
                      "the search, not checked again; before it, 1 better solution failed it");
  EXPECT_EQ(o.to_json()["message"], "the worker died");
  // A resumed process checks again: only its checks count.
  o = final_check_outcome(records::parse_log({check(false, "incorrect", 5, 0), Resume{12, {}, {}}.to_json(), check(true, "correct", 5, 0)}));
  EXPECT_EQ(o.result, "passed");
  EXPECT_EQ(o.failed_before, 0);
  EXPECT_EQ(o.text(), "passed (fresh seed 43, every check on)");
}

}  // namespace
}  // namespace mk::records
