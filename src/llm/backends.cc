#include "llm/backends.h"

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

}  // namespace mk::llm
