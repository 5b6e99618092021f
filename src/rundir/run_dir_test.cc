#include "rundir/run_dir.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "rundir/clock.h"
#include "rundir/event_log.h"
#include "records/events.h"
#include "rundir/interrupt.h"
#include "rundir/lock.h"
#include "rundir/secrets.h"
#include "util/fs.h"

namespace mk::rundir {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Versions test_versions() { return Versions{"0.1.0", "2.11.0", "3.6.0", "NVIDIA H200", "3.12.3"}; }

std::string slurp(const fs::path& p) {
  auto r = read_file(p);
  return r ? *r : std::string();
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    if (nl == std::string::npos) nl = s.size();
    out.push_back(s.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v)
    if (s.find(needle) != std::string::npos) return true;
  return false;
}

std::string host() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

void write_lock(const fs::path& dir, int pid, const std::string& h, const std::string& heartbeat, uint64_t proc_start = 0) {
  json j = {{"pid", pid}, {"host", h}, {"started", heartbeat}, {"heartbeat", heartbeat}, {"proc_start", proc_start}};
  ASSERT_TRUE(write_file_atomic(dir / "lock", j.dump()).ok());
}

// A pid that certainly belongs to no process: a child that has exited and been reaped.
int dead_pid() {
  pid_t p = fork();
  if (p == 0) _exit(0);
  int st;
  waitpid(p, &st, 0);
  return p;
}

// Creates a finished run with n events and closes it.
fs::path make_run(const TempDir& tmp, int n) {
  fs::path dir = tmp.path() / "run";
  auto rd = RunDir::create(dir, json{{"method", "mkevolve"}}, test_versions());
  EXPECT_TRUE(rd.ok()) << rd.error();
  for (int i = 0; i < n; ++i) EXPECT_TRUE((*rd)->log_event(records::parse_event(json{{"type", "best"}, {"t", i}})).ok());
  return dir;
}

TEST(RunDir, CreateWritesConfigVersionsAndLayout) {
  TempDir tmp;
  fs::path dir = tmp.path() / "a" / "run";
  auto rd = RunDir::create(dir, json{{"method", "mkevolve"}, {"T", 5}}, test_versions());
  ASSERT_TRUE(rd.ok()) << rd.error();
  EXPECT_EQ((*rd)->root(), dir);
  EXPECT_EQ(json::parse(slurp(dir / "config.json"))["T"], 5);
  json v = json::parse(slurp(dir / "versions.json"));
  EXPECT_EQ(v["torch"], "2.11.0");
  EXPECT_EQ(v["gpu"], "NVIDIA H200");
  EXPECT_EQ(v["tf32"], false);
  EXPECT_TRUE(fs::is_directory((*rd)->llm_cache_dir()));
  EXPECT_TRUE(fs::is_directory((*rd)->eval_cache_dir()));
  EXPECT_TRUE(fs::is_directory((*rd)->candidates_dir()));
  EXPECT_EQ((*rd)->solution_dir(), dir / "solution");
  EXPECT_TRUE(fs::exists(dir / "events.jsonl"));
  auto info = parse_lock(slurp(dir / "lock"));
  ASSERT_TRUE(info.ok()) << info.error();
  EXPECT_EQ(info->pid, getpid());
  EXPECT_EQ(info->host, host());
  rd->reset();
  EXPECT_FALSE(fs::exists(dir / "lock")) << "closing a run releases and removes its lock";
}

TEST(RunDir, RecordsItsFormatAndRefusesANewerOne) {
  TempDir tmp;
  fs::path dir = tmp.path() / "run";
  {
    auto rd = RunDir::create(dir, json{{"method", "mkevolve"}}, test_versions());
    ASSERT_TRUE(rd.ok()) << rd.error();
  }
  json v = json::parse(slurp(dir / "versions.json"));
  EXPECT_EQ(v["run_format"], kRunFormat);
  {
    auto same = RunDir::open(dir);
    ASSERT_TRUE(same.ok()) << same.error();
  }
  // A directory from before the number existed is read as before.
  v.erase("run_format");
  {
    std::ofstream(dir / "versions.json") << v.dump();
    auto old = RunDir::open(dir);
    ASSERT_TRUE(old.ok()) << old.error();
  }
  v["run_format"] = kRunFormat + 1;
  v["mkevolve"] = "9.9.9";
  std::ofstream(dir / "versions.json") << v.dump();
  auto newer = RunDir::open(dir);
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.error_kind(), ErrorKind::kBadInput);
  EXPECT_NE(newer.error().find("newer mkevolve (9.9.9)"), std::string::npos) << newer.error();
  EXPECT_NE(newer.error().find("format " + std::to_string(kRunFormat + 1)), std::string::npos) << newer.error();
  EXPECT_FALSE(fs::exists(dir / "lock")) << "a refused open leaves no lock behind";
}

