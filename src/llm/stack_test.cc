// The provider stack as callers use it: factory errors, config, response cache,
// record/replay, exec providers, accounting, and keeping keys out of everything.
#include <thread>
#include <atomic>
#include <signal.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "fakes/fake_llm.h"
#include "fakes/llm_test_util.h"
#include "llm/accounting.h"
#include "llm/decorators.h"
#include "llm/factory.h"
#include "llm/wire.h"
#include "util/config.h"
#include "util/env.h"
#include "util/fs.h"

namespace mk::llm {
namespace {

using fakes::FakeLlm;
using fakes::Protocol;
using fakes::Step;
using nlohmann::json;

std::string make_error(const ProviderOptions& o, const Config* cfg = nullptr) {
  auto p = make_provider(o, cfg);
  EXPECT_FALSE(p.ok());
  if (p.ok()) return "";
  EXPECT_EQ(p.error().find('\n'), std::string::npos) << p.error();
  return p.error();
}

TEST(Factory, UnknownProviderSuggestsTheKinds) {
  Env env;
  std::string e = make_error(fakes::test_options("opnai:gpt-4o", "", &env));
  EXPECT_NE(e.find("unknown LLM provider 'opnai'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'openai:gpt-4o'"), std::string::npos) << e;
  EXPECT_NE(e.find("openai:MODEL, anthropic:MODEL, bedrock:MODEL, exec:COMMAND or replay:FILE"), std::string::npos);
  e = make_error(fakes::test_options("gpt-4o", "", &env));
  EXPECT_NE(e.find("unknown LLM provider 'gpt-4o'"), std::string::npos) << e;
}

TEST(Factory, ASpecErrorIsBadInputAndACredentialErrorIsNot) {
  // The CLI picks its exit status by the kind (bad input: 2), never by the text.
  Env env;
  for (const char* spec : {"opnai:gpt-4o", "openai:", "gpt-4o", "replay:/nonexistent/session.jsonl"}) {
    auto p = make_provider(fakes::test_options(spec, "", &env), nullptr);
    ASSERT_FALSE(p.ok()) << spec;
    EXPECT_EQ(p.error_kind(), ErrorKind::kBadInput) << spec << ": " << p.error();
  }
  auto url = make_provider(fakes::test_options("openai:m", "localhost:8000", &env), nullptr);
  ASSERT_FALSE(url.ok());
  EXPECT_EQ(url.error_kind(), ErrorKind::kBadInput) << url.error();
  // No API key in the environment: the machine lacks something, the input is fine.
  auto key = make_provider(fakes::test_options("openai:gpt-4o", "", &env), nullptr);
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.error_kind(), ErrorKind::kOther) << key.error();
}

TEST(Factory, MissingModelNamesTheFix) {
  Env env;
  std::string e = make_error(fakes::test_options("openai:", "", &env));
  EXPECT_NE(e.find("names no model: write openai:MODEL"), std::string::npos) << e;
  e = make_error(fakes::test_options("exec:", "", &env));
  EXPECT_NE(e.find("names no command"), std::string::npos) << e;
}

TEST(Factory, NoProviderAtAll) {
  Env env;
  std::string e = make_error(fakes::test_options("", "", &env));
  EXPECT_EQ(e, no_llm_message()) << e;
  EXPECT_NE(e.find("pass --llm SPEC"), std::string::npos) << e;
  EXPECT_NE(e.find("ANTHROPIC_API_KEY or OPENAI_API_KEY"), std::string::npos) << e;
  // Nothing on this machine names an LLM: missing (exit 3), as `run` says it.
  auto p = make_provider(fakes::test_options("", "", &env), nullptr);
  EXPECT_EQ(p.error_kind(), ErrorKind::kMissing);
}

// The README's promise: without --llm, $MKEVOLVE_LLM or llm.provider, an API
// key alone picks its provider's default model, and says so.
TEST(Factory, AnApiKeyAlonePicksADefaultModel) {
  Config none;
  Env empty_env;
  auto r = resolve_spec("", &empty_env, none);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->spec, "");
  Env openai{{"OPENAI_API_KEY", "sk-test-000000000000"}};
  r = resolve_spec("", &openai, none);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->spec, kDefaultOpenAiSpec);
  EXPECT_EQ(r->chosen_because, "OPENAI_API_KEY is set");
  Env both{{"OPENAI_API_KEY", "sk-test-000000000000"}, {"ANTHROPIC_API_KEY", "sk-ant-test-0000000"}};
  r = resolve_spec("", &both, none);
  EXPECT_EQ(r->spec, kDefaultAnthropicSpec);
  EXPECT_EQ(r->chosen_because, "ANTHROPIC_API_KEY is set");
  // Anything written wins, and is not "chosen".
  Env mk{{"MKEVOLVE_LLM", "exec:./x.sh"}, {"ANTHROPIC_API_KEY", "sk-ant-test-0000000"}};
  r = resolve_spec("", &mk, none);
  EXPECT_EQ(r->spec, "exec:./x.sh");
  EXPECT_EQ(r->chosen_because, "");
  r = resolve_spec("replay:s.jsonl", &both, none);
  EXPECT_EQ(r->spec, "replay:s.jsonl");
  // make_provider follows it: the key's provider with its default model.
  auto p = make_provider(fakes::test_options("", "", &openai), nullptr);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ((*p)->spec(), kDefaultOpenAiSpec);
}

