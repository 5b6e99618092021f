// The HTTP providers against fake servers on real loopback sockets: wire format,
// usage, retries, timeouts, error messages, truncation, concurrency caps.
#include <gtest/gtest.h>

#include <ctime>
#include <thread>

#include "fakes/fake_llm.h"
#include "fakes/http_server.h"
#include "fakes/llm_test_util.h"
#include "llm/factory.h"
#include "llm/http.h"

namespace mk::llm {
namespace {

using fakes::FakeLlm;
using fakes::Protocol;
using fakes::Step;
using nlohmann::json;

std::shared_ptr<Provider> make(const ProviderOptions& o) {
  auto p = make_provider(o, nullptr);
  EXPECT_TRUE(p.ok()) << p.error();
  return p.ok() ? *p : nullptr;
}

TEST(OpenAi, SendsChatCompletionAndParsesUsage) {
  FakeLlm fake(Protocol::kOpenAi);
  fake.push(Step{.text = "def kernel(): pass", .usage = fakes::FakeUsage{100, 20, 30, 0}});
  Env env{{"OPENAI_API_KEY", "sk-test-openai-0001"}};
  auto p = make(fakes::test_options("openai:gpt-test", fake.base_url(), &env));
  Request req = fakes::make_request("write a relu", "generate", "L1/19");
  req.temperature = 0.7;
  req.top_p = 0.9;
  req.seed = 42;
  req.reasoning_effort = "high";
  Reply r = p->complete(req);
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.completion->text, "def kernel(): pass");
  EXPECT_EQ(r.completion->usage.input, 100);
  EXPECT_EQ(r.completion->usage.cache_read, 30);
  EXPECT_EQ(r.completion->usage.output, 20);
  EXPECT_FALSE(r.completion->usage.estimated);
  EXPECT_FALSE(r.completion->truncated);
  EXPECT_EQ(r.completion->model, "fake-model");

  ASSERT_EQ(fake.count(), 1);
  auto got = fake.received()[0];
  EXPECT_TRUE(fake.problems().empty());
  EXPECT_EQ(got.header("x-mkevolve-agent"), "generate");
  EXPECT_EQ(got.header("x-mkevolve-task"), "L1/19");
  EXPECT_EQ(got.header("authorization"), "Bearer sk-test-openai-0001");
  json body = json::parse(got.body);
  EXPECT_EQ(body["model"], "gpt-test");
  EXPECT_EQ(body["max_tokens"], 256);
  EXPECT_EQ(body["temperature"], 0.7);
  EXPECT_EQ(body["top_p"], 0.9);
  EXPECT_EQ(body["seed"], 42);
  EXPECT_EQ(body["reasoning_effort"], "high");
  ASSERT_EQ(body["messages"].size(), 2u);
  EXPECT_EQ(body["messages"][0]["role"], "system");
  EXPECT_EQ(body["messages"][1]["content"], "write a relu");
}

TEST(OpenAi, NoKeyMeansNoAuthHeader) {
  FakeLlm fake(Protocol::kOpenAi);
  Env env;
  auto p = make(fakes::test_options("openai:local", fake.base_url(), &env));
  ASSERT_TRUE(p->complete(fakes::make_request("hi")).ok());
  EXPECT_EQ(fake.received()[0].header("authorization"), "");
}

TEST(OpenAi, BaseUrlFromEnvironment) {
  FakeLlm fake(Protocol::kOpenAi);
  Env env{{"OPENAI_BASE_URL", fake.base_url() + "/"}};
  auto p = make(fakes::test_options("openai:local", "", &env));
  ASSERT_TRUE(p->complete(fakes::make_request("hi")).ok());
  EXPECT_EQ(fake.count(), 1);
}

TEST(Anthropic, MessagesWithCacheControlAndCacheUsage) {
  FakeLlm fake(Protocol::kAnthropic);
  fake.push(Step{.text = "ok", .usage = fakes::FakeUsage{10, 5, 900, 40}});
  Env env{{"ANTHROPIC_API_KEY", "sk-ant-test-0002"}};
  auto p = make(fakes::test_options("anthropic:claude-test", fake.base_url(), &env));
  Request req = fakes::make_request("shared prefix", "optimize", "L2/1");
  req.messages.push_back({"assistant", "previous answer"});
  req.messages.push_back({"user", "now improve it"});
  req.cache_prefix_messages = 1;
  Reply r = p->complete(req);
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.completion->usage.input, 10);
  EXPECT_EQ(r.completion->usage.output, 5);
  EXPECT_EQ(r.completion->usage.cache_read, 900);
  EXPECT_EQ(r.completion->usage.cache_write, 40);
  auto got = fake.received().at(0);
  EXPECT_TRUE(fake.problems().empty());
  EXPECT_EQ(got.header("x-api-key"), "sk-ant-test-0002");
  EXPECT_EQ(got.header("anthropic-version"), "2023-06-01");
  EXPECT_EQ(got.header("x-mkevolve-agent"), "optimize");
  json body = json::parse(got.body);
  EXPECT_EQ(body["max_tokens"], 256);
  EXPECT_EQ(body["system"][0]["text"], "You write Triton kernels.");
  EXPECT_EQ(body["system"][0]["cache_control"]["type"], "ephemeral");
  ASSERT_EQ(body["messages"].size(), 3u);
  EXPECT_EQ(body["messages"][0]["content"][0]["cache_control"]["type"], "ephemeral");
  EXPECT_FALSE(body["messages"][1]["content"][0].contains("cache_control"));
  EXPECT_FALSE(body["messages"][2]["content"][0].contains("cache_control"));
}