TEST(RunDir, CreateRefusesANonEmptyDirectory) {
  TempDir tmp;
  fs::path dir = make_run(tmp, 1);
  auto again = RunDir::create(dir, json::object(), test_versions());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().find("not empty"), std::string::npos) << again.error();
  EXPECT_NE(again.error().find("--resume"), std::string::npos) << again.error();
}

TEST(RunDir, CreateAcceptsAnExistingEmptyDirectory) {
  TempDir tmp;
  fs::create_directories(tmp.path() / "empty");
  EXPECT_TRUE(RunDir::create(tmp.path() / "empty", json::object(), test_versions()).ok());
}

TEST(RunDir, CreateTakesOverAStaleLockInAnEmptyDirectory) {
  TempDir tmp;
  fs::path dir = tmp.path() / "run";
  fs::create_directories(dir);
  int pid = dead_pid();
  write_lock(dir, pid, host(), iso8601_utc());
  auto rd = RunDir::create(dir, json::object(), test_versions());
  ASSERT_TRUE(rd.ok()) << rd.error();
  EXPECT_TRUE(contains((*rd)->notices(), "stale lock")) << ::testing::PrintToString((*rd)->notices());
}

TEST(RunDir, UnwritablePathGivesAClearError) {
  TempDir tmp;
  ASSERT_TRUE(write_file_atomic(tmp.path() / "file", "x").ok());
  auto rd = RunDir::create(tmp.path() / "file" / "run", json::object(), test_versions());
  ASSERT_FALSE(rd.ok());
  EXPECT_NE(rd.error().find((tmp.path() / "file" / "run").string()), std::string::npos) << rd.error();
  EXPECT_NE(rd.error().find("Not a directory"), std::string::npos) << rd.error();
  auto rd2 = RunDir::create(tmp.path() / "file", json::object(), test_versions());
  ASSERT_FALSE(rd2.ok());
  EXPECT_NE(rd2.error().find("not a directory"), std::string::npos) << rd2.error();
}

TEST(RunDir, OpenNamesWhatIsMissing) {
  TempDir tmp;
  auto none = RunDir::open(tmp.path() / "nope");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().find("no such directory"), std::string::npos);
  auto not_run = RunDir::open(tmp.path());
  ASSERT_FALSE(not_run.ok());
  EXPECT_NE(not_run.error().find("no config.json"), std::string::npos);
}

TEST(Secrets, KeysThatLookLikeCredentials) {
  for (const char* k : {"api_key", "apiKey", "OPENAI_API_KEY", "secret", "aws_secret_access_key", "password",
                        "auth_token", "session_token", "token", "Authorization", "private_key", "key", "x-api-key"})
    EXPECT_TRUE(is_secret_key(k)) << k;
  for (const char* k : {"max_tokens", "token_budget", "tokens", "api_key_env", "key_file", "model", "cache_key_version",
                        "budget_per_iter", "secret_name", "reasoning_effort"})
    EXPECT_FALSE(is_secret_key(k)) << k;
  EXPECT_TRUE(is_secret_value("sk-ant-api03-abcdefghijklmnop"));
  EXPECT_TRUE(is_secret_value("Bearer abcdefghijklmnopqrstuv"));
  EXPECT_FALSE(is_secret_value("sk-"));
  EXPECT_FALSE(is_secret_value("anthropic:claude-opus-4-5"));
}

