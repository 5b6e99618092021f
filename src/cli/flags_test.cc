// The flag table against itself and against every command's help: each entry
// serves a command, no two share a name, and what `mkevolve help CMD` lists is
// what the table says CMD takes.
#include "cli/flags.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/registry.h"

namespace mk::cli {
namespace {

// Options of another command's meaning that a command declares itself under
// a table name (ask's LLM options carry ask's own defaults; calibrate's --seed
// seeds only the weights).
const std::map<std::string, std::set<std::string>> kOwnNamesakes = {
    {"ask",
     {"--llm", "--max-tokens", "--reasoning-effort", "--base-url", "--config", "--record", "--llm-concurrency",
      "--timeout"}},
    {"calibrate", {"--seed"}},
};

struct Ran {
  int rc = -1;
  std::string out, err;
};

// Runs command `name` in this process with args, capturing stdout and stderr.
Ran run_command(const std::string& name, std::vector<std::string> args) {
  const Command* cmd = nullptr;
  for (const auto& c : commands())
    if (c.name == name) cmd = &c;
  if (!cmd) return {};
  args.insert(args.begin(), "mkevolve " + name);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  char out_path[] = "/tmp/mk_flags_test_out_XXXXXX", err_path[] = "/tmp/mk_flags_test_err_XXXXXX";
  int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
  std::fflush(stdout);
  std::fflush(stderr);
  int saved_out = dup(1), saved_err = dup(2);
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  Ran r;
  r.rc = cmd->fn(static_cast<int>(args.size()), argv.data());
  std::cout.flush();
  std::cerr.flush();
  std::fflush(stdout);
  std::fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  close(out_fd);
  close(err_fd);
  auto slurp = [](const char* p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  unlink(out_path);
  unlink(err_path);
  return r;
}

// The long option names `mkevolve help CMD` lists (not --help).
std::set<std::string> help_options(const std::string& help) {
  static const std::regex line(R"(^  (-[A-Za-z0-9],)?(--[a-z0-9-]+))");
  std::set<std::string> names;
  std::istringstream in(help);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_search(l, m, line) && m[2] != "--help") names.insert(m[2]);
  }
  return names;
}

std::set<std::string> command_names() {
  std::set<std::string> names;
  for (const auto& c : commands()) names.insert(c.name);
  return names;
}

TEST(FlagTable, EveryEntryServesAKnownCommand) {
  const auto known = command_names();
  ASSERT_GE(known.size(), 10u);
  for (const auto& s : flag_table()) {
    EXPECT_FALSE(s.commands.empty()) << s.long_name() << " serves no command";
    for (const auto& c : s.commands) EXPECT_TRUE(known.count(c)) << s.long_name() << " names no command '" << c << "'";
    EXPECT_FALSE(s.help.empty()) << s.long_name();
    EXPECT_TRUE(s.add && s.copy) << s.long_name();
  }
}

TEST(FlagTable, NoTwoEntriesShareAName) {
  std::set<std::string> seen;
  for (const auto& s : flag_table()) {
    EXPECT_EQ(s.long_name().rfind("--", 0), 0u) << s.names;
    EXPECT_TRUE(seen.insert(s.long_name()).second) << s.long_name() << " is declared twice";
  }
}

TEST(FlagTable, EnvironmentVariablesAreInTheHelp) {
  for (const auto& s : flag_table())
    if (!s.env.empty()) {
      EXPECT_NE(s.help.find("$" + s.env), std::string::npos) << s.long_name();
    }
}

TEST(FlagTable, EachCommandsHelpListsExactlyItsTableFlags) {
  for (const auto& c : commands()) {
    Ran r = run_command(c.name, {"--help"});
    ASSERT_EQ(r.rc, kExitOk) << c.name << ": " << r.err;
    const auto shown = help_options(r.out);
    ASSERT_FALSE(shown.empty()) << c.name << " help lists no option:\n" << r.out;
    for (const auto& s : flag_table()) {
      const bool listed = shown.count(s.long_name()) > 0;
      const bool own = kOwnNamesakes.count(c.name) && kOwnNamesakes.at(c.name).count(s.long_name());
      if (s.serves(c.name))
        EXPECT_EQ(listed, !s.group.empty()) << c.name << " " << s.long_name()
                                            << (s.group.empty() ? " is hidden but listed" : " is not in its help");
      else
        EXPECT_TRUE(!listed || own) << c.name << " lists " << s.long_name() << " outside the table";
    }
  }
}

TEST(FlagTable, AddFlagsAddsWhatTheTableSays) {
  for (const auto& cmd : command_names()) {
    CLI::App app{"test"};
    Flags f;
    add_flags(app, cmd, f);
    size_t want = 0;
    for (const auto& s : flag_table()) {
      if (!s.serves(cmd)) continue;
      ++want;
      const CLI::Option* o = app.get_option_no_throw(s.long_name());
      ASSERT_NE(o, nullptr) << cmd << " " << s.long_name();
      EXPECT_EQ(o->get_group(), s.group) << cmd << " " << s.long_name();
    }
    EXPECT_EQ(app.get_options([](const CLI::Option* o) { return o->nonpositional(); }).size(), want + 1)  // + --help
        << cmd;
  }
}

TEST(FlagTable, TakeGivenCopiesOnlyWhatWasGiven) {
  CLI::App app{"test"};
  Flags given;
  add_flags(app, "adapt", given);
  app.parse("--trials 7 --timeout 120", false);
  Flags earlier;
  earlier.search.eval.trials = 3;
  earlier.search.eval.perf_trials = 33;
  take_given(app, "adapt", "Evaluation", given, &earlier);
  EXPECT_EQ(earlier.search.eval.trials, 7);
  EXPECT_EQ(earlier.search.eval.timeout_s, 120);
  EXPECT_EQ(earlier.search.eval.perf_trials, 33);  // not given: the earlier run's
}

TEST(FlagTable, AdaptTakesTheEvaluatorSettingsRunTakes) {
  // Fails before the table: "unknown option '--trials'". Now the flags parse
  // and the command stops at the missing run directory.
  Ran r = run_command("adapt", {"/nonexistent/mk-run", "variant.py", "--out", "/nonexistent/mk-out", "--trials", "2",
                                "--perf-trials", "2", "--warmup", "1", "--timeout", "120"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_EQ(r.err.find("unknown option"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not expected"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/mk-run"), std::string::npos) << r.err;
  for (const auto& s : flag_table())
    if (s.serves("run") && s.group == "Evaluation") {
      EXPECT_TRUE(s.serves("adapt")) << s.long_name();
    }
}

TEST(PoolOptions, FromTheMachineFlags) {
  EnvFlags f;
  f.slots_per_gpu = 3;
  f.no_prestart = true;
  f.gpu = 1;
  auto po = pool_options(f, "/usr/bin/python3");
  EXPECT_EQ(po.python, "/usr/bin/python3");
  EXPECT_EQ(po.slots_per_gpu, 3);
  EXPECT_FALSE(po.prestart);
  EXPECT_EQ(po.only_gpu, 1);
  EXPECT_FALSE(po.test_mode);
  f.test_cpu = true;
  po = pool_options(f, "py");
  EXPECT_TRUE(po.test_mode);
  EXPECT_EQ(po.only_gpu, -1);
  ASSERT_TRUE(po.gpus.has_value());
  EXPECT_TRUE(po.gpus->empty());
}

}  // namespace
}  // namespace mk::cli