TEST(Anthropic, ReasoningEffortTurnsOnThinkingAndItsBlocksAreNotText) {
  FakeLlm fake(Protocol::kAnthropic);
  fake.push(Step{.text = "the kernel", .thinking = "first, tile the matmul ..."});
  Env env{{"ANTHROPIC_API_KEY", "sk-ant-test-0003"}};
  auto p = make(fakes::test_options("anthropic:claude-test", fake.base_url(), &env));
  Request req = fakes::make_request("write a relu", "generate", "L1/19");
  req.temperature = 0.7;  // not allowed beside thinking: dropped
  req.top_p = 0.9;
  req.reasoning_effort = "medium";
  Reply r = p->complete(req);
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.completion->text, "the kernel");
  ASSERT_EQ(fake.count(), 1);
  EXPECT_TRUE(fake.problems().empty()) << fake.problems()[0];
  json body = json::parse(fake.received()[0].body);
  EXPECT_EQ(body["thinking"]["type"], "enabled");
  EXPECT_EQ(body["thinking"]["budget_tokens"], 8192);
  EXPECT_EQ(body["max_tokens"], 256 + 8192);  // the reply keeps its own room
  EXPECT_FALSE(body.contains("temperature"));
  EXPECT_FALSE(body.contains("top_p"));

  // Without an effort: no thinking, sampling settings as asked.
  req.reasoning_effort.clear();
  ASSERT_TRUE(p->complete(req).ok());
  json plain = json::parse(fake.received()[1].body);
  EXPECT_FALSE(plain.contains("thinking"));
  EXPECT_EQ(plain["temperature"], 0.7);
  EXPECT_EQ(plain["max_tokens"], 256);
}

TEST(Anthropic, UnknownReasoningEffortFailsBeforeAnythingIsSent) {
  FakeLlm fake(Protocol::kAnthropic);
  Env env{{"ANTHROPIC_API_KEY", "sk-ant-test-0004"}};
  auto p = make(fakes::test_options("anthropic:claude-test", fake.base_url(), &env));
  Request req = fakes::make_request("hi");
  req.reasoning_effort = "maximal";
  Reply r = p->complete(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->kind, LlmError::Kind::kBadRequest);
  EXPECT_NE(r.error->message.find("'maximal' is not low, medium or high"), std::string::npos) << r.error->message;
  EXPECT_EQ(fake.count(), 0);
}