TEST(Factory, BadBaseUrlAndMissingCredentials) {
  Env env;
  std::string e = make_error(fakes::test_options("openai:m", "localhost:8000", &env));
  EXPECT_NE(e.find("base URL 'localhost:8000' (from --base-url) must start with http:// or https://"), std::string::npos) << e;
  e = make_error(fakes::test_options("openai:gpt-4o", "", &env));
  EXPECT_NE(e.find("openai: no API key: set OPENAI_API_KEY"), std::string::npos) << e;
  e = make_error(fakes::test_options("anthropic:claude", "", &env));
  EXPECT_NE(e.find("set ANTHROPIC_API_KEY"), std::string::npos) << e;
  e = make_error(fakes::test_options("bedrock:m", "", &env));
  EXPECT_NE(e.find("no AWS region: set AWS_REGION"), std::string::npos) << e;
  Env region{{"AWS_REGION", "us-east-1"}};
  e = make_error(fakes::test_options("bedrock:m", "", &region));
  EXPECT_NE(e.find("no AWS credentials"), std::string::npos) << e;
  e = make_error(fakes::test_options("replay:/nonexistent/session.jsonl", "", &env));
  EXPECT_NE(e.find("/nonexistent/session.jsonl: no such file"), std::string::npos) << e;
}

TEST(Factory, ConfigSuppliesProviderAliasAndSettings) {
  FakeLlm fake(Protocol::kOpenAi);
  auto cfg = Config::parse("[llm]\nprovider = \"local\"\nconcurrency = 3\n\n[llm.providers.local]\nspec = \"openai:qwen\"\n"
                           "base_url = \"" + fake.base_url() + "\"\napi_key = \"cfg-key-0123456789\"\n",
                           "mk.toml");
  ASSERT_TRUE(cfg.ok()) << cfg.error();
  Env env;
  auto p = make_provider(fakes::test_options("", "", &env), &*cfg);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ((*p)->spec(), "openai:qwen");
  ASSERT_TRUE((*p)->complete(fakes::make_request("x")).ok());
  EXPECT_EQ(fake.received()[0].header("authorization"), "Bearer cfg-key-0123456789");
  EXPECT_EQ(json::parse(fake.received()[0].body)["model"], "qwen");

  auto bad = Config::parse("[llm]\nconcurrency = \"many\"\n", "mk.toml");
  std::string e = make_error(fakes::test_options("openai:m", fake.base_url(), &env), &*bad);
  EXPECT_EQ(e, "mk.toml:2: llm.concurrency: expected a number, found a string");
}