TEST(RunDir, ConfigSecretsAreLeftOut) {
  TempDir tmp;
  json config = {{"llm", {{"provider", "openai"}, {"api_key", "abc123abc123"}, {"api_key_env", "OPENAI_API_KEY"}}},
                 {"max_tokens", 16384},
                 {"headers", {"X-Test: 1", "Bearer abcdefghijklmnopqrstuvwxyz"}},
                 {"note", "sk-proj-0123456789abcdefghij"}};
  auto rd = RunDir::create(tmp.path() / "run", config, test_versions());
  ASSERT_TRUE(rd.ok()) << rd.error();
  std::string text = slurp(tmp.path() / "run" / "config.json");
  EXPECT_EQ(text.find("abc123abc123"), std::string::npos) << text;
  EXPECT_EQ(text.find("abcdefghijklmnopqrstuvwxyz"), std::string::npos) << text;
  EXPECT_EQ(text.find("sk-proj"), std::string::npos) << text;
  json j = json::parse(text);
  EXPECT_EQ(j["max_tokens"], 16384);
  EXPECT_EQ(j["llm"]["provider"], "openai");
  EXPECT_EQ(j["llm"]["api_key_env"], "OPENAI_API_KEY");
  EXPECT_EQ(j["headers"].size(), 1u);
  EXPECT_EQ((*rd)->config(), j);
  EXPECT_TRUE(contains((*rd)->notices(), "llm.api_key'")) << ::testing::PrintToString((*rd)->notices());
  EXPECT_TRUE(contains((*rd)->notices(), "headers[1]"));
  EXPECT_TRUE(contains((*rd)->notices(), "'note'"));
}

TEST(RunDir, EventsGetSeqAndTimestampAndSurviveReopen) {
  TempDir tmp;
  fs::path dir = tmp.path() / "run";
  {
    auto rd = RunDir::create(dir, json::object(), test_versions());
    ASSERT_TRUE(rd.ok());
    ASSERT_TRUE((*rd)->log_event(records::RunStart{.method = "mkevolve", .problem = "p.py", .settings = {{"T", 5}}}).ok());
    ASSERT_TRUE((*rd)->log_event(records::Best{.t = 1, .speedup_compile = 0.5}).ok());
    ASSERT_TRUE((*rd)->log_event(records::Best{.t = 2, .speedup_compile = 1.5}).ok());
    auto lines = lines_of(slurp(dir / "events.jsonl"));
    ASSERT_EQ(lines.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      json e = json::parse(lines[i]);
      EXPECT_EQ(e["seq"], i);
      EXPECT_TRUE(parse_iso8601_utc(e["ts"].get<std::string>()).has_value()) << e["ts"];
    }
    EXPECT_EQ((*rd)->events().size(), 3u);
    EXPECT_FALSE((*rd)->log_event(records::parse_event(json{{"no_type", 1}})).ok());
    EXPECT_FALSE((*rd)->log_event(records::parse_event(json::array())).ok());
  }
  auto rd = RunDir::open(dir);
  ASSERT_TRUE(rd.ok()) << rd.error();
  EXPECT_TRUE((*rd)->notices().empty()) << ::testing::PrintToString((*rd)->notices());
  auto evs = (*rd)->events();
  ASSERT_EQ(evs.size(), 3u);
  EXPECT_EQ(evs[0]["type"], "run_start");
  EXPECT_EQ(evs[2]["speedup_compile"], 1.5);
  ASSERT_TRUE((*rd)->log_event(records::Best{.t = 3, .speedup_compile = 2.0}).ok());
  EXPECT_EQ((*rd)->events().back()["seq"], 3);
  EXPECT_EQ((*rd)->versions()["python"], "3.12.3");
}

TEST(RunDir, ConcurrentEventsAreWholeLinesWithUniqueSeq) {
  TempDir tmp;
  auto rd = RunDir::create(tmp.path() / "run", json::object(), test_versions());
  ASSERT_TRUE(rd.ok());
  int heard = 0;
  (*rd)->add_listener([&](const records::Event&) { ++heard; });  // runs under the log's lock
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i)
        EXPECT_TRUE((*rd)->log_event(records::parse_event(json{{"type", "eval"}, {"task", "t" + std::to_string(t)},
                                                               {"i", i}, {"blob", std::string(300, 'x')}}))
                        .ok());
    });
  for (auto& th : threads) th.join();
  auto lines = lines_of(slurp(tmp.path() / "run" / "events.jsonl"));
  ASSERT_EQ(lines.size(), 240u);
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(json::parse(lines[i])["seq"], i);
  EXPECT_EQ(heard, 240);
}

