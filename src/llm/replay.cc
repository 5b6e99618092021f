// replay:FILE: answers from a recorded session (JSON lines, format in
// docs/LLM.md). Recorded lines match by request fingerprint; hand-written
// scripted lines (no fingerprint) are served in file order per (agent, task).
#include <map>
#include <mutex>
#include <sstream>

#include "llm/backends.h"
#include "llm/wire.h"
#include "util/fs.h"

namespace mk::llm {

using nlohmann::json;

namespace {

struct Entry {
  int line = 0;
  std::string agent, task;          // scripted: "" = any
  std::string prompt_contains;      // scripted: optional guard
  std::optional<Completion> completion;
  std::optional<LlmError> error;
  bool cached = false;              // recorded as a cache hit: replayed as one, so accounting matches
  bool usage_recorded = false;      // the line gave the usage; else serve() estimates it from the request
  bool used = false;
};

class ReplayBackend : public Provider {
 public:
  ReplayBackend(std::filesystem::path file, std::vector<Entry> entries,
                std::map<std::string, std::vector<size_t>> by_fp, std::vector<size_t> scripted)
      : file_(std::move(file)), entries_(std::move(entries)), by_fp_(std::move(by_fp)), scripted_(std::move(scripted)) {}

  std::string spec() const override { return "replay:" + file_.string(); }

  Reply complete(const Request& req) override {
    std::lock_guard lock(mu_);
    const std::string fp = request_fingerprint(req);
    if (auto it = by_fp_.find(fp); it != by_fp_.end()) {
      // The next unused recording of this exact request; identical requests
      // beyond the recorded count get the last one again.
      size_t pick = it->second.back();
      for (size_t i : it->second)
        if (!entries_[i].used) {
          pick = i;
          break;
        }
      return serve(pick, req);
    }
    std::string prompt = req.system;
    for (const auto& m : req.messages) prompt += "\n" + m.content;
    // Scripted lines: exact (agent, task) first, then agent with any task, then any.
    for (int pass = 0; pass < 3; ++pass) {
      for (size_t i : scripted_) {
        Entry& e = entries_[i];
        if (e.used) continue;
        bool match = pass == 0   ? (!e.agent.empty() && e.agent == req.agent && !e.task.empty() && e.task == req.task)
                     : pass == 1 ? (!e.agent.empty() && e.agent == req.agent && e.task.empty())
                                 : (e.agent.empty() && (e.task.empty() || e.task == req.task));
        if (!match) continue;
        if (!e.prompt_contains.empty() && prompt.find(e.prompt_contains) == std::string::npos) continue;
        return serve(i, req);
      }
    }
    return error_reply(LlmError::Kind::kUnmatchedReplay,
                       "replay " + file_.string() + ": no recorded reply for " + request_label(req) + " (fingerprint " +
                           fp.substr(0, 12) + "), prompt " + prompt_excerpt(req) +
                           ": record the session again with --record, or add a scripted line for this agent/task");
  }

 private:
  Reply serve(size_t i, const Request& req) {
    Entry& e = entries_[i];
    e.used = true;
    if (e.error) {
      LlmError err = *e.error;
      err.message = "replayed error (" + file_.string() + ":" + std::to_string(e.line) + "): " + err.message;
      return Reply::Err(err);
    }
    Completion c = *e.completion;
    c.from_cache = e.cached;
    if (!e.usage_recorded) c.usage = estimate_usage(req, c.text);
    return Reply::Ok(std::move(c));
  }

  std::mutex mu_;
  std::filesystem::path file_;
  std::vector<Entry> entries_;
  std::map<std::string, std::vector<size_t>> by_fp_;
  std::vector<size_t> scripted_;
};

}  // namespace

Result<std::shared_ptr<Provider>> make_replay_backend(const std::filesystem::path& file) {
  auto text = read_file(file);
  if (!text.ok()) return Error{"replay: " + text.error() + " (replay:FILE needs a recording made with --record FILE)"};
  std::vector<Entry> entries;
  std::map<std::string, std::vector<size_t>> by_fp;
  std::vector<size_t> scripted;
  std::istringstream in(*text);
  std::string line;
  int n = 0;
  auto bad = [&](const std::string& what) { return Error{file.string() + ":" + std::to_string(n) + ": " + what}; };
  while (std::getline(in, line)) {
    ++n;
    size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
    Entry e;
    e.line = n;
    auto str = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); };
    e.agent = str("agent");
    e.task = str("task");
    e.prompt_contains = str("prompt_contains");
    e.cached = j.contains("cached") && j["cached"].is_boolean() && j["cached"].get<bool>();
    if (j.contains("error")) {
      e.error = error_from_json(j["error"]);
    } else {
      json resp = j.contains("response") ? j["response"] : json{{"text", j.contains("text") ? j["text"] : json()}};
      if (!resp.contains("text") || !resp["text"].is_string())
        return bad("needs \"response\": {\"text\": ...}, \"text\": \"...\" or \"error\": {...}");
      auto c = completion_from_json(resp);
      if (!c.ok()) return bad(c.error());
      // Without recorded usage, serve() estimates it from the request it
      // answers (a scripted line has no request of its own: estimated here,
      // every agent's input tokens would read 0).
      e.usage_recorded = resp.contains("usage");
      e.completion = *c;
    }
    size_t idx = entries.size();
    std::string fp = str("fingerprint");
    if (!fp.empty()) {
      by_fp[fp].push_back(idx);
    } else {
      scripted.push_back(idx);
    }
    entries.push_back(std::move(e));
  }
  if (entries.empty()) return Error{"replay: " + file.string() + " holds no entries"};
  return std::shared_ptr<Provider>(
      std::make_shared<ReplayBackend>(file, std::move(entries), std::move(by_fp), std::move(scripted)));
}

}  // namespace mk::llm