TEST(Cache, IdenticalRequestIsServedFromDisk) {
  FakeLlm fake(Protocol::kOpenAi);
  fake.set_fallback(Step{.text = "cached text", .usage = fakes::FakeUsage{100, 10, 0, 0}});
  TempDir dir;
  Env env;
  Accounting acc;
  auto o = fakes::test_options("openai:m", fake.base_url(), &env);
  o.cache_dir = dir.path() / "cache";
  o.accounting = &acc;
  auto p = *make_provider(o, nullptr);

  Request a = fakes::make_request("same prompt", "generate", "L1/1");
  Reply first = p->complete(a);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first.completion->from_cache);
  Request again = a;
  again.agent = "debug";  // agent and task are not part of the key
  again.task = "L1/2";
  Reply second = p->complete(again);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second.completion->from_cache);
  EXPECT_EQ(second.completion->text, "cached text");
  EXPECT_EQ(fake.count(), 1);

  Request other_sample = a;
  other_sample.sample = 1;
  ASSERT_TRUE(p->complete(other_sample).ok());
  EXPECT_EQ(fake.count(), 2);
  Request other_temp = a;
  other_temp.temperature = 0.2;
  ASSERT_TRUE(p->complete(other_temp).ok());
  EXPECT_EQ(fake.count(), 3);

  // One file per entry, sharded by the first two hex digits of the key (the
  // endpoint is in it: not the provider's default).
  std::string key = cache_key("openai:m", a, fake.base_url());
  EXPECT_TRUE(fs::exists(o.cache_dir / key.substr(0, 2) / (key + ".json")));

  // Accounting: the hit cost nothing but counts as a cached call.
  Tally t = acc.total();
  EXPECT_EQ(t.calls, 4);
  EXPECT_EQ(t.cached_calls, 1);
  EXPECT_EQ(t.usage.input, 300);
  EXPECT_EQ(acc.by_agent()["debug"].usage.total(), 0);
  EXPECT_EQ(acc.by_agent()["debug"].cached_calls, 1);

  // A new provider over the same directory (a resumed run) pays nothing either.
  auto again_p = *make_provider(o, nullptr);
  ASSERT_TRUE(again_p->complete(a).completion->from_cache);
  EXPECT_EQ(fake.count(), 3);
}

TEST(Cache, AReplyFromOneEndpointIsNeverServedForAnother) {
  // Two servers behind the same spec (say, two local vLLMs): the second is
  // asked, not answered from the first one's cache.
  FakeLlm one(Protocol::kOpenAi), two(Protocol::kOpenAi);
  one.set_fallback(Step{.text = "from one"});
  two.set_fallback(Step{.text = "from two"});
  TempDir dir;
  Env env;
  auto o1 = fakes::test_options("openai:m", one.base_url(), &env);
  auto o2 = fakes::test_options("openai:m", two.base_url(), &env);
  o1.cache_dir = o2.cache_dir = dir.path() / "cache";
  Request a = fakes::make_request("same prompt", "generate", "t");
  ASSERT_EQ((*make_provider(o1, nullptr))->complete(a).completion->text, "from one");
  Reply r = (*make_provider(o2, nullptr))->complete(a);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.completion->text, "from two");
  EXPECT_FALSE(r.completion->from_cache);
  EXPECT_EQ(two.count(), 1);
  EXPECT_TRUE((*make_provider(o1, nullptr))->complete(a).completion->from_cache);  // its own entry stays
  // The provider's default endpoint keeps the key it always had.
  EXPECT_EQ(cache_key("openai:m", a, ""), cache_key("openai:m", a));
  EXPECT_NE(cache_key("openai:m", a, one.base_url()), cache_key("openai:m", a, two.base_url()));
}

TEST(Cache, CanBeDisabledAndSurvivesCorruptEntries) {
  FakeLlm fake(Protocol::kOpenAi);
  TempDir dir;
  Env env;
  auto o = fakes::test_options("openai:m", fake.base_url(), &env);
  auto off = Config::parse("[llm]\ncache = false\n", "mk.toml");
  o.cache_dir = dir.path();
  auto p = *make_provider(o, &*off);
  Request r = fakes::make_request("x");
  p->complete(r);
  p->complete(r);
  EXPECT_EQ(fake.count(), 2);

  auto q = *make_provider(o, nullptr);
  std::string key = cache_key("openai:m", r, fake.base_url());
  ASSERT_TRUE(write_file_atomic(dir.path() / key.substr(0, 2) / (key + ".json"), "{broken").ok());
  ASSERT_TRUE(q->complete(r).ok());
  EXPECT_EQ(fake.count(), 3);
  ASSERT_TRUE(q->complete(r).completion->from_cache);
}