TEST(RunDir, EventsWithInvalidUtf8AreStillLogged) {
  TempDir tmp;
  auto rd = RunDir::create(tmp.path() / "run", json::object(), test_versions());
  ASSERT_TRUE(rd.ok());
  ASSERT_TRUE((*rd)->log_event(records::parse_event(json{{"type", "llm_call"}, {"error", std::string("bad \xff\xfe bytes")}})).ok());
  auto evs = read_event_log(tmp.path() / "run" / "events.jsonl");
  ASSERT_TRUE(evs.ok()) << evs.error();
  EXPECT_EQ(evs->size(), 1u);
}

TEST(RunDir, TornLastLineIsMovedAsideAndReported) {
  TempDir tmp;
  fs::path dir = make_run(tmp, 2);
  const std::string torn = "{\"type\":\"eval\",\"task\":\"4a\",\"sta";
  ASSERT_TRUE(append_durable(dir / "events.jsonl", torn).ok());
  {
    auto rd = RunDir::open(dir);
    ASSERT_TRUE(rd.ok()) << rd.error();
    EXPECT_TRUE(contains((*rd)->notices(), "events.jsonl.corrupt-1")) << ::testing::PrintToString((*rd)->notices());
    EXPECT_TRUE(contains((*rd)->notices(), "line 3"));
    EXPECT_EQ(slurp(dir / "events.jsonl.corrupt-1"), torn);
    EXPECT_EQ((*rd)->events().size(), 2u);
    ASSERT_TRUE((*rd)->log_event(records::Best{.t = 9, .speedup_compile = 3.0}).ok());
    EXPECT_EQ((*rd)->events().back()["seq"], 2);
  }
  auto evs = read_event_log(dir / "events.jsonl");
  ASSERT_TRUE(evs.ok()) << evs.error();
  EXPECT_EQ(evs->size(), 3u);
  // A second crash: the next file name is used, nothing is overwritten.
  ASSERT_TRUE(append_durable(dir / "events.jsonl", std::string("{\"type\"") + std::string(10, '\0')).ok());
  auto rd = RunDir::open(dir);
  ASSERT_TRUE(rd.ok()) << rd.error();
  EXPECT_TRUE(fs::exists(dir / "events.jsonl.corrupt-2"));
  EXPECT_EQ(slurp(dir / "events.jsonl.corrupt-1"), torn);
  EXPECT_EQ((*rd)->events().size(), 3u);
}

TEST(RunDir, TrailingNulBlockAfterACrashIsATornTail) {
  TempDir tmp;
  fs::path dir = make_run(tmp, 1);
  ASSERT_TRUE(append_durable(dir / "events.jsonl", std::string(4096, '\0')).ok());
  auto rd = RunDir::open(dir);
  ASSERT_TRUE(rd.ok()) << rd.error();
  EXPECT_TRUE(fs::exists(dir / "events.jsonl.corrupt-1"));
  EXPECT_EQ((*rd)->events().size(), 1u);
}

TEST(RunDir, MissingFinalNewlineIsRepaired) {
  TempDir tmp;
  fs::path dir = make_run(tmp, 1);
  ASSERT_TRUE(append_durable(dir / "events.jsonl", "{\"type\":\"best\",\"seq\":1,\"t\":7}").ok());
  {
    auto rd = RunDir::open(dir);
    ASSERT_TRUE(rd.ok()) << rd.error();
    EXPECT_EQ((*rd)->events().size(), 2u);
    ASSERT_TRUE((*rd)->log_event(records::Best{.t = 8, .speedup_compile = 1.0}).ok());
  }
  auto lines = lines_of(slurp(dir / "events.jsonl"));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(json::parse(lines[2])["seq"], 2);
}