TEST(Bedrock, ReasoningEffortIsAClaudeThinkingBudgetAndOtherModelsSayNo) {
  FakeLlm fake(Protocol::kBedrock);
  fake.push(Step{.text = "from claude", .thinking = "reasoning ..."});
  fakes::AwsTestCredentials creds;
  Env env{{"AWS_ACCESS_KEY_ID", creds.access_key_id}, {"AWS_SECRET_ACCESS_KEY", creds.secret},
          {"AWS_REGION", creds.region}};
  auto p = make(fakes::test_options("bedrock:us.anthropic.claude-sonnet-4-5-v1:0", fake.base_url(), &env));
  Request req = fakes::make_request("hello bedrock", "generate", "L2/5");
  req.temperature = 0.5;
  req.reasoning_effort = "low";
  Reply r = p->complete(req);
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.completion->text, "from claude");
  EXPECT_TRUE(fake.problems().empty()) << fake.problems()[0];
  json body = json::parse(fake.received().at(0).body);
  EXPECT_EQ(body["additionalModelRequestFields"]["thinking"]["budget_tokens"], 2048);
  EXPECT_EQ(body["inferenceConfig"]["maxTokens"], 256 + 2048);
  EXPECT_FALSE(body["inferenceConfig"].contains("temperature"));

  auto other = make(fakes::test_options("bedrock:meta.llama3-70b-instruct-v1:0", fake.base_url(), &env));
  Reply no = other->complete(req);
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.error->kind, LlmError::Kind::kBadRequest);
  EXPECT_NE(no.error->message.find("only to Anthropic Claude models"), std::string::npos) << no.error->message;
  EXPECT_EQ(fake.count(), 1);
}

TEST(Bedrock, ConverseIsSignedAndVerified) {
  FakeLlm fake(Protocol::kBedrock);
  fake.push(Step{.text = "from bedrock", .usage = fakes::FakeUsage{50, 6, 400, 12}});
  fakes::AwsTestCredentials creds;
  Env env{{"AWS_ACCESS_KEY_ID", creds.access_key_id}, {"AWS_SECRET_ACCESS_KEY", creds.secret},
          {"AWS_REGION", creds.region}};
  auto p = make(fakes::test_options("bedrock:anthropic.claude-3-5-sonnet-20240620-v1:0", fake.base_url(), &env));
  Request req = fakes::make_request("hello bedrock", "decompose", "L3/43");
  req.cache_prefix_messages = 1;
  Reply r = p->complete(req);
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_TRUE(fake.problems().empty()) << fake.problems()[0];
  EXPECT_EQ(r.completion->text, "from bedrock");
  EXPECT_EQ(r.completion->usage.input, 50);
  EXPECT_EQ(r.completion->usage.cache_read, 400);
  EXPECT_EQ(r.completion->usage.cache_write, 12);
  auto got = fake.received().at(0);
  EXPECT_EQ(got.path, "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse");
  EXPECT_EQ(got.header("x-mkevolve-task"), "L3/43");
  json body = json::parse(got.body);
  EXPECT_EQ(body["inferenceConfig"]["maxTokens"], 256);
  EXPECT_EQ(body["system"][0]["text"], "You write Triton kernels.");
  EXPECT_TRUE(body["system"][1].contains("cachePoint"));
  EXPECT_TRUE(body["messages"][0]["content"][1].contains("cachePoint"));
}