TEST(RecordReplay, RoundTrip) {
  FakeLlm fake(Protocol::kAnthropic);
  fake.push(Step{.text = "first", .usage = fakes::FakeUsage{10, 2, 5, 1}});
  fake.push(Step{.text = "second"});
  fake.push(Step{.status = 400});
  TempDir dir;
  Env env{{"ANTHROPIC_API_KEY", "sk-ant-record-123456"}};
  auto o = fakes::test_options("anthropic:m", fake.base_url(), &env);
  o.record_path = dir.path() / "rec" / "session.jsonl";
  o.cache_dir = dir.path() / "cache";
  auto p = *make_provider(o, nullptr);
  Request a = fakes::make_request("prompt A", "generate", "L1/1");
  Request b = fakes::make_request("prompt B", "optimize", "L1/2");
  Request c = fakes::make_request("prompt C", "judge", "L1/3");
  ASSERT_TRUE(p->complete(a).ok());
  ASSERT_TRUE(p->complete(a).completion->from_cache);
  ASSERT_TRUE(p->complete(b).ok());
  ASSERT_FALSE(p->complete(c).ok());

  auto replay = make_provider(fakes::test_options("replay:" + o.record_path.string(), "", &env), nullptr);
  ASSERT_TRUE(replay.ok()) << replay.error();
  // Out of order: matching is by fingerprint.
  Reply rb = (*replay)->complete(b);
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(rb.completion->text, "second");
  Reply ra = (*replay)->complete(a);
  ASSERT_TRUE(ra.ok());
  EXPECT_EQ(ra.completion->text, "first");
  EXPECT_EQ(ra.completion->usage.cache_read, 5);
  EXPECT_EQ(ra.completion->usage.cache_write, 1);
  EXPECT_FALSE(ra.completion->usage.estimated);
  Reply rc = (*replay)->complete(c);
  ASSERT_FALSE(rc.ok());
  EXPECT_EQ(rc.error->kind, LlmError::Kind::kBadRequest);

  // A repeat of A was a cache hit when recorded; replayed, it is one again.
  Accounting acc;
  auto ro = fakes::test_options("replay:" + o.record_path.string(), "", &env);
  ro.accounting = &acc;
  auto replay2 = *make_provider(ro, nullptr);
  ASSERT_TRUE(replay2->complete(a).ok());
  Reply hit = replay2->complete(a);
  ASSERT_TRUE(hit.ok());
  EXPECT_TRUE(hit.completion->from_cache);
  EXPECT_EQ(acc.total().cached_calls, 1);
  EXPECT_EQ(acc.total().usage.input, 10);

  Request d = fakes::make_request("a prompt never recorded", "fuse", "L2/7");
  Reply rd = (*replay)->complete(d);
  ASSERT_FALSE(rd.ok());
  EXPECT_EQ(rd.error->kind, LlmError::Kind::kUnmatchedReplay);
  EXPECT_NE(rd.error->message.find("agent=fuse task=L2/7"), std::string::npos) << rd.error->message;
  EXPECT_NE(rd.error->message.find("'a prompt never recorded'"), std::string::npos) << rd.error->message;
  EXPECT_EQ(fake.count(), 3);
}

TEST(Replay, ScriptedFixturesServeInOrderPerAgentAndTask) {
  TempDir dir;
  auto file = dir.path() / "script.jsonl";
  ASSERT_TRUE(write_file_atomic(file,
                                "# a hand-written fixture\n"
                                "{\"agent\":\"generate\",\"task\":\"t1\",\"text\":\"gen t1 #1\"}\n"
                                "{\"agent\":\"generate\",\"task\":\"t1\",\"text\":\"gen t1 #2\"}\n"
                                "{\"agent\":\"generate\",\"text\":\"gen any task\"}\n"
                                "{\"agent\":\"judge\",\"prompt_contains\":\"VERDICT\",\"response\":{\"text\":\"yes\","
                                "\"usage\":{\"input\":3,\"output\":1}}}\n"
                                "{\"agent\":\"debug\",\"error\":{\"kind\":\"http\",\"message\":\"scripted failure\","
                                "\"http_status\":500}}\n")
                  .ok());
  Env env;
  auto p = *make_provider(fakes::test_options("replay:" + file.string(), "", &env), nullptr);
  // A scripted line without usage: estimated from the request it answers, so
  // a prompt's input tokens are counted (they once read 0 under replay:).
  Reply first = p->complete(fakes::make_request(std::string(400, 'p'), "generate", "t1"));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first.completion->text, "gen t1 #1");
  EXPECT_TRUE(first.completion->usage.estimated);
  EXPECT_GE(first.completion->usage.input, 100);
  EXPECT_GT(first.completion->usage.output, 0);
  // A fresh provider from the same file: the scripted lines unused again.
  p = *make_provider(fakes::test_options("replay:" + file.string(), "", &env), nullptr);
  EXPECT_EQ(p->complete(fakes::make_request("p", "generate", "t1")).completion->text, "gen t1 #1");
  EXPECT_EQ(p->complete(fakes::make_request("q", "generate", "t2")).completion->text, "gen any task");
  EXPECT_EQ(p->complete(fakes::make_request("r", "generate", "t1")).completion->text, "gen t1 #2");
  Reply none = p->complete(fakes::make_request("s", "generate", "t1"));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error->kind, LlmError::Kind::kUnmatchedReplay);
  EXPECT_FALSE(p->complete(fakes::make_request("no marker", "judge", "t1")).ok());
  Reply judged = p->complete(fakes::make_request("say VERDICT", "judge", "t1"));
  ASSERT_TRUE(judged.ok());
  EXPECT_EQ(judged.completion->usage.input, 3);
  EXPECT_FALSE(judged.completion->usage.estimated);
  Reply failed = p->complete(fakes::make_request("d", "debug", "t1"));
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error->message.find("scripted failure"), std::string::npos);

  ASSERT_TRUE(write_file_atomic(file, "{\"agent\":\"x\"}\n").ok());
  auto bad = make_provider(fakes::test_options("replay:" + file.string(), "", &env), nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find(file.string() + ":1:"), std::string::npos) << bad.error();
}