TEST(RunDir, CorruptMiddleLineIsAnErrorNamingTheLine) {
  TempDir tmp;
  fs::path dir = make_run(tmp, 3);
  auto lines = lines_of(slurp(dir / "events.jsonl"));
  std::string content = lines[0] + "\n" + "garbage{\n" + lines[1] + "\n" + lines[2] + "\n";
  ASSERT_TRUE(write_file_atomic(dir / "events.jsonl", content).ok());
  auto rd = RunDir::open(dir);
  ASSERT_FALSE(rd.ok());
  EXPECT_NE(rd.error().find("line 2"), std::string::npos) << rd.error();
  EXPECT_NE(rd.error().find("events.jsonl"), std::string::npos) << rd.error();
  EXPECT_EQ(slurp(dir / "events.jsonl"), content) << "a damaged log is never changed by open()";
  auto read = read_event_log(dir / "events.jsonl");
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.error().find("line 2"), std::string::npos);
}

TEST(EventLog, ReaderSkipsATornTailWithAWarning) {
  TempDir tmp;
  ASSERT_TRUE(write_file_atomic(tmp.path() / "e.jsonl", "{\"type\":\"a\"}\n\n{\"type\":\"b\"}\n{\"ty").ok());
  std::vector<std::string> warnings;
  auto evs = read_event_log(tmp.path() / "e.jsonl", &warnings);
  ASSERT_TRUE(evs.ok());
  EXPECT_EQ(evs->size(), 2u);
  EXPECT_TRUE(contains(warnings, "line 4"));
  EXPECT_FALSE(read_event_log(tmp.path() / "missing.jsonl").ok());
  // An object without "type" in the middle is damage too.
  EventLogScan scan = scan_event_log("{\"type\":\"a\"}\n{\"x\":1}\n{\"type\":\"b\"}\n");
  EXPECT_EQ(scan.bad_line, 2u);
}

