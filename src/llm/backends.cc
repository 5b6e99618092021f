#include "llm/backends.h"

#include <algorithm>

namespace mk::llm {

std::vector<std::pair<std::string, std::string>> mkevolve_headers(const Request& req) {
  return {{"X-MKEvolve-Agent", header_safe(req.agent.empty() ? "-" : req.agent)},
          {"X-MKEvolve-Task", header_safe(req.task.empty() ? "-" : req.task)}};
}

Reply http_exchange(HttpClient& http, const HttpRequest& hreq, const EndpointInfo& who,
                    const std::function<Reply(const std::string& body)>& parse) {
  HttpResponse resp = http.send(hreq);
  if (resp.failure != HttpResponse::Failure::kNone || resp.status < 200 || resp.status >= 300)
    return Reply::Err(http_error(resp, hreq, who));
  return parse(resp.body);
}

std::optional<LlmError> probe_endpoint(HttpClient& http, HttpRequest hreq, const EndpointInfo& who) {
  hreq.method = "GET";
  hreq.body.clear();
  hreq.total_timeout_s = std::max(hreq.connect_timeout_s, 1.0) + 20;
  HttpResponse resp = http.send(hreq);
  if (resp.failure == HttpResponse::Failure::kCancelled) return std::nullopt;  // the caller sees the interrupt
  if (resp.failure != HttpResponse::Failure::kNone || resp.status == 401 || resp.status == 403)
    return http_error(resp, hreq, who);
  // Any other answer, 404 included (not every server lists its models), is a
  // server that is there; the first real call says the rest.
  return std::nullopt;
}

}  // namespace mk::llm