TEST(Bedrock, SessionTokenAndWrongSecret) {
  FakeLlm fake(Protocol::kBedrock);
  fakes::AwsTestCredentials creds;
  Env env{{"AWS_ACCESS_KEY_ID", creds.access_key_id}, {"AWS_SECRET_ACCESS_KEY", creds.secret},
          {"AWS_SESSION_TOKEN", "session-token-abc"}, {"AWS_REGION", creds.region}};
  auto p = make(fakes::test_options("bedrock:meta.llama3-70b-instruct-v1:0", fake.base_url(), &env));
  ASSERT_TRUE(p->complete(fakes::make_request("x")).ok());
  EXPECT_EQ(fake.received()[0].header("x-amz-security-token"), "session-token-abc");
  // Prompt caching is off for models without cache points.
  EXPECT_FALSE(json::parse(fake.received()[0].body).contains("system") &&
               json::parse(fake.received()[0].body)["system"].size() > 1);

  Env bad = env;
  bad["AWS_SECRET_ACCESS_KEY"] = "not-the-right-secret";
  auto q = make(fakes::test_options("bedrock:meta.llama3-70b-instruct-v1:0", fake.base_url(), &bad));
  Reply r = q->complete(fakes::make_request("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->http_status, 403);
  EXPECT_EQ(r.error->kind, LlmError::Kind::kAuth);
  EXPECT_NE(r.error->message.find("403 from bedrock: check the AWS credentials (environment)"), std::string::npos)
      << r.error->message;
  EXPECT_EQ(fake.count(), 2);  // no retry
}

TEST(Retry, Honours429RetryAfterThenSucceeds) {
  FakeLlm fake(Protocol::kOpenAi);
  fake.push(Step{.status = 429, .headers = {{"Retry-After", "1"}}});
  fake.push(Step{.text = "after wait"});
  Env env;
  fakes::SleepLog sleeps;
  auto p = make(fakes::test_options("openai:m", fake.base_url(), &env, &sleeps));
  Reply r = p->complete(fakes::make_request("x"));
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.completion->text, "after wait");
  EXPECT_EQ(fake.count(), 2);
  ASSERT_EQ(sleeps.get().size(), 1u);
  EXPECT_DOUBLE_EQ(sleeps.get()[0], 1.0);
}

TEST(Retry, ServerErrorsBackOffThenSucceed) {
  FakeLlm fake(Protocol::kAnthropic);
  fake.push(Step{.status = 500});
  fake.push(Step{.status = 529});
  fake.push(Step{.text = "third time"});
  Env env{{"ANTHROPIC_API_KEY", "sk-ant-x-12345678"}};
  fakes::SleepLog sleeps;
  auto p = make(fakes::test_options("anthropic:m", fake.base_url(), &env, &sleeps));
  Reply r = p->complete(fakes::make_request("x"));
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(fake.count(), 3);
  auto w = sleeps.get();
  ASSERT_EQ(w.size(), 2u);
  // Exponential backoff with jitter in [50%, 100%]: 10 ms then 20 ms nominal.
  EXPECT_GE(w[0], 0.005);
  EXPECT_LE(w[0], 0.010);
  EXPECT_GE(w[1], 0.010);
  EXPECT_LE(w[1], 0.020);
}

TEST(Retry, GivesUpAfterMaxRetries) {
  FakeLlm fake(Protocol::kOpenAi);
  fake.set_fallback(Step{.status = 503});
  Env env;
  fakes::SleepLog sleeps;
  auto p = make(fakes::test_options("openai:m", fake.base_url(), &env, &sleeps));
  Reply r = p->complete(fakes::make_request("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(fake.count(), 4);  // 1 + 3 retries
  EXPECT_EQ(r.error->http_status, 503);
  EXPECT_NE(r.error->message.find("gave up after 4 attempts"), std::string::npos) << r.error->message;
}

TEST(Retry, DroppedConnectionIsRetried) {
  FakeLlm fake(Protocol::kOpenAi);
  fake.push(Step{.hang_up = true});
  fake.push(Step{.text = "fine"});
  Env env;
  fakes::SleepLog sleeps;
  auto p = make(fakes::test_options("openai:m", fake.base_url(), &env, &sleeps));
  Reply r = p->complete(fakes::make_request("x"));
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.completion->text, "fine");
}

TEST(Errors, TimeoutIsReportedAfterRetries) {
  FakeLlm fake(Protocol::kOpenAi);
  fake.set_fallback(Step{.delay_s = 3});
  Env env;
  fakes::SleepLog sleeps;
  auto o = fakes::test_options("openai:m", fake.base_url(), &env, &sleeps);
  o.total_timeout_s = 0.3;
  o.max_retries = 1;
  auto p = make(o);
  Reply r = p->complete(fakes::make_request("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->kind, LlmError::Kind::kTimeout);
  EXPECT_NE(r.error->message.find("did not answer in time"), std::string::npos) << r.error->message;
  EXPECT_EQ(fake.count(), 2);
}

TEST(Errors, Unauthorized401IsNotRetriedAndSaysWhatToFix) {
  FakeLlm fake(Protocol::kAnthropic);
  fake.set_fallback(Step{.status = 401});
  Env env{{"ANTHROPIC_API_KEY", "sk-ant-wrong-000000"}};
  auto p = make(fakes::test_options("anthropic:m", fake.base_url(), &env));
  Reply r = p->complete(fakes::make_request("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(fake.count(), 1);
  EXPECT_EQ(r.error->kind, LlmError::Kind::kAuth);
  EXPECT_FALSE(r.error->retryable);
  EXPECT_EQ(r.error->message.rfind("401 from anthropic: check ANTHROPIC_API_KEY", 0), 0u) << r.error->message;
}

TEST(Errors, BadRequestAndNotFoundAreNotRetried) {
  FakeLlm fake(Protocol::kOpenAi);
  fake.push(Step{.status = 400});
  fake.push(Step{.status = 404});
  Env env;
  auto p = make(fakes::test_options("openai:no-such-model", fake.base_url(), &env));
  Reply a = p->complete(fakes::make_request("x"));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error->kind, LlmError::Kind::kBadRequest);
  EXPECT_NE(a.error->message.find("scripted status 400"), std::string::npos) << a.error->message;
  Reply b = p->complete(fakes::make_request("x"));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error->kind, LlmError::Kind::kNotFound);
  EXPECT_NE(b.error->message.find("check the model name 'no-such-model'"), std::string::npos) << b.error->message;
  EXPECT_EQ(fake.count(), 2);
}

TEST(Errors, MalformedAndEmptyRepliesAreErrorValues) {
  for (auto proto : {Protocol::kOpenAi, Protocol::kAnthropic, Protocol::kBedrock}) {
    FakeLlm fake(proto);
    fake.push(Step{.raw_body = std::string("{not json")});
    fake.push(Step{.raw_body = std::string("{\"unexpected\": true}")});
    fake.push(Step{.raw_body = std::string("[1,2,3]")});
    fake.push(Step{.text = ""});
    fakes::AwsTestCredentials creds;
    Env env{{"ANTHROPIC_API_KEY", "sk-ant-x-12345678"}, {"AWS_ACCESS_KEY_ID", creds.access_key_id},
            {"AWS_SECRET_ACCESS_KEY", creds.secret}, {"AWS_REGION", creds.region}};
    std::string spec = proto == Protocol::kOpenAi ? "openai:m" : proto == Protocol::kAnthropic ? "anthropic:m" : "bedrock:m";
    auto p = make(fakes::test_options(spec, fake.base_url(), &env));
    for (auto kind : {LlmError::Kind::kMalformed, LlmError::Kind::kMalformed, LlmError::Kind::kMalformed,
                      LlmError::Kind::kEmpty}) {
      Reply r = p->complete(fakes::make_request("x"));
      ASSERT_FALSE(r.ok()) << spec;
      EXPECT_EQ(r.error->kind, kind) << spec << ": " << r.error->message;
      EXPECT_EQ(r.error->message.find('\n'), std::string::npos);
    }
    EXPECT_EQ(fake.count(), 4) << spec;
  }
}

TEST(Usage, AnEmptyReplyThatReportsItsUsageIsCountedAsBilled) {
  // The endpoint spent the tokens (reasoning, say) and bills them; the reply
  // has no text, so it is an error, and the run's token counts still include
  // what the server reported.
  for (auto proto : {Protocol::kOpenAi, Protocol::kAnthropic, Protocol::kBedrock}) {
    FakeLlm fake(proto);
    fake.push(Step{.text = "", .usage = fakes::FakeUsage{.input = 1000, .output = 500}, .truncated = true});
    fakes::AwsTestCredentials creds;
    Env env{{"ANTHROPIC_API_KEY", "sk-ant-x-12345678"}, {"AWS_ACCESS_KEY_ID", creds.access_key_id},
            {"AWS_SECRET_ACCESS_KEY", creds.secret}, {"AWS_REGION", creds.region}};
    std::string spec = proto == Protocol::kOpenAi ? "openai:m" : proto == Protocol::kAnthropic ? "anthropic:m" : "bedrock:m";
    Accounting acc;
    auto o = fakes::test_options(spec, fake.base_url(), &env);
    o.accounting = &acc;
    auto p = make(o);
    Reply r = p->complete(fakes::make_request("x"));
    ASSERT_FALSE(r.ok()) << spec;
    EXPECT_EQ(r.error->kind, LlmError::Kind::kEmpty) << spec;
    EXPECT_EQ(r.error->billed.input, 1000) << spec;
    EXPECT_EQ(r.error->billed.output, 500) << spec;
    EXPECT_FALSE(r.error->billed.estimated) << spec;
    Tally t = acc.total();
    EXPECT_EQ(t.errors, 1) << spec;
    EXPECT_EQ(t.usage.input, 1000) << spec;
    EXPECT_EQ(t.usage.output, 500) << spec;
  }
}

TEST(Truncation, FlaggedForEveryProtocol) {
  for (auto proto : {Protocol::kOpenAi, Protocol::kAnthropic, Protocol::kBedrock}) {
    FakeLlm fake(proto);
    fake.push(Step{.text = "partial", .truncated = true});
    fakes::AwsTestCredentials creds;
    Env env{{"ANTHROPIC_API_KEY", "sk-ant-x-12345678"}, {"AWS_ACCESS_KEY_ID", creds.access_key_id},
            {"AWS_SECRET_ACCESS_KEY", creds.secret}, {"AWS_REGION", creds.region}};
    std::string spec = proto == Protocol::kOpenAi ? "openai:m" : proto == Protocol::kAnthropic ? "anthropic:m" : "bedrock:m";
    auto p = make(fakes::test_options(spec, fake.base_url(), &env));
    Reply r = p->complete(fakes::make_request("x"));
    ASSERT_TRUE(r.ok()) << r.error->message;
    EXPECT_TRUE(r.completion->truncated) << spec;
    EXPECT_EQ(r.completion->text, "partial");
  }
}

TEST(Usage, EstimatedWhenTheProviderReportsNone) {
  FakeLlm fake(Protocol::kOpenAi);
  fake.push(Step{.text = std::string(40, 'x'), .usage = std::nullopt});
  Env env;
  auto p = make(fakes::test_options("openai:m", fake.base_url(), &env));
  Reply r = p->complete(fakes::make_request(std::string(400, 'y')));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.completion->usage.estimated);
  EXPECT_EQ(r.completion->usage.output, 10);
  EXPECT_GE(r.completion->usage.input, 100);
  EXPECT_LE(r.completion->usage.input, 110);
}

TEST(Concurrency, CapLimitsRequestsInFlight) {
  FakeLlm fake(Protocol::kOpenAi);
  fake.set_fallback(Step{.delay_s = 0.15});
  Env env;
  auto o = fakes::test_options("openai:m", fake.base_url(), &env);
  o.concurrency = 2;
  auto p = make(o);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i)
    threads.emplace_back([&, i] {
      Request req = fakes::make_request("x" + std::to_string(i));
      if (p->complete(req).ok()) ++ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 6);
  EXPECT_EQ(fake.count(), 6);
  EXPECT_LE(fake.max_in_flight(), 2);
  EXPECT_GE(fake.max_in_flight(), 1);
}

TEST(Errors, UnreachableBaseUrlIsOneLineWithTheFix) {
  Env env;
  auto o = fakes::test_options("openai:m", "http://127.0.0.1:" + std::to_string(fakes::closed_port()) + "/v1", &env);
  o.max_retries = 1;
  fakes::SleepLog sleeps;
  o.sleep = sleeps.fn();
  auto p = make(o);
  Reply r = p->complete(fakes::make_request("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->kind, LlmError::Kind::kNetwork);
  EXPECT_NE(r.error->message.find("cannot reach openai at http://127.0.0.1:"), std::string::npos) << r.error->message;
  EXPECT_NE(r.error->message.find("check --base-url"), std::string::npos) << r.error->message;
  EXPECT_EQ(r.error->message.find('\n'), std::string::npos);
}

TEST(Cancel, AbortsARequestInFlightAndStopsRetrying) {
  FakeLlm fake(Protocol::kOpenAi);
  fake.set_fallback(Step{.delay_s = 5});
  Env env;
  std::atomic<bool> stop{false};
  auto o = fakes::test_options("openai:m", fake.base_url(), &env);
  o.total_timeout_s = 30;
  o.cancelled = [&] { return stop.load(); };
  auto p = make(o);
  std::thread canceller([&] {
    while (fake.count() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stop = true;
  });
  Reply r = p->complete(fakes::make_request("x"));
  canceller.join();
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.error->retryable);
  EXPECT_NE(r.error->message.find("cancelled"), std::string::npos) << r.error->message;
  EXPECT_EQ(fake.count(), 1);
}

TEST(Http, RetryAfterSecondsAndDates) {
  EXPECT_DOUBLE_EQ(parse_retry_after("7", 0), 7.0);
  EXPECT_DOUBLE_EQ(parse_retry_after(" 1.5 ", 0), 1.5);
  EXPECT_DOUBLE_EQ(parse_retry_after("", 0), -1);
  EXPECT_DOUBLE_EQ(parse_retry_after("soon", 0), -1);
  // Wed, 21 Oct 2015 07:28:00 GMT = 1445412480
  EXPECT_DOUBLE_EQ(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412480 - 30), 30.0);
  EXPECT_DOUBLE_EQ(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412480 + 30), 0.0);
}

TEST(Http, RetryAfterDateFromServer) {
  FakeLlm fake(Protocol::kOpenAi);
  char date[64];
  std::time_t later = std::time(nullptr) + 90;
  std::tm tm{};
  gmtime_r(&later, &tm);
  std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  fake.push(Step{.status = 503, .headers = {{"Retry-After", date}}});
  fake.push(Step{});
  Env env;
  fakes::SleepLog sleeps;
  auto p = make(fakes::test_options("openai:m", fake.base_url(), &env, &sleeps));
  ASSERT_TRUE(p->complete(fakes::make_request("x")).ok());
  ASSERT_EQ(sleeps.get().size(), 1u);
  EXPECT_GE(sleeps.get()[0], 80.0);
  EXPECT_LE(sleeps.get()[0], 91.0);
}

}  // namespace
}  // namespace mk::llm

namespace mk::llm {
namespace {

// Provider::probe(): one GET of the models list through the whole stack (the
// decorators pass it on), never retried; only an unreachable server or a
// refused key is an error.
TEST(Probe, OnlyAnUnreachableServerOrARefusedKeyIsAnError) {
  int status = 200;
  std::vector<std::string> seen;
  std::mutex mu;
  fakes::HttpServer srv([&](const fakes::ReceivedRequest& r) {
    std::lock_guard lock(mu);
    seen.push_back(r.method + " " + r.path + " " + r.header("x-api-key"));
    fakes::ScriptedResponse resp;
    resp.status = status;
    resp.body = R"({"data": []})";
    return resp;
  });
  std::string base = "http://127.0.0.1:" + std::to_string(srv.port());
  Env env{{"ANTHROPIC_API_KEY", "sk-ant-test-0001"}};
  auto p = make(fakes::test_options("anthropic:claude-test", base, &env));
  EXPECT_FALSE(p->probe().has_value());
  status = 404;  // a server that lists no models is still there
  EXPECT_FALSE(p->probe().has_value());
  status = 401;
  auto refused = p->probe();
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->kind, LlmError::Kind::kAuth) << refused->message;
  EXPECT_NE(refused->message.find("ANTHROPIC_API_KEY"), std::string::npos) << refused->message;
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(seen.size(), 3u);  // no retries
    EXPECT_EQ(seen[0], "GET /v1/models sk-ant-test-0001");
  }
  auto dead = make(fakes::test_options("openai:m", "http://127.0.0.1:9/v1", &env))->probe();
  ASSERT_TRUE(dead.has_value());
  EXPECT_NE(dead->message.find("http://127.0.0.1:9/v1/models"), std::string::npos) << dead->message;
}

}  // namespace
}  // namespace mk::llm

