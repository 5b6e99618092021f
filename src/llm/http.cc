#include "llm/http.h"

#include <curl/curl.h>

#include <cctype>
#include <cmath>
#include <mutex>

#include <nlohmann/json.hpp>

#include "util/env.h"

namespace mk::llm {

namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

std::string trim(std::string s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(user);
  std::string line(data, size * n);
  // A new status line (after a redirect or a 100 Continue) starts a fresh set.
  if (line.rfind("HTTP/", 0) == 0) {
    headers->clear();
    return size * n;
  }
  auto colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string name = line.substr(0, colon);
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  (*headers)[trim(name)] = trim(line.substr(colon + 1));
  return size * n;
}

std::string one_line(std::string s, size_t max) {
  for (auto& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  std::string out;
  for (char c : s)
    if (!(c == ' ' && !out.empty() && out.back() == ' ')) out += c;
  out = trim(out);
  if (out.size() > max) out = out.substr(0, max) + "...";
  return out;
}

/// The server's own explanation, from the usual JSON error shapes or the raw body.
std::string server_said(const std::string& body) {
  if (body.empty()) return "";
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object()) {
    if (j.contains("error")) {
      const auto& e = j["error"];
      if (e.is_object() && e.contains("message") && e["message"].is_string())
        return one_line(e["message"].get<std::string>(), 240);
      if (e.is_string()) return one_line(e.get<std::string>(), 240);
    }
    for (const char* k : {"message", "Message", "detail"})
      if (j.contains(k) && j[k].is_string()) return one_line(j[k].get<std::string>(), 240);
  }
  return one_line(body, 160);
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* cancelled = static_cast<const std::function<bool()>*>(user);
  return (*cancelled)() ? 1 : 0;
}

}  // namespace

struct HttpClient::Impl {
  std::mutex mu;
  std::vector<CURL*> idle;  // reused handles keep their connections alive

  CURL* take() {
    {
      std::lock_guard lock(mu);
      if (!idle.empty()) {
        CURL* h = idle.back();
        idle.pop_back();
        curl_easy_reset(h);
        return h;
      }
    }
    return curl_easy_init();
  }
  void give(CURL* h) {
    std::lock_guard lock(mu);
    if (idle.size() < 32) {
      idle.push_back(h);
    } else {
      curl_easy_cleanup(h);
    }
  }
  ~Impl() {
    for (CURL* h : idle) curl_easy_cleanup(h);
  }
};

HttpClient::HttpClient() : impl_(std::make_unique<Impl>()) { global_init(); }
HttpClient::~HttpClient() = default;

HttpResponse HttpClient::send(const HttpRequest& req) {
  HttpResponse resp;
  CURL* h = impl_->take();
  if (!h) {
    resp.failure = HttpResponse::Failure::kOther;
    resp.error = "cannot initialise libcurl";
    return resp;
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_slist* hdrs = nullptr;
  for (const auto& [k, v] : req.headers) hdrs = curl_slist_append(hdrs, (k + ": " + v).c_str());
  hdrs = curl_slist_append(hdrs, "Expect:");  // no 100-continue round trip
  curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::llround(req.connect_timeout_s * 1000)));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(std::llround(req.total_timeout_s * 1000)));
  curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp.body);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &resp.headers);
  if (req.cancelled) {
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, &on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &req.cancelled);
  }
  if (req.method == "POST") {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  } else if (req.method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
  CURLcode rc = curl_easy_perform(h);
  if (rc == CURLE_OK) {
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    resp.status = static_cast<int>(status);
  } else {
    switch (rc) {
      case CURLE_COULDNT_CONNECT:
      case CURLE_COULDNT_RESOLVE_HOST:
      case CURLE_COULDNT_RESOLVE_PROXY:
        resp.failure = HttpResponse::Failure::kConnect;
        break;
      case CURLE_OPERATION_TIMEDOUT:
        resp.failure = HttpResponse::Failure::kTimeout;
        break;
      case CURLE_ABORTED_BY_CALLBACK:
        resp.failure = HttpResponse::Failure::kCancelled;
        break;
      // A bad URL or a TLS failure (handshake, certificate, cipher): no retry
      // makes the same server answer differently.
      case CURLE_URL_MALFORMAT:
      case CURLE_UNSUPPORTED_PROTOCOL:
      case CURLE_PEER_FAILED_VERIFICATION:
      case CURLE_SSL_CONNECT_ERROR:
      case CURLE_SSL_CERTPROBLEM:
      case CURLE_SSL_CIPHER:
      case CURLE_SSL_CACERT_BADFILE:
      case CURLE_SSL_ENGINE_NOTFOUND:
      case CURLE_SSL_ENGINE_SETFAILED:
      case CURLE_SSL_ENGINE_INITFAILED:
      case CURLE_SSL_CRL_BADFILE:
      case CURLE_SSL_ISSUER_ERROR:
      case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
      case CURLE_SSL_INVALIDCERTSTATUS:
      case CURLE_USE_SSL_FAILED:
        resp.failure = HttpResponse::Failure::kFatal;
        break;
      default:
        resp.failure = HttpResponse::Failure::kOther;
    }
    resp.error = errbuf[0] ? std::string(errbuf) : std::string(curl_easy_strerror(rc));
  }
  curl_slist_free_all(hdrs);
  impl_->give(h);
  return resp;
}

