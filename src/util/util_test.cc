#include <signal.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "util/env.h"
#include "util/exit_code.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strings.h"
#include "util/subprocess.h"

namespace mk {
namespace {

using namespace std::chrono_literals;

TEST(ExitCode, OneStatusPerErrorKind) {
  EXPECT_EQ(exit_code(ErrorKind::kOther), 1);
  EXPECT_EQ(exit_code(ErrorKind::kBadInput), 2);
  EXPECT_EQ(exit_code(ErrorKind::kMissing), 3);
  EXPECT_EQ(exit_code(ErrorKind::kInterrupted), 130);
  // Every kind has its own status, and none is success.
  const ErrorKind kinds[] = {ErrorKind::kOther, ErrorKind::kBadInput, ErrorKind::kMissing, ErrorKind::kInterrupted};
  for (auto a : kinds) {
    EXPECT_NE(exit_code(a), kExitStatusOk);
    for (auto b : kinds) {
      if (a != b) EXPECT_NE(exit_code(a), exit_code(b));
    }
  }
}

TEST(Status, KeepsTheErrorsKind) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  Status bad = Error{"--gpu 9: only 1 GPU", ErrorKind::kBadInput};
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "--gpu 9: only 1 GPU");
  EXPECT_EQ(bad.error_kind(), ErrorKind::kBadInput);
  Status other = Error{"failed"};
  EXPECT_EQ(other.error_kind(), ErrorKind::kOther);
}

TEST(Hash, KnownVector) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Hash, PartsAreLengthPrefixed) {
  EXPECT_NE(Hasher().update("ab").update("c").hex(), Hasher().update("a").update("bc").hex());
  EXPECT_EQ(Hasher().update("ab").update("c").hex(), Hasher().update("ab").update("c").hex());
}

TEST(Fs, AtomicWriteReplacesAndReads) {
  TempDir d;
  auto p = d.path() / "sub" / "f.txt";
  ASSERT_TRUE(write_file_atomic(p, "one").ok());
  ASSERT_TRUE(write_file_atomic(p, "two").ok());
  auto r = read_file(p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "two");
  // No temp files left behind.
  int n = 0;
  for (auto& e : fs::directory_iterator(p.parent_path())) (void)e, ++n;
  EXPECT_EQ(n, 1);
}

TEST(Fs, ReadMissingNamesThePath) {
  auto r = read_file("/nonexistent/x.py");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("/nonexistent/x.py"), std::string::npos);
}

TEST(Fs, AppendDurable) {
  TempDir d;
  auto p = d.path() / "log.jsonl";
  ASSERT_TRUE(append_durable(p, "a\n").ok());
  ASSERT_TRUE(append_durable(p, "b\n").ok());
  EXPECT_EQ(*read_file(p), "a\nb\n");
}

TEST(Fs, UnwritableDirectoryIsAClearError) {
  if (geteuid() == 0) {
    // root ignores permissions; use a path under a regular file instead.
    TempDir d;
    ASSERT_TRUE(write_file_atomic(d.path() / "file", "x").ok());
    Status st = write_file_atomic(d.path() / "file" / "inner.txt", "x");
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().find("file"), std::string::npos);
    return;
  }
  Status st = write_file_atomic("/proc/forbidden/x", "x");
  EXPECT_FALSE(st.ok());
}

TEST(Subprocess, CapturesOutputAndExitCode) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", "echo out; echo err >&2; exit 3"};
  auto r = run_subprocess(o);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_FALSE(r.ok());
}

TEST(Subprocess, FeedsStdin) {
  SubprocessOptions o;
  o.argv = {"cat"};
  std::string big(1 << 20, 'x');
  auto r = run_subprocess(o, big, 10s);
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.out.size(), big.size());
}

TEST(Subprocess, ChildThatIgnoresItsStdinDoesNotKillUs) {
  // Writing a big stdin to a child that exits at once raises SIGPIPE; with the
  // default action that would end this test program (exit 141), as it once ended
  // `mkevolve bench` under an exec: LLM command that did not read its request.
  SubprocessOptions o;
  o.argv = {"sh", "-c", "exit 0"};
  std::string big(8 << 20, 'x');
  for (int i = 0; i < 20; ++i) {
    auto r = run_subprocess(o, big, 10s);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
  }
  std::string err;
  auto sp = Subprocess::start(o, &err);
  ASSERT_TRUE(sp) << err;
  std::this_thread::sleep_for(200ms);  // it has exited; its stdin has no reader
  EXPECT_FALSE(sp->write_all(big));
  // The signal mask is as it was: SIGPIPE is not left blocked.
  sigset_t cur;
  pthread_sigmask(SIG_SETMASK, nullptr, &cur);
  EXPECT_EQ(sigismember(&cur, SIGPIPE), 0);
}