// Disk full: RLIMIT_FSIZE makes a write fail part-way (EFBIG), exactly like a
// full disk does. Done in a child so the limit does not touch this process.
TEST(RunDir, AFailedAppendLeavesNoPartialLineAndSaysSo) {
  TempDir tmp;
  fs::path dir = make_run(tmp, 2);
  uintmax_t before = fs::file_size(dir / "events.jsonl");
  pid_t p = fork();
  if (p == 0) {
    auto rd = RunDir::open(dir);
    if (!rd.ok()) _exit(10);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl {};
    rl.rlim_cur = rl.rlim_max = before + 64;
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(11);
    Status st = (*rd)->log_event(records::parse_event(json{{"type", "eval"}, {"blob", std::string(1000, 'y')}}));
    if (st.ok()) _exit(12);
    if (st.error().find("File too large") == std::string::npos) _exit(13);
    if (st.error().find("--resume") == std::string::npos) _exit(14);
    // The run can go on (or stop cleanly) after a failed write: small events
    // still fit (a record of a type this build does not know is written as it is).
    if (!(*rd)->log_event(records::parse_event(json{{"type", "note"}})).ok()) _exit(15);
    if ((*rd)->events().back()["seq"] != 2) _exit(16);
    _exit(0);
  }
  int st;
  waitpid(p, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ(WEXITSTATUS(st), 0);
  auto evs = read_event_log(dir / "events.jsonl");
  ASSERT_TRUE(evs.ok()) << evs.error();
  ASSERT_EQ(evs->size(), 3u);
  EXPECT_EQ((*evs)[2]["type"], "note");
}

TEST(RunDir, WritesStayInsideTheRun) {
  TempDir tmp;
  auto rd = RunDir::create(tmp.path() / "run", json::object(), test_versions());
  ASSERT_TRUE(rd.ok());
  EXPECT_TRUE((*rd)->write_text("notes/a.txt", "hello").ok());
  EXPECT_EQ(slurp(tmp.path() / "run" / "notes" / "a.txt"), "hello");
  EXPECT_TRUE((*rd)->write_json(RunDir::topology_rel(2), json{{"subproblems", {"a"}}}).ok());
  EXPECT_EQ(json::parse(slurp(tmp.path() / "run" / "topology" / "iteration-2.json"))["subproblems"][0], "a");
  EXPECT_FALSE((*rd)->write_text("../escape.txt", "x").ok());
  EXPECT_FALSE((*rd)->write_text("/tmp/abs.txt", "x").ok());
  EXPECT_FALSE(fs::exists(tmp.path() / "escape.txt"));
}

TEST(RunDir, StoreCandidate) {
  TempDir tmp;
  auto rd = RunDir::create(tmp.path() / "run", json::object(), test_versions());
  ASSERT_TRUE(rd.ok());
  auto dir = (*rd)->store_candidate("4a_attention", "i2-b0-s3",
                                    {{"kernel.py", "import triton\n"}, {"helpers/util.py", "X = 1\n"}},
                                    json{{"status", "correct"}, {"runtime_ms", 0.5}});
  ASSERT_TRUE(dir.ok()) << dir.error();
  EXPECT_EQ(*dir, tmp.path() / "run" / "candidates" / "4a_attention" / "i2-b0-s3");
  EXPECT_EQ(slurp(*dir / "kernel.py"), "import triton\n");
  EXPECT_EQ(slurp(*dir / "helpers" / "util.py"), "X = 1\n");
  EXPECT_EQ(json::parse(slurp(*dir / "result.json"))["status"], "correct");
  EXPECT_FALSE((*rd)->store_candidate("../x", "1", {}, json::object()).ok());
  EXPECT_FALSE((*rd)->store_candidate("t", "a/b", {}, json::object()).ok());
  EXPECT_FALSE((*rd)->store_candidate("t", "", {}, json::object()).ok());
  EXPECT_FALSE((*rd)->store_candidate("t", "1", {{"../../evil.py", ""}}, json::object()).ok());
  EXPECT_FALSE((*rd)->store_candidate("t", "1", {{"result.json", "{}"}}, json::object()).ok());
}

TEST(RunLockTest, SecondOpenInTheSameProcessIsRefused) {
  TempDir tmp;
  fs::path dir = tmp.path() / "run";
  auto rd = RunDir::create(dir, json::object(), test_versions());
  ASSERT_TRUE(rd.ok());
  auto again = RunDir::open(dir);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().find("in use by pid " + std::to_string(getpid())), std::string::npos) << again.error();
  EXPECT_NE(again.error().find("remove " + (dir / "lock").string()), std::string::npos) << again.error();
}

TEST(RunLockTest, StaleLockFromADeadPidIsTakenOver) {
  TempDir tmp;
  fs::path dir = make_run(tmp, 1);
  int pid = dead_pid();
  write_lock(dir, pid, host(), iso8601_utc());
  auto rd = RunDir::open(dir);
  ASSERT_TRUE(rd.ok()) << rd.error();
  EXPECT_TRUE(contains((*rd)->notices(), "stale lock")) << ::testing::PrintToString((*rd)->notices());
  EXPECT_TRUE(contains((*rd)->notices(), "pid " + std::to_string(pid) + " (dead"));
  EXPECT_EQ(parse_lock(slurp(dir / "lock"))->pid, getpid());
}

TEST(RunLockTest, LockOfALiveProcessIsRespected) {
  TempDir tmp;
  fs::path dir = make_run(tmp, 1);
  pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  write_lock(dir, child, host(), "2026-01-01T00:00:00.000Z");
  auto rd = RunDir::open(dir);
  kill(child, SIGKILL);
  int st;
  waitpid(child, &st, 0);
  ASSERT_FALSE(rd.ok());
  EXPECT_NE(rd.error().find("in use by pid " + std::to_string(child) + " (started 2026-01-01"), std::string::npos)
      << rd.error();
  // Now it is dead: the same lock is stale.
  EXPECT_TRUE(RunDir::open(dir).ok());
}

TEST(RunLockTest, AReusedPidDoesNotKeepALockAlive) {
  TempDir tmp;
  fs::path dir = make_run(tmp, 1);
  uint64_t mine = own_proc_start();
  if (mine == 0) GTEST_SKIP() << "no /proc here";
  write_lock(dir, getppid(), host(), iso8601_utc(), mine + 12345);
  auto rd = RunDir::open(dir);
  ASSERT_TRUE(rd.ok()) << rd.error();
  EXPECT_TRUE(contains((*rd)->notices(), "stale lock"));
}

