#include "report/status_line.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "util/json_fields.h"
#include "report/summary.h"
#include "report/svg.h"
#include "run/events.h"
#include "util/strings.h"

namespace mk::report {

namespace {

using nlohmann::json;
using namespace fields;

std::string x(const std::optional<double>& v) {
  // No measurement, or 0: a correct kernel without a torch.compile baseline
  // (a torch that has none) has speedup 0, which is no speed at all to show.
  if (!v || *v <= 0) return "\u2014";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f\u00d7", *v);
  return buf;
}

// Columns a UTF-8 string takes (one per code point; the line holds no wide glyphs).
size_t columns(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

std::string cut_to(std::string s, size_t width) {
  if (columns(s) <= width) return s;
  size_t n = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (n == width - 1) break;
      ++n;
    }
  }
  return s.substr(0, i) + "\u2026";
}

}  // namespace

StatusLine::StatusLine(FILE* out, Options opts) : out_(out), opts_(opts) {
  mode_ = opts.mode;
  // A redrawn line needs a terminal that understands "erase line" (not TERM=dumb).
  const char* term = std::getenv("TERM");
  bool smart = !(term && std::string_view(term) == "dumb");
  if (mode_ == Mode::kAuto) mode_ = out && ::isatty(::fileno(out)) && smart ? Mode::kTerminal : Mode::kPlain;
  T_ = opts.iterations;
}

StatusLine::~StatusLine() { finish(); }

void StatusLine::update(const json& ev) {
  const std::string type = str(ev, "type");
  if (type == "run_start") {
    if (!str(ev, "method").empty()) method_ = str(ev, "method");
    problem_ = str(ev, "problem");
    if (auto s = ev.find("settings"); s != ev.end() && s->is_object()) {
      if (auto T = optnum(*s, "T")) T_ = static_cast<int>(*T);
      if (!opts_.max_calls)
        if (auto v = optnum(*s, "max_calls")) opts_.max_calls = static_cast<int64_t>(*v);
      if (!opts_.max_tokens)
        if (auto v = optnum(*s, "token_budget")) opts_.max_tokens = static_cast<int64_t>(*v);
    }
    phase_.clear();
  } else if (type == "llm_call") {
    ++calls_;
    const std::string agent = str(ev, "agent");
    if (run::events::is_kernel_agent(agent)) ++kernel_calls_;
    if (ev.value("cached", false)) {
      ++cached_;
    } else if (auto u = ev.find("usage"); u != ev.end() && u->is_object()) {
      tokens_ += integer(*u, "input") + integer(*u, "output") + integer(*u, "cache_read") + integer(*u, "cache_write");
    }
  } else if (type == "eval") {
    ++evals_done_;
  } else if (type == "eval_start") {  // live progress, not logged
    ++evals_in_flight_;
  } else if (type == "eval_done") {
    evals_in_flight_ = std::max(0, evals_in_flight_ - 1);
  } else if (type == "topology") {
    t_ = static_cast<int>(integer(ev, "iteration"));
    ok_ = failed_ = fresh_ = 0;
    if (auto sp = ev.find("subproblems"); sp != ev.end() && sp->is_array())
      for (const auto& s : *sp) {
        std::string st = str(s, "status");
        (st == "correct" ? ok_ : st == "failing" ? failed_ : fresh_)++;
      }
  } else if (type == "iteration") {
    t_ = static_cast<int>(integer(ev, "t"));
    if (auto sk = ev.find("subkernels"); sk != ev.end() && sk->is_array()) {
      ok_ = failed_ = fresh_ = 0;
      for (const auto& s : *sk) (s.value("correct", false) ? ok_ : failed_)++;
    }
    // The iteration's own counts are authoritative (they include calls made before a resume).
    if (integer(ev, "calls_used") > calls_) calls_ = integer(ev, "calls_used");
    if (integer(ev, "tokens") > tokens_) tokens_ = integer(ev, "tokens");
  } else if (type == "best") {
    best_ = optnum(ev, "speedup_compile");
  } else if (type == "postfuse") {
    phase_ = "post-fusion";
  } else if (type == "swap") {
    phase_ = "swap";
  } else if (type == "run_end") {
    if (auto b = optnum(ev, "best_speedup_compile")) best_ = b;
    phase_ = str(ev, "status");
  }
}