TEST(Subprocess, TimeoutHoldsForAChildThatClosedItsOutput) {
  // Closing stdout and stderr ends the read loop; the deadline must still hold.
  SubprocessOptions o;
  o.argv = {"sh", "-c", "exec >/dev/null 2>&1; sleep 30"};
  auto r = run_subprocess(o, {}, 300ms);
  EXPECT_TRUE(r.timed_out) << r.describe();
  std::atomic<bool> stop{false};
  std::thread t([&] {
    std::this_thread::sleep_for(200ms);
    stop = true;
  });
  auto c = run_subprocess(o, {}, std::chrono::milliseconds(0), [&] { return stop.load(); });
  t.join();
  EXPECT_TRUE(c.cancelled) << c.describe();
}

TEST(Subprocess, TimeoutKillsTheWholeGroup) {
  TempDir d;
  auto marker = d.path() / "grandchild-alive";
  SubprocessOptions o;
  // The grandchild would write the marker after 2 s unless killed with its group.
  o.argv = {"sh", "-c", "(sleep 2; touch " + marker.string() + ") & sleep 30"};
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_subprocess(o, {}, 300ms);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  std::this_thread::sleep_for(2500ms);
  EXPECT_FALSE(fs::exists(marker));
}

TEST(Subprocess, MissingProgramIsASpawnError) {
  SubprocessOptions o;
  o.argv = {"/no/such/binary"};
  auto r = run_subprocess(o);
  EXPECT_FALSE(r.spawn_error.empty());
  EXPECT_NE(r.spawn_error.find("/no/such/binary"), std::string::npos);
}

TEST(Subprocess, BadCwdIsASpawnError) {
  SubprocessOptions o;
  o.argv = {"true"};
  o.cwd = "/no/such/dir";
  auto r = run_subprocess(o);
  EXPECT_NE(r.spawn_error.find("/no/such/dir"), std::string::npos);
}

TEST(Subprocess, LongLivedLineProtocol) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", "while read l; do echo \"got $l\"; done"};
  std::string err;
  auto p = Subprocess::start(o, &err);
  ASSERT_TRUE(p) << err;
  ASSERT_TRUE(p->write_all("a\nb\n"));
  std::string line;
  ASSERT_EQ(p->read_line(&line, 5s), Subprocess::Read::kLine);
  EXPECT_EQ(line, "got a");
  ASSERT_EQ(p->read_line(&line, 5s), Subprocess::Read::kLine);
  EXPECT_EQ(line, "got b");
  EXPECT_EQ(p->read_line(&line, 100ms), Subprocess::Read::kTimeout);
  p->kill_group(SIGKILL);
  EXPECT_EQ(p->read_line(&line, 5s), Subprocess::Read::kEof);
  p->terminate();
  EXPECT_EQ(p->term_signal(), SIGKILL);
}

TEST(Env, ScrubbedEnvironmentDropsSecrets) {
  setenv("MKEVOLVE_TEST_API_KEY", "sk-planted-secret-123", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "aws-planted-secret", 1);
  setenv("CUDA_VISIBLE_DEVICES", "0", 1);
  Env e = scrubbed_environment();
  EXPECT_EQ(e.count("MKEVOLVE_TEST_API_KEY"), 0u);
  EXPECT_EQ(e.count("AWS_SECRET_ACCESS_KEY"), 0u);
  EXPECT_EQ(e.count("CUDA_VISIBLE_DEVICES"), 1u);
  for (const auto& [k, v] : e) EXPECT_EQ(v.find("planted"), std::string::npos) << k;
}

TEST(Env, LooksSecret) {
  EXPECT_TRUE(looks_secret("OPENAI_API_KEY"));
  EXPECT_TRUE(looks_secret("ANTHROPIC_API_KEY"));
  EXPECT_TRUE(looks_secret("HF_TOKEN"));
  EXPECT_TRUE(looks_secret("AWS_PROFILE"));
  EXPECT_FALSE(looks_secret("PATH"));
  EXPECT_FALSE(looks_secret("CUDA_VISIBLE_DEVICES"));
}

TEST(Env, RedactsRegisteredSecrets) {
  register_secret("config-file-key-xyz");
  EXPECT_EQ(redact_secrets("auth: config-file-key-xyz!"), "auth: [REDACTED]!");
}