// exec: providers run a shell command per request.
class Exec : public ::testing::Test {
 protected:
  std::shared_ptr<Provider> make(const std::string& script, double timeout_s = 5,
                                 std::function<bool()> cancelled = {}) {
    auto path = dir_.path() / ("s" + std::to_string(n_++) + ".sh");
    EXPECT_TRUE(write_file_atomic(path, script).ok());
    auto o = fakes::test_options("exec:sh " + path.string(), "", &env_);
    o.total_timeout_s = timeout_s;
    o.max_retries = 0;
    o.cancelled = std::move(cancelled);
    auto p = make_provider(o, nullptr);
    EXPECT_TRUE(p.ok()) << p.error();
    return *p;
  }
  TempDir dir_;
  Env env_{{"PATH", "/usr/bin:/bin"}};
  int n_ = 0;
};

TEST_F(Exec, PlainTextReplyWithEstimatedUsage) {
  auto input = dir_.path() / "stdin.json";
  auto p = make("cat > " + input.string() + "\necho \"reply for $MKEVOLVE_AGENT/$MKEVOLVE_TASK\"\n");
  Reply r = p->complete(fakes::make_request("hello exec", "split", "L2/5"));
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.completion->text, "reply for split/L2/5");
  EXPECT_TRUE(r.completion->usage.estimated);
  json in = json::parse(*read_file(input));
  EXPECT_EQ(in["messages"][0]["role"], "system");
  EXPECT_EQ(in["messages"][1]["content"], "hello exec");
  EXPECT_EQ(in["mkevolve"]["agent"], "split");
  EXPECT_EQ(in["max_tokens"], 256);
}

TEST_F(Exec, ChatCompletionJsonWithUsage) {
  auto p = make(
      "cat >/dev/null\n"
      "echo '{\"choices\":[{\"message\":{\"content\":\"json reply\"},\"finish_reason\":\"length\"}],"
      "\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":9}}'\n");
  Reply r = p->complete(fakes::make_request("x"));
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.completion->text, "json reply");
  EXPECT_EQ(r.completion->usage.input, 40);
  EXPECT_EQ(r.completion->usage.output, 9);
  EXPECT_FALSE(r.completion->usage.estimated);
  EXPECT_TRUE(r.completion->truncated);
}

