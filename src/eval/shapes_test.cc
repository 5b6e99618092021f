#include "eval/shapes.h"

#include <gtest/gtest.h>

#include "eval/cache.h"
#include "eval/protocol.h"
#include "eval/verdict.h"

namespace mk::eval {
namespace {

using nlohmann::json;

TEST(Shapes, ARunsModeBecomesEachRequestsMode) {
  // search: every candidate at the variants; check: only the returned solution.
  EXPECT_EQ(candidate_shapes("search"), "search");
  EXPECT_EQ(candidate_shapes("check"), "benchmark");
  EXPECT_EQ(candidate_shapes("benchmark"), "benchmark");
  EXPECT_EQ(final_shapes("search"), "check");
  EXPECT_EQ(final_shapes("check"), "check");
  EXPECT_EQ(final_shapes("benchmark"), "benchmark");
  EXPECT_TRUE(valid_shapes_mode("check"));
  EXPECT_FALSE(valid_shapes_mode("all"));
}

TEST(Shapes, TheModeTravelsToTheWorkerAndKeysTheCache) {
  EvalOptions o;
  EXPECT_EQ(o.shapes, "benchmark");  // what a request without --shapes asks the worker
  o.shapes = "search";
  EXPECT_EQ(options_to_json(o)["shapes"], "search");
  EvalIdentity id;
  EvalOptions bench, check = bench, search = bench;
  check.shapes = "check";
  search.shapes = "search";
  const std::string kb = result_key("p", "k", bench, id), kc = result_key("p", "k", check, id),
                    ks = result_key("p", "k", search, id);
  EXPECT_NE(kb, kc);
  EXPECT_NE(kc, ks);
  EXPECT_NE(kb, ks);
}

json verdict_checks() {
  return json::parse(R"json({"status":"correct","kind":"ok","checks":{"shapes":{
    "mode":"check","benchmark":"batch_size=16, seq_len=12",
    "variants":["batch_size=7, seq_len=5","batch_size=15, seq_len=11","batch_size=10, seq_len=19"],
    "held":["batch_size=15, seq_len=11"],
    "failed":[{"shape":"batch_size=7, seq_len=5","error":"RuntimeError: shape '[192, -1]' is invalid\nmore"}],
    "skipped":[{"shape":"batch_size=10, seq_len=19","error":"the reference cannot run it: ValueError"}],
    "kept":{"in_features":"get_init_inputs() reads it"},"error":null}}})json");
}

TEST(Shapes, TheVerdictsRecordIsReadAndSaidInOneLine) {
  auto v = Verdict::from_json(verdict_checks());
  ASSERT_TRUE(v.ok());
  auto r = ShapesRecord::from_checks(v->raw);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->mode, "check");
  EXPECT_EQ(r->held, std::vector<std::string>{"batch_size=15, seq_len=11"});
  ASSERT_EQ(r->failed.size(), 1u);
  EXPECT_EQ(r->failed[0].shape, "batch_size=7, seq_len=5");
  EXPECT_EQ(r->holds_at_text(),
            "benchmark (batch_size=16, seq_len=12) + 1 of 2 shape variants (batch_size=15, seq_len=11); fails at "
            "batch_size=7, seq_len=5: RuntimeError: shape '[192, -1]' is invalid; skipped batch_size=10, seq_len=19 "
            "(the reference cannot run it: ValueError)");
  // Round trip through the form a final_check event stores.
  auto back = ShapesRecord::from_json(r->to_json());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->holds_at_text(), r->holds_at_text());
  // No record: none.
  EXPECT_FALSE(ShapesRecord::from_checks(json::parse(R"({"checks":{}})")));
  EXPECT_FALSE(ShapesRecord::from_checks(json()));
}

TEST(Shapes, NoVariantSaysWhy) {
  ShapesRecord r;
  r.mode = "check";
  r.error = "the problem lists its own configurations (get_input_configs())";
  EXPECT_EQ(r.holds_at_text(), "benchmark only: the problem lists its own configurations (get_input_configs())");
  r.error.clear();
  r.not_reached = {"n=3"};
  EXPECT_EQ(r.holds_at_text(), "not verified at other shapes (it fails at the benchmark's)");
  // search: the first failing variant ends the evaluation; the rest are not tried.
  r.failed = {{"n=7", "mismatch"}};
  r.not_reached = {"n=15", "n=9"};
  EXPECT_EQ(r.holds_at_text(), "benchmark + 0 of 1 shape variants; fails at n=7: mismatch; 2 more not tried");
}

}  // namespace
}  // namespace mk::eval