TEST(Env, FindsTheCredentialsInsideFlags) {
  auto redacted = [](const std::string& s) { return redact_credentials(s); };
  const std::string pass_hash = sha256_hex("s3cr3t-pass").substr(0, 8);
  // A URL's userinfo: the password, or a token standing as the user.
  EXPECT_EQ(redacted("https://alice:s3cr3t-pass@llm.example.com/v1"),
            "https://alice:[REDACTED sha256:" + pass_hash + "]@llm.example.com/v1");
  EXPECT_NE(redacted("http://tok_abcdef123456@localhost:8000/v1").find("[REDACTED sha256:"), std::string::npos);
  EXPECT_EQ(redacted("http://localhost:8000/v1"), "http://localhost:8000/v1");
  // An exec: command line: options, assignments, headers and key-shaped tokens.
  std::string cmd = "python3 llm.py --api-key abc123def456 --token=zzz999yyy888 --max-tokens 4096 "
                    "OPENAI_API_KEY=sk-proj-aaaaaaaaaaaaaaaa -H \"Authorization: Bearer eyJhbGciOi.payload\" "
                    "--model qwen sk-ant-bbbbbbbbbbbbbbbbbbbb";
  std::string r = redacted(cmd);
  for (const char* secret : {"abc123def456", "zzz999yyy888", "sk-proj-aaaaaaaaaaaaaaaa", "eyJhbGciOi.payload",
                             "sk-ant-bbbbbbbbbbbbbbbbbbbb"})
    EXPECT_EQ(r.find(secret), std::string::npos) << secret << " in " << r;
  for (const char* kept : {"python3 llm.py", "--max-tokens 4096", "--model qwen", "Authorization: Bearer [REDACTED"})
    EXPECT_NE(r.find(kept), std::string::npos) << kept << " not in " << r;
  // The same credential gives the same record (a resume can tell it again).
  EXPECT_EQ(redacted(cmd), redacted(cmd));
  EXPECT_NE(redacted("x --api-key one111111111"), redacted("x --api-key two222222222"));
  // Registered, they are hidden wherever text travels.
  register_credentials("https://bob:hunter2-long-pw@h/v1");
  EXPECT_EQ(redact_secrets("the candidate printed hunter2-long-pw"), "the candidate printed [REDACTED]");
}

TEST(Strings, EditDistance) {
  EXPECT_EQ(edit_distance("eval", "eval"), 0u);
  EXPECT_EQ(edit_distance("evl", "eval"), 1u);
  EXPECT_EQ(edit_distance("bench", "bench-report"), 7u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
}

// A write under --out failed: the advice follows the cause, and so does the
// kind (the exit status): a path the user gave that cannot hold a run is bad
// input (2); a full disk or an unknown cause is the machine's (3).
TEST(Fs, DiagnoseWriteFailureByCause) {
  TempDir dir;
  ASSERT_TRUE(write_file_atomic(dir.path() / "file", "x").ok());
  WriteFailure w = diagnose_write_failure(dir.path() / "file" / "run", "--out");
  EXPECT_EQ(w.kind, ErrorKind::kBadInput);
  EXPECT_NE(w.advice.find("is a file, not a folder: choose another --out"), std::string::npos) << w.advice;
  w = diagnose_write_failure(dir.path() / "missing" / "deeper" / "run", "--out");
  EXPECT_EQ(w.kind, ErrorKind::kMissing) << w.advice;  // a writable folder with space: the cause is not the path
  EXPECT_NE(w.advice.find(dir.path().string()), std::string::npos) << w.advice;
  EXPECT_EQ(w.advice.find("read-only"), std::string::npos) << w.advice;
  if (::geteuid() != 0) {  // root may write anywhere
    fs::create_directories(dir.path() / "ro");
    fs::permissions(dir.path() / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    w = diagnose_write_failure(dir.path() / "ro" / "run", "--out");
    EXPECT_EQ(w.kind, ErrorKind::kBadInput);
    EXPECT_NE(w.advice.find("permission denied"), std::string::npos) << w.advice;
    fs::permissions(dir.path() / "ro", fs::perms::owner_all);
  }
}

TEST(Strings, NearestIsTheClosestBelowTheLimit) {
  EXPECT_EQ(nearest("iteratons", {"iterations", "timeout", "trials"}), "iterations");
  EXPECT_EQ(nearest("evl", {"eval", "evolve"}), "eval");
  EXPECT_EQ(nearest("zzz", {"eval", "evolve"}), "");
  EXPECT_EQ(nearest("abcdefgh", {"abcdwxyz"}, 5), "abcdwxyz");
  EXPECT_EQ(nearest("abcdefgh", {"abcdwxyz"}), "");
}

TEST(Strings, HumanDuration) {
  EXPECT_EQ(human_duration(0), "0s");
  EXPECT_EQ(human_duration(-3), "0s");
  EXPECT_EQ(human_duration(59.9), "59s");
  EXPECT_EQ(human_duration(190), "3m10s");
  EXPECT_EQ(human_duration(7500), "2h05m");
}

TEST(Strings, SplitLinesDropsCarriageReturns) {
  EXPECT_EQ(split_lines("a\r\nb\n\nc"), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_TRUE(split_lines("").empty());
}

}  // namespace
}  // namespace mk