TEST(RunLockTest, OtherHostsLockDependsOnItsHeartbeat) {
  TempDir tmp;
  fs::path dir = make_run(tmp, 1);
  write_lock(dir, 4242, "other-host.example", iso8601_utc());
  auto fresh = RunDir::open(dir);
  ASSERT_FALSE(fresh.ok());
  EXPECT_NE(fresh.error().find("on host other-host.example"), std::string::npos) << fresh.error();
  write_lock(dir, 4242, "other-host.example", iso8601_utc(std::chrono::system_clock::now() - std::chrono::hours(2)));
  auto old = RunDir::open(dir);
  ASSERT_TRUE(old.ok()) << old.error();
  EXPECT_TRUE(contains((*old)->notices(), "other-host.example (last heartbeat 2h ago)"))
      << ::testing::PrintToString((*old)->notices());
}

TEST(RunLockTest, UnreadableLockFileIsReplaced) {
  TempDir tmp;
  fs::path dir = make_run(tmp, 1);
  ASSERT_TRUE(write_file_atomic(dir / "lock", "{\"pid\":").ok());
  auto rd = RunDir::open(dir);
  ASSERT_TRUE(rd.ok()) << rd.error();
  EXPECT_TRUE(contains((*rd)->notices(), "unreadable lock"));
}

TEST(RunLockTest, HeartbeatRewritesTheLock) {
  TempDir tmp;
  std::vector<std::string> notices;
  RunLock::Options o;
  o.heartbeat_interval = std::chrono::milliseconds(5);
  auto lock = RunLock::acquire(tmp.path() / "lock", &notices, o);
  ASSERT_TRUE(lock.ok()) << lock.error();
  std::string first = parse_lock(slurp(tmp.path() / "lock"))->heartbeat;
  // The background thread refreshes it; wait for that (no time limit asserted).
  std::string now = first;
  for (int i = 0; i < 2000 && now == first; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto info = parse_lock(slurp(tmp.path() / "lock"));
    if (info) now = info->heartbeat;
  }
  EXPECT_NE(now, first);
  EXPECT_TRUE((*lock)->heartbeat().ok());
}

// N processes race to create (or open) the same run; every winner holds it
// until all have tried, so exactly one may win.
int race(const fs::path& dir, bool create, int n) {
  int results[2], release[2];
  EXPECT_EQ(pipe(results), 0);
  EXPECT_EQ(pipe(release), 0);
  std::vector<pid_t> kids;
  for (int i = 0; i < n; ++i) {
    pid_t p = fork();
    if (p == 0) {
      close(results[0]);
      close(release[1]);
      bool won;
      {
        auto rd = create ? RunDir::create(dir, json{{"who", i}}, test_versions()) : RunDir::open(dir);
        won = rd.ok();
        char c = won ? 'W' : 'L';
        if (write(results[1], &c, 1) != 1) _exit(3);
        char buf;
        while (read(release[0], &buf, 1) > 0) {
        }
      }
      _exit(0);
    }
    kids.push_back(p);
  }
  close(results[1]);
  close(release[0]);
  int wins = 0;
  for (int i = 0; i < n; ++i) {
    char c = 0;
    if (read(results[0], &c, 1) == 1 && c == 'W') ++wins;
  }
  close(release[1]);
  close(results[0]);
  for (pid_t p : kids) {
    int st;
    waitpid(p, &st, 0);
  }
  return wins;
}

TEST(RunLockTest, RacingCreatesHaveExactlyOneWinner) {
  for (int round = 0; round < 5; ++round) {
    TempDir tmp;
    EXPECT_EQ(race(tmp.path() / "run", /*create=*/true, 6), 1) << "round " << round;
    EXPECT_FALSE(fs::exists(tmp.path() / "run" / "lock"));
  }
}

TEST(RunLockTest, RacingOpensHaveExactlyOneWinner) {
  TempDir tmp;
  fs::path dir = make_run(tmp, 1);
  for (int round = 0; round < 5; ++round) EXPECT_EQ(race(dir, /*create=*/false, 6), 1) << "round " << round;
}

