#include "llm/sigv4.h"

#include <gtest/gtest.h>

#include "fakes/sigv4_verifier.h"
#include "util/fs.h"

namespace mk::llm {
namespace {

const char* kAwsExampleSignature = "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7";

AwsCredentials example_creds() {
  AwsCredentials c;
  c.access_key_id = "AKIDEXAMPLE";
  c.secret_access_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
  return c;
}

// AWS's published example: GET https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08.
TEST(SigV4, SignerMatchesAwsPublishedExample) {
  SigV4Request r;
  r.method = "GET";
  r.host = "iam.amazonaws.com";
  r.path = "/";
  r.query = "Action=ListUsers&Version=2010-05-08";
  r.headers = {{"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"}};
  r.region = "us-east-1";
  r.service = "iam";
  r.amz_date = "20150830T123600Z";
  SigV4Result s = sigv4_sign(r, example_creds());
  EXPECT_EQ(s.signature, kAwsExampleSignature);
  EXPECT_EQ(s.canonical_request,
            "GET\n/\nAction=ListUsers&Version=2010-05-08\n"
            "content-type:application/x-www-form-urlencoded; charset=utf-8\nhost:iam.amazonaws.com\n"
            "x-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(s.headers[0].second,
            std::string("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "
                        "SignedHeaders=content-type;host;x-amz-date, Signature=") +
                kAwsExampleSignature);
}

TEST(SigV4, VerifierAcceptsAwsPublishedExample) {
  fakes::ReceivedRequest req;
  req.method = "GET";
  req.path = "/";
  req.query = "Action=ListUsers&Version=2010-05-08";
  req.headers = {{"content-type", "application/x-www-form-urlencoded; charset=utf-8"},
                 {"host", "iam.amazonaws.com"},
                 {"x-amz-date", "20150830T123600Z"},
                 {"authorization", std::string("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/"
                                               "aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=") +
                                       kAwsExampleSignature}};
  fakes::AwsTestCredentials creds;
  creds.service = "iam";
  EXPECT_EQ(fakes::verify_sigv4(req, creds), "");
  req.query = "Action=ListUsers&Version=2010-05-09";
  EXPECT_NE(fakes::verify_sigv4(req, creds).find("signature mismatch"), std::string::npos);
}

// The Bedrock pitfall: the model id's ':' is encoded on the wire and encoded
// again in the canonical request.
TEST(SigV4, BedrockPathIsDoubleEncoded) {
  SigV4Request r;
  r.method = "POST";
  r.host = "bedrock-runtime.us-east-1.amazonaws.com";
  r.path = "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse";
  r.payload = "{}";
  r.region = "us-east-1";
  r.service = "bedrock";
  r.amz_date = "20250101T000000Z";
  SigV4Result s = sigv4_sign(r, example_creds());
  EXPECT_NE(s.canonical_request.find("\n/model/anthropic.claude-3-5-sonnet-20240620-v1%253A0/converse\n"),
            std::string::npos)
      << s.canonical_request;

  // The independent verifier agrees on the signature of that request.
  fakes::ReceivedRequest req;
  req.method = "POST";
  req.path = r.path;
  req.body = r.payload;
  req.headers["host"] = r.host;
  for (const auto& [k, v] : s.headers) {
    std::string l = k;
    for (auto& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    req.headers[l] = v;
  }
  fakes::AwsTestCredentials creds;
  EXPECT_EQ(fakes::verify_sigv4(req, creds), "");
  req.body = "{\"x\":1}";
  EXPECT_NE(fakes::verify_sigv4(req, creds), "");
}

TEST(SigV4, SessionTokenIsSignedAndSent) {
  SigV4Request r;
  r.method = "POST";
  r.host = "127.0.0.1:8080";
  r.path = "/model/m/converse";
  r.region = "us-west-2";
  r.service = "bedrock";
  r.amz_date = "20250101T000000Z";
  AwsCredentials c = example_creds();
  c.session_token = "token-value-123";
  SigV4Result s = sigv4_sign(r, c);
  EXPECT_NE(s.headers[0].second.find("SignedHeaders=host;x-amz-date;x-amz-security-token"), std::string::npos);
  ASSERT_EQ(s.headers.size(), 3u);
  EXPECT_EQ(s.headers[2].first, "X-Amz-Security-Token");
}

TEST(AwsCredentials, EnvironmentThenProfileFile) {
  TempDir d;
  Env env{{"AWS_ACCESS_KEY_ID", "AKIAENV"}, {"AWS_SECRET_ACCESS_KEY", "envsecret123"}, {"AWS_SESSION_TOKEN", "tok12345678"}};
  auto c = load_aws_credentials(env, d.path(), "");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->access_key_id, "AKIAENV");
  EXPECT_EQ(c->session_token, "tok12345678");

  ASSERT_TRUE(write_file_atomic(d.path() / ".aws/credentials",
                                "[default]\naws_access_key_id = AKIADEF\naws_secret_access_key = defsecret123\n\n"
                                "[work]\naws_access_key_id=AKIAWORK\naws_secret_access_key=worksecret12\n")
                  .ok());
  ASSERT_TRUE(write_file_atomic(d.path() / ".aws/config", "[profile work]\nregion = eu-west-1\n").ok());
  Env none;
  auto def = load_aws_credentials(none, d.path(), "");
  ASSERT_TRUE(def.ok()) << def.error();
  EXPECT_EQ(def->access_key_id, "AKIADEF");
  Env prof{{"AWS_PROFILE", "work"}};
  auto work = load_aws_credentials(prof, d.path(), "");
  ASSERT_TRUE(work.ok());
  EXPECT_EQ(work->access_key_id, "AKIAWORK");
  EXPECT_EQ(resolve_aws_region(prof, d.path(), "", ""), "eu-west-1");
  EXPECT_EQ(resolve_aws_region(Env{{"AWS_REGION", "us-east-2"}}, d.path(), "work", ""), "us-east-2");
  EXPECT_EQ(resolve_aws_region(none, d.path(), "", "ap-south-1"), "ap-south-1");

  auto missing = load_aws_credentials(none, d.path(), "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("profile [nope] not found"), std::string::npos) << missing.error();
  auto nofile = load_aws_credentials(none, d.path() / "elsewhere", "");
  ASSERT_FALSE(nofile.ok());
  EXPECT_NE(nofile.error().find("AWS_ACCESS_KEY_ID"), std::string::npos) << nofile.error();
}

}  // namespace
}  // namespace mk::llm