std::string StatusLine::current() const {
  std::string s = method_;
  s += " \u00b7 t " + std::to_string(t_) + (T_ > 0 ? "/" + std::to_string(T_) : "");
  s += " \u00b7 subproblems " + std::to_string(ok_) + "\u2713 " + std::to_string(failed_) + "\u2717";
  if (fresh_) s += " " + std::to_string(fresh_) + " new";
  s += " \u00b7 best " + x(best_);
  // The budget counts kernel calls only (decompose, split, fuse, judge are extra).
  s += " \u00b7 LLM " + std::to_string(calls_) + " calls" +
       (opts_.max_calls ? " (kernel " + std::to_string(kernel_calls_) + "/" + std::to_string(*opts_.max_calls) + ")" : "") +
       ", " + human_count(static_cast<double>(tokens_)) +
       (opts_.max_tokens ? "/" + human_count(static_cast<double>(*opts_.max_tokens)) : "") + " tokens";
  s += " \u00b7 " + std::to_string(evals_in_flight_) + " eval" + (evals_in_flight_ == 1 ? "" : "s") + " running";
  if (!phase_.empty()) s += " \u00b7 " + phase_;
  s += " \u00b7 " + human_duration(std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  return s;
}

std::string StatusLine::describe(const json& ev) const {
  const std::string type = str(ev, "type");
  std::string ts = str(ev, "ts");
  std::string when = ts.size() >= 19 ? ts.substr(11, 8) + " " : "";
  if (type == "run_start") {
    std::string line = when + "start: " + str(ev, "method") + " on " + str(ev, "problem");
    if (auto s = ev.find("settings"); s != ev.end() && s->is_object() && !s->empty()) line += " " + s->dump();
    return line;
  }
  if (type == "resume") return when + "resumed a run with " + std::to_string(integer(ev, "events_before")) + " events";
  // A failed call is said once, from its durable record (the live llm_done
  // progress event only says a call ended).
  if (type == "llm_call") {
    if (ev.value("ok", true)) return "";
    return when + "LLM call failed (" + str(ev, "agent") + ", " + str(ev, "task") + "): " + str(ev, "error");
  }
  if (type == "topology") {
    std::string change = str(ev, "change");
    int ok = 0, bad = 0, fresh = 0, n = 0;
    if (auto sp = ev.find("subproblems"); sp != ev.end() && sp->is_array())
      for (const auto& s : *sp) {
        std::string st = str(s, "status");
        (st == "correct" ? ok : st == "failing" ? bad : fresh)++;
        ++n;
      }
    std::string line = when + "t=" + std::to_string(integer(ev, "iteration")) + " structure " +
                       (change.empty() ? "?" : change) + ": " + std::to_string(n) + " subproblems (" +
                       std::to_string(ok) + "\u2713 " + std::to_string(bad) + "\u2717" +
                       (fresh ? " " + std::to_string(fresh) + " new" : "") + ")";
    if (!str(ev, "detail").empty()) line += "; " + str(ev, "detail");
    return line;
  }
  if (type == "iteration") {
    std::string line = when + "t=" + std::to_string(integer(ev, "t")) + (T_ > 0 ? "/" + std::to_string(T_) : "") +
                       " done: end-to-end ";
    if (auto e = ev.find("e2e"); e != ev.end() && e->is_object()) {
      std::string st = str(*e, "status");
      line += st.empty() ? "not evaluated" : st;
      if (st == "correct") line += " " + x(optnum(*e, "speedup_compile")) + " vs torch.compile";
    }
    int ok = 0, bad = 0;
    if (auto sk = ev.find("subkernels"); sk != ev.end() && sk->is_array())
      for (const auto& s : *sk) (s.value("correct", false) ? ok : bad)++;
    line += "; subkernels " + std::to_string(ok) + "\u2713 " + std::to_string(bad) + "\u2717";
    line += "; " + std::to_string(integer(ev, "calls_used")) + " LLM calls, " +
            human_count(static_cast<double>(integer(ev, "tokens"))) + " tokens so far";
    return line;
  }
  if (type == "best" && ev.contains("correct") && !ev.value("correct", true)) return "";  // older logs
  if (type == "best") return when + "new best: " + x(optnum(ev, "speedup_compile")) + " vs torch.compile at t=" + std::to_string(integer(ev, "t"));
  if (type == "swap")
    return when + "swapped " + str(ev, "name") + ": " + str(ev, "from") + " -> " + str(ev, "to") + " (end-to-end " +
           x(optnum(ev, "speedup_before")) + " -> " + x(optnum(ev, "speedup_after")) + ")";
  if (type == "postfuse")
    return when + "post-fusion attempt " + std::to_string(integer(ev, "attempt")) + ": " + str(ev, "status") +
           (optnum(ev, "speedup_compile") ? " " + x(optnum(ev, "speedup_compile")) : "");
  if (type == "run_end") {
    std::string line = when + "run " + str(ev, "status") + ": best " + x(optnum(ev, "best_speedup_compile")) + " vs torch.compile";
    if (!str(ev, "solution_dir").empty()) line += "; solution in " + str(ev, "solution_dir");
    if (!str(ev, "message").empty()) line += "; " + str(ev, "message");
    return line;
  }
  return "";
}

void StatusLine::print_line(const std::string& line) {
  if (mode_ == Mode::kTerminal && drawn_) std::fputs("\r\x1b[K", out_);
  std::fputs(line.c_str(), out_);
  std::fputc('\n', out_);
  drawn_ = false;
}

void StatusLine::redraw() {
  if (mode_ != Mode::kTerminal) return;
  int width = opts_.width;
  if (width <= 0) {
    struct winsize ws {};
    width = ::ioctl(::fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 100;
  }
  std::string line = cut_to(current(), static_cast<size_t>(std::max(10, width - 1)));
  std::fputs(("\r" + line + "\x1b[K").c_str(), out_);
  std::fflush(out_);
  drawn_ = true;
}

void StatusLine::on_event(const json& ev) {
  std::lock_guard g(mu_);
  if (mode_ == Mode::kQuiet) return;
  if (mode_ == Mode::kEventsJson) {
    std::string line = ev.dump(-1, ' ', false, json::error_handler_t::replace);
    std::fputs(line.c_str(), out_);
    std::fputc('\n', out_);
    std::fflush(out_);
    return;
  }
  update(ev);
  if (std::string line = describe(ev); !line.empty()) print_line(line);
  if (mode_ == Mode::kPlain) std::fflush(out_);
  redraw();
}

void StatusLine::set_evals_in_flight(int n) {
  std::lock_guard g(mu_);
  evals_in_flight_ = n;
  if (mode_ == Mode::kTerminal) redraw();
}

void StatusLine::message(std::string_view line) {
  std::lock_guard g(mu_);
  if (mode_ == Mode::kQuiet || mode_ == Mode::kEventsJson) return;
  print_line(std::string(line));
  if (mode_ == Mode::kPlain) std::fflush(out_);
  redraw();
}

void StatusLine::finish() {
  std::lock_guard g(mu_);
  if (mode_ == Mode::kTerminal && drawn_) {
    std::fputs("\r\x1b[K", out_);
    std::fflush(out_);
    drawn_ = false;
  }
}

}  // namespace mk::report