TEST(Clock, RoundTrip) {
  auto t = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764483373123));
  std::string s = iso8601_utc(t);
  EXPECT_EQ(s, "2025-11-30T06:16:13.123Z");
  EXPECT_EQ(parse_iso8601_utc(s), t);
  EXPECT_EQ(parse_iso8601_utc("2025-11-30T06:16:13Z"), t - std::chrono::milliseconds(123));
  EXPECT_FALSE(parse_iso8601_utc("yesterday").has_value());
}

TEST(Events, BuildersFollowTheSchema) {
  json c = records::LlmCall{.agent = "generate", .task = "4a", .usage = {.input = 10, .output = 5}, .latency_ms = 7}.to_json();
  EXPECT_EQ(c["type"], "llm_call");
  EXPECT_EQ(c["usage"]["input"], 10);
  EXPECT_EQ(c["usage"]["estimated"], false);
  EXPECT_EQ(c["ok"], true);
  EXPECT_FALSE(c.contains("error"));
  json f = records::LlmCall{.agent = "debug", .ok = false, .error = "HTTP 500"}.to_json();
  EXPECT_EQ(f["error"], "HTTP 500");
  json e = records::Eval{.task = "4a", .candidate = "c1", .status = "incorrect", .kind = "mismatch"}.to_json();
  EXPECT_TRUE(e["speedup_compile"].is_null());
  EXPECT_EQ(e["uses_pytorch"], false);
  json t = records::TopologyChange{.iteration = 2, .change = "split", .subproblems = {{"4a", "new"}, {"4b", "new"}},
                             .detail = "split 4", .from = {"4"}, .into = {"4a", "4b"}}.to_json();
  EXPECT_EQ(t["subproblems"][1]["name"], "4b");
  EXPECT_EQ(t["from"][0], "4");
  json it = records::Iteration{.t = 3, .e2e = {.status = "correct", .speedup_compile = 1.2},
                               .subkernels = {{.name = "a", .correct = true, .speedup_compile = 2.0, .share = 0.4}}}.to_json();
  EXPECT_EQ(it["e2e"]["speedup_compile"], 1.2);
  EXPECT_EQ(it["subkernels"][0]["share"], 0.4);
  EXPECT_TRUE(it["subkernels"][0]["runtime_ms"].is_null());
  json end = records::RunEnd{.status = "interrupted", .message = "Ctrl-C"}.to_json();
  EXPECT_TRUE(end["best_speedup_compile"].is_null());
  EXPECT_EQ((records::Swap{.name = "a", .from = "c1", .to = "pytorch"}.to_json()["to"]), "pytorch");
  EXPECT_EQ((records::Postfuse{.attempt = 1, .status = "incorrect", .speedup_compile = std::nullopt}.to_json()["attempt"]),
            1);
}

TEST(InterruptTest, FirstSignalSetsTheFlagAndWakesPoll) {
  Interrupt::install();
  Interrupt::reset();
  EXPECT_FALSE(Interrupt::requested());
  ASSERT_GE(Interrupt::fd(), 0);
  kill(getpid(), SIGINT);
  EXPECT_TRUE(Interrupt::requested());
  EXPECT_EQ(Interrupt::signal_number(), SIGINT);
  struct pollfd pfd {Interrupt::fd(), POLLIN, 0};
  EXPECT_EQ(poll(&pfd, 1, 0), 1);
  Interrupt::reset();
  EXPECT_FALSE(Interrupt::requested());
  EXPECT_EQ(poll(&pfd, 1, 0), 0);
  Interrupt::uninstall();
}

TEST(InterruptTest, SecondSignalExitsWith130) {
  pid_t p = fork();
  if (p == 0) {
    Interrupt::install();
    int devnull = ::open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    kill(getpid(), SIGTERM);
    if (!Interrupt::requested()) _exit(1);
    kill(getpid(), SIGINT);
    _exit(2);
  }
  int st;
  waitpid(p, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 130);
}

}  // namespace
}  // namespace mk::rundir