namespace mk::llm {
namespace {

// Which failures are final at once and which are retried, against real local
// sockets: a closed port, a name that does not resolve, TLS spoken to a plain
// HTTP server, and a server answering 401, 403, 404, 429 and 503. Only a busy
// or failing server (429, 5xx) and timeouts are worth waiting for.
TEST(Retry, RefusedUnresolvedTlsAndClientErrorsAreFinalAtOnce) {
  Env env;
  auto attempts = [&](const std::string& base, Reply* out) {
    fakes::SleepLog sleeps;
    auto p = make(fakes::test_options("openai:m", base, &env, &sleeps));
    *out = p->complete(fakes::make_request("x"));
    return sleeps.get().size() + 1;  // one wait before each retry
  };
  Reply r;
  EXPECT_EQ(attempts("http://127.0.0.1:" + std::to_string(fakes::closed_port()) + "/v1", &r), 1u);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->kind, LlmError::Kind::kNetwork);
  EXPECT_FALSE(r.error->retryable);
  EXPECT_EQ(r.error->message.find("gave up"), std::string::npos) << r.error->message;

  EXPECT_EQ(attempts("http://no-such-host.invalid/v1", &r), 1u);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.error->retryable) << r.error->message;

  int status = 200;
  std::atomic<int> seen{0};
  fakes::HttpServer srv([&](const fakes::ReceivedRequest&) {
    ++seen;
    fakes::ScriptedResponse resp;
    resp.status = status;
    resp.body = R"({"error": {"message": "scripted"}})";
    return resp;
  });
  {
    // TLS to a server that answers in plain text at once: the handshake
    // fails ("wrong version number"), and would every time.
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(fd, 8), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    std::atomic<int> accepted{0};
    std::thread plain([&] {
      for (int i = 0; i < 4; ++i) {  // at most the attempts a retry would make
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 3000) <= 0) return;
        int c = ::accept(fd, nullptr, nullptr);
        if (c < 0) return;
        ++accepted;
        const char reply[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        (void)!::write(c, reply, sizeof reply - 1);
        ::close(c);
      }
    });
    EXPECT_EQ(attempts("https://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/v1", &r), 1u) << r.error->message;
    ::shutdown(fd, SHUT_RDWR);
    plain.join();
    ::close(fd);
    EXPECT_EQ(accepted.load(), 1);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error->kind, LlmError::Kind::kConfig) << r.error->message;
    EXPECT_FALSE(r.error->retryable);
  }

  const std::string base = "http://127.0.0.1:" + std::to_string(srv.port()) + "/v1";
  for (int s : {401, 403, 404}) {
    status = s;
    seen = 0;
    EXPECT_EQ(attempts(base, &r), 1u) << s;
    EXPECT_EQ(seen.load(), 1) << s;
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error->http_status, s);
    EXPECT_FALSE(r.error->retryable) << s;
  }
  for (int s : {429, 503}) {
    status = s;
    seen = 0;
    EXPECT_EQ(attempts(base, &r), 4u) << s;  // 1 + 3 retries
    EXPECT_EQ(seen.load(), 4) << s;
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.error->retryable) << s;
  }
}

}  // namespace
}  // namespace mk::llm
