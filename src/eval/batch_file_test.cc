// Unit tests of batch files (`mkevolve eval --batch FILE`): the line format,
// relative paths, and the on-disk checks that name FILE:LINE.
#include "eval/batch_file.h"

#include <gtest/gtest.h>

#include "util/fs.h"

namespace mk::eval {
namespace {

namespace fs = std::filesystem;

// gmock is not linked into the component tests: a plain substring check.
::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' lacks '" << part << "'";
}

TEST(BatchFields, SplitsOnSpacesAndTabs) {
  auto f = split_batch_fields("  a.py \t\t b.py   ");
  ASSERT_TRUE(f) << f.error();
  EXPECT_EQ(*f, (std::vector<std::string>{"a.py", "b.py"}));
}

TEST(BatchFields, QuotesGroupSpaces) {
  auto f = split_batch_fields("\"my problems/a.py\"\t\"k dir/k.py\"");
  ASSERT_TRUE(f) << f.error();
  EXPECT_EQ(*f, (std::vector<std::string>{"my problems/a.py", "k dir/k.py"}));
}

TEST(BatchFields, RejectsBadQuoting) {
  EXPECT_TRUE(Contains(split_batch_fields("\"a.py b.py").error(), "unterminated quote"));
  EXPECT_TRUE(Contains(split_batch_fields("\"a.py\"x b.py").error(), "after a closing quote"));
  EXPECT_TRUE(Contains(split_batch_fields("a\"b.py c.py").error(), "quote inside"));
  EXPECT_TRUE(Contains(split_batch_fields("\"\" c.py").error(), "empty"));
}

TEST(BatchParse, SkipsCommentsAndBlankLines) {
  auto r = parse_batch("# pairs\n\n   \n  # indented comment\np.py k.py\n\t\nq.py l.py\n", "b.txt");
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(r->ok()) << r->errors.front();
  ASSERT_EQ(r->pairs.size(), 2u);
  EXPECT_EQ(r->pairs[0].problem, fs::path("p.py"));
  EXPECT_EQ(r->pairs[0].kernel, fs::path("k.py"));
  EXPECT_EQ(r->pairs[0].line, 5);
  EXPECT_EQ(r->pairs[1].problem, fs::path("q.py"));
  EXPECT_EQ(r->pairs[1].line, 7);
}

TEST(BatchParse, RelativePathsAreAnchoredAtTheFilesDirectory) {
  auto r = parse_batch("p.py ../k/k.py\n/abs/p.py /abs/k.py\n", "/data/batches/b.txt");
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(r->ok()) << r->errors.front();
  ASSERT_EQ(r->pairs.size(), 2u);
  EXPECT_EQ(r->pairs[0].problem, fs::path("/data/batches/p.py"));
  EXPECT_EQ(r->pairs[0].kernel, fs::path("/data/batches/../k/k.py"));
  EXPECT_EQ(r->pairs[1].problem, fs::path("/abs/p.py"));
  EXPECT_EQ(r->pairs[1].kernel, fs::path("/abs/k.py"));
  // A batch file named relative to the working directory keeps its directory prefix.
  auto s = parse_batch("p.py k.py\n", "sub/b.txt");
  ASSERT_TRUE(s) << s.error();
  EXPECT_TRUE(s->ok());
  EXPECT_EQ(s->pairs[0].problem, fs::path("sub/p.py"));
}

TEST(BatchParse, MultipleSpacesTabsAndCrlf) {
  auto r = parse_batch("p.py     k.py\r\n\tq.py\t\tl.py\t\r\n# c\r\n\r\n", "b.txt");
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(r->ok()) << r->errors.front();
  ASSERT_EQ(r->pairs.size(), 2u);
  EXPECT_EQ(r->pairs[0].kernel, fs::path("k.py"));  // no stray '\r'
  EXPECT_EQ(r->pairs[1].problem, fs::path("q.py"));
  EXPECT_EQ(r->pairs[1].kernel, fs::path("l.py"));
  EXPECT_EQ(r->pairs[1].line, 2);
}

TEST(BatchParse, NoTrailingNewlineIsFine) {
  auto r = parse_batch("p.py k.py", "b.txt");
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(r->ok()) << r->errors.front();
  EXPECT_EQ(r->pairs.size(), 1u);
}

TEST(BatchParse, ReportsEveryMalformedLineWithFileAndLine) {
  auto r = parse_batch("p.py\np.py k.py\np.py k.py extra.py\r\n\"p.py k.py\n", "dir/b.txt");
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->errors, (std::vector<std::string>{
                           "dir/b.txt:1: expected 'PROBLEM KERNEL', got 'p.py'",
                           "dir/b.txt:3: expected 'PROBLEM KERNEL', got 'p.py k.py extra.py'",
                           "dir/b.txt:4: expected 'PROBLEM KERNEL', got '\"p.py k.py' (unterminated quote)"}));
  // The good line is kept, for further checks.
  ASSERT_EQ(r->pairs.size(), 1u);
  EXPECT_EQ(r->pairs[0].line, 2);
  // Only malformed lines is not "no pairs": the lines are reported instead.
  auto bad_only = parse_batch("one\n", "b.txt");
  ASSERT_TRUE(bad_only) << bad_only.error();
  EXPECT_EQ(bad_only->errors.size(), 1u);
}

