#include "util/config.h"

#include <gtest/gtest.h>

#include "util/fs.h"

namespace mk {
namespace {

const char* kText = R"(python = "/usr/bin/python3"

[llm]
provider = "openai:gpt-4o"
concurrency = 8
timeout_s = 12.5
cache = false
stop = ["a", "b"]

[llm.prices."openai:gpt-4o"]
input = 2.5
output = 10
)";

TEST(Config, TypedAccessors) {
  auto c = Config::parse(kText, "mk.toml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(*c->get_string("llm.provider", ""), "openai:gpt-4o");
  EXPECT_EQ(*c->get_int("llm.concurrency", 1), 8);
  EXPECT_DOUBLE_EQ(*c->get_number("llm.timeout_s", 1), 12.5);
  EXPECT_DOUBLE_EQ(*c->get_number("llm.concurrency", 1), 8.0);  // integers are numbers
  EXPECT_FALSE(*c->get_bool("llm.cache", true));
  EXPECT_EQ(*c->get_int("llm.missing", 42), 42);
  EXPECT_EQ((*c->find_strings("llm.stop"))->size(), 2u);
  EXPECT_DOUBLE_EQ(*c->get_number("llm.prices.\"openai:gpt-4o\".output", 0), 10.0);
  auto keys = c->table_keys("llm.prices");
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0], "openai:gpt-4o");
  EXPECT_TRUE(c->has("python"));
  EXPECT_FALSE(c->has("llm.nothing"));
}

TEST(Config, WrongTypeNamesFileLineAndKey) {
  auto c = Config::parse(kText, "mk.toml");
  ASSERT_TRUE(c.ok());
  auto r = c->get_int("llm.provider", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "mk.toml:4: llm.provider: expected an integer, found a string");
  auto b = c->get_bool("llm.concurrency", false);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().find("mk.toml:5: llm.concurrency"), std::string::npos) << b.error();
  auto t = c->table_keys("llm.provider");
  EXPECT_FALSE(t.ok());
}

TEST(Config, SyntaxErrorNamesLine) {
  auto c = Config::parse("a = 1\nb = = 2\n", "bad.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().rfind("bad.toml:2: invalid TOML", 0), 0u) << c.error();
}

TEST(Config, EmptyConfigGivesDefaults) {
  Config c;
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(*c.get_string("llm.provider", "x"), "x");
  EXPECT_TRUE(c.table_keys("llm.prices")->empty());
}

TEST(Config, SearchOrder) {
  TempDir d;
  fs::path cwd = d.path() / "work", home = d.path() / "home";
  fs::create_directories(cwd);
  // Nothing anywhere: empty.
  auto none = Config::discover({}, cwd, home);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->path().empty());
  // The user file.
  ASSERT_TRUE(write_file_atomic(home / ".config/mkevolve/config.toml", "x = 1\n").ok());
  auto user = Config::discover({}, cwd, home);
  ASSERT_TRUE(user.ok());
  EXPECT_EQ(*user->get_int("x", 0), 1);
  // ./mkevolve.toml wins over the user file.
  ASSERT_TRUE(write_file_atomic(cwd / "mkevolve.toml", "x = 2\n").ok());
  auto local = Config::discover({}, cwd, home);
  EXPECT_EQ(*local->get_int("x", 0), 2);
  // --config wins over both; a missing --config file is an error.
  ASSERT_TRUE(write_file_atomic(d.path() / "explicit.toml", "x = 3\n").ok());
  EXPECT_EQ(*Config::discover(d.path() / "explicit.toml", cwd, home)->get_int("x", 0), 3);
  auto missing = Config::discover(d.path() / "nope.toml", cwd, home);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("nope.toml"), std::string::npos);
  // Errors from a discovered file name that file.
  ASSERT_TRUE(write_file_atomic(cwd / "mkevolve.toml", "x = \"two\"\n").ok());
  auto bad = Config::discover({}, cwd, home);
  ASSERT_TRUE(bad.ok());
  auto x = bad->get_int("x", 0);
  ASSERT_FALSE(x.ok());
  EXPECT_NE(x.error().find((cwd / "mkevolve.toml").string() + ":1: x:"), std::string::npos) << x.error();
}

TEST(Config, UnknownKeysAreNamedWithFileLineAndANearMiss) {
  auto c = Config::parse(R"(python = "p"
pyhton = "q"

[llm]
provder = "openai:x"
concurrency = 4

[llm.providers.local]
spec = "openai:m"
base_ur = "http://h"

[llm.prices."openai:gpt-4o"]
input = 1.0

[search]
beam = 4
)",
                         "mk.toml");
  ASSERT_TRUE(c.ok()) << c.error();
  std::vector<std::string> known = {"python", "llm.provider", "llm.concurrency", "llm.providers.*.spec",
                                    "llm.providers.*.base_url", "llm.prices.*.input"};
  auto w = c->unknown_keys(known);
  ASSERT_EQ(w.size(), 4u) << ::testing::PrintToString(w);
  EXPECT_EQ(w[0], "mk.toml:2: unknown key 'pyhton' (ignored); did you mean 'python'?");
  EXPECT_EQ(w[1], "mk.toml:5: unknown key 'llm.provder' (ignored); did you mean 'llm.provider'?");
  EXPECT_EQ(w[2], "mk.toml:10: unknown key 'llm.providers.local.base_ur' (ignored); did you mean "
                  "'llm.providers.local.base_url'?");
  EXPECT_EQ(w[3], "mk.toml:15: unknown key 'search' (ignored)");
  EXPECT_TRUE(Config::parse("python = \"p\"\n", "a.toml")->unknown_keys(known).empty());
}

TEST(Config, SplitKeyHonoursQuotes) {
  auto parts = Config::split_key("llm.prices.\"a.b:c\".input");
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[2], "a.b:c");
}

}  // namespace
}  // namespace mk