double parse_retry_after(const std::string& value, std::time_t now) {
  std::string v = trim(value);
  if (v.empty()) return -1;
  bool digits = true;
  for (char c : v) digits = digits && (std::isdigit(static_cast<unsigned char>(c)) || c == '.');
  if (digits) {
    try {
      return std::stod(v);
    } catch (...) {
      return -1;
    }
  }
  std::time_t t = curl_getdate(v.c_str(), nullptr);
  if (t < 0) return -1;
  return t > now ? static_cast<double>(t - now) : 0.0;
}

std::string header_safe(std::string value) {
  for (auto& c : value)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return value;
}

std::string uri_encode(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

LlmError http_error(const HttpResponse& resp, const HttpRequest& req, const EndpointInfo& who) {
  LlmError e;
  const std::string url = redact_secrets(req.url);
  auto fix_url = who.url_hint.empty() ? std::string("the base URL") : who.url_hint;
  if (resp.failure != HttpResponse::Failure::kNone) {
    std::string err = redact_secrets(one_line(resp.error, 200));
    switch (resp.failure) {
      case HttpResponse::Failure::kConnect:
        // Refused, or the name does not resolve: nothing listens there, and
        // waiting does not change that (7 attempts took 43 s to say so).
        e.kind = LlmError::Kind::kNetwork;
        e.retryable = false;
        e.message = "cannot reach " + who.provider + " at " + url + " (" + err + "): check " + fix_url +
                    " and that the server is running";
        break;
      case HttpResponse::Failure::kTimeout:
        e.kind = LlmError::Kind::kTimeout;
        e.retryable = true;
        e.message = who.provider + " did not answer in time (" + err + ", " + url +
                    "): check the server, or raise llm.timeout_s / llm.connect_timeout_s";
        break;
      case HttpResponse::Failure::kCancelled:
        e.kind = LlmError::Kind::kCancelled;
        e.retryable = false;
        e.message = "request to " + who.provider + " cancelled (interrupted)";
        break;
      case HttpResponse::Failure::kFatal:
        e.kind = LlmError::Kind::kConfig;
        e.retryable = false;
        e.message = "cannot talk to " + who.provider + " at " + url + " (" + err + "): check " + fix_url;
        break;
      default:
        e.kind = LlmError::Kind::kNetwork;
        e.retryable = true;
        e.message = "network error talking to " + who.provider + " at " + url + ": " + err;
    }
    return e;
  }
  const int s = resp.status;
  e.http_status = s;
  std::string said = redact_secrets(server_said(resp.body));
  std::string tail = said.empty() ? "" : " (server said: " + said + ")";
  std::string head = std::to_string(s) + " from " + who.provider;
  switch (s) {
    case 401:
      e.kind = LlmError::Kind::kAuth;
      e.message = head + ": check " + who.key_hint + tail;
      break;
    case 403:
      e.kind = LlmError::Kind::kAuth;
      e.message = head + ": check " + who.key_hint + " and that it may use model '" + who.model + "'" + tail;
      break;
    case 404:
      e.kind = LlmError::Kind::kNotFound;
      e.message = head + " for " + url + ": check the model name '" + who.model + "' and " + fix_url + tail;
      break;
    case 408: case 409: case 429: case 500: case 502: case 503: case 504: case 529:
      e.kind = LlmError::Kind::kHttp;
      e.retryable = true;
      e.message = head + (s == 429 ? ": rate limited" : s >= 500 ? ": server error or overload" : ": try again") + tail;
      break;
    default:
      e.kind = s >= 400 && s < 500 ? LlmError::Kind::kBadRequest : LlmError::Kind::kHttp;
      e.message = head + (s >= 400 && s < 500 ? ": the request was rejected" : ": unexpected status") + tail;
  }
  if (e.retryable) e.retry_after_s = parse_retry_after(resp.header("retry-after"), std::time(nullptr));
  return e;
}

}  // namespace mk::llm