TEST(BatchParse, AFileWithoutPairsIsAnError) {
  for (const char* text : {"", "\n\n", "# only a comment\n  \n"}) {
    auto r = parse_batch(text, "b.txt");
    ASSERT_FALSE(r) << "text: '" << text << "'";
    EXPECT_TRUE(Contains(r.error(), "b.txt: no pairs"));
  }
}

class BatchRead : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir.path() / "probs");
    fs::create_directories(dir.path() / "pkg");
    fs::create_directories(dir.path() / "empty_pkg");
    touch(dir.path() / "probs" / "p.py");
    touch(dir.path() / "k.py");
    touch(dir.path() / "pkg" / "decomposed_solution.py");
  }
  static void touch(const fs::path& p) { ASSERT_TRUE(write_file_atomic(p, "# test\n")); }
  fs::path write_batch(const std::string& text) {
    fs::path f = dir.path() / "batch.txt";
    EXPECT_TRUE(write_file_atomic(f, text));
    return f;
  }
  TempDir dir{"mk_batch_test"};
};

TEST_F(BatchRead, ResolvesRelativePathsAndSolutionPackages) {
  fs::path f = write_batch("probs/p.py k.py\n" + (dir.path() / "probs/p.py").string() + " pkg\n");
  auto r = read_batch_file(f);
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(r->ok()) << r->errors.front();
  ASSERT_EQ(r->pairs.size(), 2u);
  EXPECT_EQ(r->pairs[0].problem, dir.path() / "probs/p.py");
  EXPECT_EQ(r->pairs[0].kernel, dir.path() / "k.py");
  EXPECT_EQ(r->pairs[1].problem, dir.path() / "probs/p.py");
  EXPECT_EQ(r->pairs[1].kernel, dir.path() / "pkg" / "decomposed_solution.py");
}

TEST_F(BatchRead, NamesEveryBadLineInFileOrder) {
  fs::path f = write_batch(
      "probs/p.py k.py\n"        // 1: fine
      "probs/gone.py k.py\n"     // 2: missing problem
      "probs/p.py gone.py\n"     // 3: missing kernel
      "just-one-field\n"         // 4: malformed
      "probs k.py\n"             // 5: a directory as the problem
      "probs/p.py empty_pkg\n"); // 6: a directory without decomposed_solution.py
  auto r = read_batch_file(f);
  ASSERT_TRUE(r) << r.error();
  const std::string b = f.string();
  const std::string d = dir.path().string();
  EXPECT_EQ(r->errors, (std::vector<std::string>{
                           b + ":2: " + d + "/probs/gone.py: no such file",
                           b + ":3: " + d + "/gone.py: no such file",
                           b + ":4: expected 'PROBLEM KERNEL', got 'just-one-field'",
                           b + ":5: " + d + "/probs: not a regular file",
                           b + ":6: " + d + "/empty_pkg: a directory without decomposed_solution.py "
                               "(expected a kernel file or a solution package)"}));
  // Only the good line stays a pair.
  ASSERT_EQ(r->pairs.size(), 1u);
  EXPECT_EQ(r->pairs[0].line, 1);
}

TEST_F(BatchRead, MissingOrEmptyBatchFile) {
  auto missing = read_batch_file(dir.path() / "nope.txt");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), (dir.path() / "nope.txt").string() + ": no such file");
  auto directory = read_batch_file(dir.path() / "probs");
  ASSERT_FALSE(directory);
  EXPECT_TRUE(Contains(directory.error(), "not a regular file"));
  auto empty = read_batch_file(write_batch("# nothing yet\n"));
  ASSERT_FALSE(empty);
  EXPECT_TRUE(Contains(empty.error(), "no pairs"));
}

}  // namespace
}  // namespace mk::eval