TEST_F(Exec, NonZeroExitCarriesStderrTail) {
  auto p = make("cat >/dev/null\necho 'model overloaded, try later' >&2\nexit 3\n");
  Reply r = p->complete(fakes::make_request("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error->message.find("exit 3"), std::string::npos) << r.error->message;
  EXPECT_NE(r.error->message.find("model overloaded, try later"), std::string::npos) << r.error->message;
}

TEST_F(Exec, TimeoutKillsTheCommand) {
  auto p = make("cat >/dev/null\necho waiting >&2\nsleep 5\necho late\n", 0.3);
  Reply r = p->complete(fakes::make_request("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->kind, LlmError::Kind::kTimeout);
  EXPECT_NE(r.error->message.find("no reply within 0.3s"), std::string::npos) << r.error->message;
}

TEST_F(Exec, CancelKillsTheCommandAtOnce) {
  // Ctrl-C during a slow exec: command: the command's process group is killed
  // and the call fails as cancelled (not retried), long before its timeout.
  auto pidfile = dir_.path() / "pid";
  std::atomic<bool> stop{false};
  auto p = make("cat >/dev/null\necho $$ > " + pidfile.string() + ".tmp\nmv " + pidfile.string() + ".tmp " +
                    pidfile.string() + "\nexec sleep 600\n",
                900, [&] { return stop.load(); });
  std::thread canceller([&] {
    while (!fs::exists(pidfile)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stop = true;
  });
  Reply r = p->complete(fakes::make_request("x"));
  canceller.join();
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.error->retryable);
  EXPECT_NE(r.error->message.find("cancelled"), std::string::npos) << r.error->message;
  // Dead: gone, or a zombie awaiting its (also killed) parent's reaper.
  std::string pid = *read_file(pidfile);
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  auto stat = read_file(fs::path("/proc") / pid / "stat");
  bool dead = !stat || stat->find(") Z ") != std::string::npos || stat->find(") X ") != std::string::npos;
  for (int i = 0; i < 100 && !dead; ++i) {  // SIGKILL is delivered asynchronously
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stat = read_file(fs::path("/proc") / pid / "stat");
    dead = !stat || stat->find(") Z ") != std::string::npos || stat->find(") X ") != std::string::npos;
  }
  EXPECT_TRUE(dead) << "the command (pid " << pid << ") still runs: " << (stat ? *stat : std::string());
}

TEST_F(Exec, CancelledCallsAreNotRecorded) {
  // A recording holds what the endpoint said; an interrupt is not that.
  auto rec = dir_.path() / "rec.jsonl";
  auto path = dir_.path() / "slow.sh";
  ASSERT_TRUE(write_file_atomic(path, "cat >/dev/null\nexec sleep 600\n").ok());
  auto o = fakes::test_options("exec:sh " + path.string(), "", &env_);
  o.max_retries = 0;
  o.record_path = rec;
  o.cancelled = [] { return true; };
  auto p = make_provider(o, nullptr);
  ASSERT_TRUE(p.ok()) << p.error();
  Reply r = (*p)->complete(fakes::make_request("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->kind, LlmError::Kind::kCancelled);
  auto text = read_file(rec);
  EXPECT_TRUE(!text || text->empty()) << *text;
}

TEST_F(Exec, EmptyOutputIsAnError) {
  auto p = make("cat >/dev/null\n");
  Reply r = p->complete(fakes::make_request("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->kind, LlmError::Kind::kEmpty);
}

TEST(Accounting, TalliesPricesListenerAndJson) {
  auto cfg = Config::parse("[llm.prices.\"openai:m\"]\ninput = 2.0\noutput = 10.0\ncache_read = 1.0\n", "mk.toml");
  ASSERT_TRUE(cfg.ok());
  FakeLlm fake(Protocol::kOpenAi);
  fake.push(Step{.text = "a", .usage = fakes::FakeUsage{1000, 100, 500, 0}});
  fake.push(Step{.text = "b", .usage = fakes::FakeUsage{2000, 200, 0, 0}, .truncated = true});
  fake.push(Step{.status = 400});
  Env env;
  Accounting acc;
  std::vector<CallEvent> events;
  std::mutex mu;
  acc.set_listener([&](const CallEvent& e) {
    std::lock_guard lock(mu);
    events.push_back(e);
  });
  auto o = fakes::test_options("openai:m", fake.base_url(), &env);
  o.accounting = &acc;
  auto p = *make_provider(o, &*cfg);
  ASSERT_TRUE(p->complete(fakes::make_request("secret prompt text", "generate", "L1/1")).ok());
  ASSERT_TRUE(p->complete(fakes::make_request("y", "optimize", "L1/1")).ok());
  ASSERT_FALSE(p->complete(fakes::make_request("z", "optimize", "L1/2")).ok());

  Tally t = acc.total();
  EXPECT_EQ(t.calls, 3);
  EXPECT_EQ(t.errors, 1);
  EXPECT_EQ(t.truncated, 1);
  EXPECT_EQ(t.usage.input, 3000);
  EXPECT_EQ(t.usage.output, 300);
  EXPECT_EQ(t.usage.cache_read, 500);
  // (3000*2 + 300*10 + 500*1) / 1e6
  EXPECT_NEAR(t.cost_usd, 0.0095, 1e-12);
  EXPECT_TRUE(t.cost_complete);
  EXPECT_EQ(acc.by_task()["L1/1"].calls, 2);
  EXPECT_EQ(acc.by_agent()["optimize"].errors, 1);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].agent, "generate");
  EXPECT_GT(events[0].latency_s, 0);
  EXPECT_TRUE(events[1].truncated);
  EXPECT_FALSE(events[2].ok);

  json j = acc.to_json();
  EXPECT_EQ(j.dump().find("secret prompt text"), std::string::npos);
  Accounting resumed;
  ASSERT_TRUE(resumed.merge_json(j).ok());
  EXPECT_EQ(resumed.total().usage.input, 3000);
  EXPECT_EQ(resumed.by_agent()["optimize"].calls, 2);
  EXPECT_EQ(resumed.calls().size(), 3u);
}

// A planted key must never reach the cache, recordings, accounting, error
// messages or the environment of worker processes.
TEST(Secrets, PlantedKeyNeverLeaks) {
  const std::string openai_key = "sk-planted-openai-7f3a9c2e41b8";
  const std::string anthropic_key = "sk-ant-planted-cfg-9d8e7f6a5b4c";
  ASSERT_EQ(::setenv("OPENAI_API_KEY", openai_key.c_str(), 1), 0);
  TempDir dir;
  auto cfg_path = dir.path() / "mkevolve.toml";
  FakeLlm openai(Protocol::kOpenAi), anthropic(Protocol::kAnthropic);
  ASSERT_TRUE(write_file_atomic(cfg_path, "[llm.anthropic]\napi_key = \"" + anthropic_key + "\"\n").ok());
  auto cfg = Config::load_file(cfg_path);
  ASSERT_TRUE(cfg.ok());
  // The servers echo the key back in their replies and errors, as real ones sometimes do.
  openai.push(Step{.text = "reply mentioning " + openai_key});
  openai.push(Step{.status = 401, .raw_body = std::string("{\"error\":{\"message\":\"Incorrect API key provided: ") +
                                              openai_key + "\"}}"});
  openai.push(Step{.raw_body = "not json " + openai_key});
  anthropic.push(Step{.status = 403, .raw_body = "{\"error\":{\"message\":\"key " + anthropic_key + " revoked\"}}"});
  anthropic.push(Step{.text = "fine"});

  auto run_dir = dir.path() / "run";
  Accounting acc;
  for (auto [spec, url] : {std::pair{std::string("openai:m"), openai.base_url()},
                           std::pair{std::string("anthropic:m"), anthropic.base_url()}}) {
    ProviderOptions o = fakes::test_options(spec, url, nullptr);  // the real environment
    o.cache_dir = run_dir / "cache";
    o.record_path = run_dir / "llm.jsonl";
    o.accounting = &acc;
    auto p = make_provider(o, &*cfg);
    ASSERT_TRUE(p.ok()) << p.error();
    for (int i = 0; i < 3; ++i) {
      Reply r = (*p)->complete(fakes::make_request("prompt " + std::to_string(i)));
      if (!r.ok()) {
        EXPECT_EQ(r.error->message.find(openai_key), std::string::npos) << r.error->message;
        EXPECT_EQ(r.error->message.find(anthropic_key), std::string::npos) << r.error->message;
      }
    }
  }
  EXPECT_EQ(openai.received()[0].header("authorization"), "Bearer " + openai_key);
  EXPECT_EQ(anthropic.received()[0].header("x-api-key"), anthropic_key);

  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(run_dir)) {
    if (!e.is_regular_file()) continue;
    ++files;
    std::string text = *read_file(e.path());
    EXPECT_EQ(text.find(openai_key), std::string::npos) << e.path();
    EXPECT_EQ(text.find(anthropic_key), std::string::npos) << e.path();
  }
  EXPECT_GE(files, 3);  // the recording and at least two cache entries
  std::string acc_json = acc.to_json().dump();
  EXPECT_EQ(acc_json.find(openai_key), std::string::npos);
  EXPECT_EQ(acc_json.find(anthropic_key), std::string::npos);

  for (const auto& [k, v] : scrubbed_environment()) {
    EXPECT_NE(v, openai_key) << k;
    EXPECT_EQ(v.find(openai_key), std::string::npos) << k;
  }
  EXPECT_EQ(redact_secrets("x " + anthropic_key + " y"), "x [REDACTED] y");
  ::unsetenv("OPENAI_API_KEY");
}

}  // namespace
}  // namespace mk::llm
