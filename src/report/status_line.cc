#include "report/status_line.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "util/json_fields.h"
#include "report/report_data.h"
#include "report/svg.h"
#include "records/events.h"
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

void StatusLine::update(const records::Event& ev) {
  std::visit(
      records::Visit{
          [&](const records::RunStart& rs) {
            if (!rs.method.empty()) method_ = rs.method;
            problem_ = rs.problem;
            if (auto T = optnum(rs.settings, "T")) T_ = static_cast<int>(*T);
            if (!opts_.max_calls)
              if (auto v = optnum(rs.settings, "max_calls")) opts_.max_calls = static_cast<int64_t>(*v);
            if (!opts_.max_tokens)
              if (auto v = optnum(rs.settings, "token_budget")) opts_.max_tokens = static_cast<int64_t>(*v);
            phase_.clear();
          },
          [&](const records::LlmCall& c) {
            llm_.add(c);
          },
          [&](const records::Eval&) { ++evals_done_; },
          [&](const records::EvalStart&) { ++evals_in_flight_; },  // live progress, not logged
          [&](const records::EvalDone&) { evals_in_flight_ = std::max(0, evals_in_flight_ - 1); },
          [&](const records::TopologyChange& tp) {
            t_ = tp.iteration;
            ok_ = failed_ = fresh_ = 0;
            for (const auto& s : tp.subproblems)
              (s.status == "correct" ? ok_ : s.status == "failing" ? failed_ : fresh_)++;
          },
          [&](const records::Iteration& it) {
            t_ = it.t;
            ok_ = failed_ = fresh_ = 0;
            for (const auto& s : it.subkernels) (s.correct ? ok_ : failed_)++;
          },
          [&](const records::Best& b) { best_.add(b); },
          [&](const records::Postfuse&) { phase_ = "post-fusion"; },
          [&](const records::Swap& sw) {
            best_.add(sw);
            phase_ = "swap";
          },
          [&](const records::RunEnd& end) {
            best_.add(end);
            phase_ = end.status;
          },
          [](const auto&) {}},
      ev);
}

std::string StatusLine::current() const {
  std::string s = method_;
  s += " \u00b7 t " + std::to_string(t_) + (T_ > 0 ? "/" + std::to_string(T_) : "");
  s += " \u00b7 subproblems " + std::to_string(ok_) + "\u2713 " + std::to_string(failed_) + "\u2717";
  if (fresh_) s += " " + std::to_string(fresh_) + " new";
  s += " \u00b7 best " + x(best_.speedup_compile);
  // The budget counts kernel calls only (decompose, split, fuse, judge are extra).
  s += " \u00b7 LLM " + std::to_string(llm_.calls) + " calls" +
       (opts_.max_calls ? " (kernel " + std::to_string(llm_.kernel_calls) + "/" + std::to_string(*opts_.max_calls) + ")" : "") +
       ", " + human_count(static_cast<double>(llm_.total())) +
       (opts_.max_tokens ? "/" + human_count(static_cast<double>(*opts_.max_tokens)) : "") + " tokens";
  s += " \u00b7 " + std::to_string(evals_in_flight_) + " eval" + (evals_in_flight_ == 1 ? "" : "s") + " running";
  if (!phase_.empty()) s += " \u00b7 " + phase_;
  s += " \u00b7 " + human_duration(std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  return s;
}

std::string StatusLine::describe(const records::Event& ev) const {
  const records::Meta* meta = records::meta_of(ev);
  const std::string ts = meta ? meta->ts : "";
  std::string when = ts.size() >= 19 ? ts.substr(11, 8) + " " : "";
  return std::visit(
      records::Visit{
          [&](const records::RunStart& rs) {
            std::string line = when + "start: " + rs.method + " on " + rs.problem;
            if (rs.settings.is_object() && !rs.settings.empty()) line += " " + rs.settings.dump();
            return line;
          },
          [&](const records::Resume& r) {
            return when + "resumed a run with " + std::to_string(r.events_before) + " events";
          },
          // A failed call is said once, from its durable record (the live llm_done
          // progress event only says a call ended).
          [&](const records::LlmCall& c) {
            if (c.ok) return std::string();
            return when + "LLM call failed (" + c.agent + ", " + c.task + "): " + c.error;
          },
          [&](const records::TopologyChange& tp) {
            int ok = 0, bad = 0, fresh = 0;
            for (const auto& s : tp.subproblems) (s.status == "correct" ? ok : s.status == "failing" ? bad : fresh)++;
            std::string line = when + "t=" + std::to_string(tp.iteration) + " structure " +
                               (tp.change.empty() ? "?" : tp.change) + ": " + std::to_string(tp.subproblems.size()) +
                               " subproblems (" + std::to_string(ok) + "\u2713 " + std::to_string(bad) + "\u2717" +
                               (fresh ? " " + std::to_string(fresh) + " new" : "") + ")";
            if (!tp.detail.empty()) line += "; " + tp.detail;
            return line;
          },
          [&](const records::Iteration& it) {
            std::string line = when + "t=" + std::to_string(it.t) + (T_ > 0 ? "/" + std::to_string(T_) : "") +
                               " done: end-to-end ";
            const std::string& st = it.e2e.status;
            line += st.empty() ? "not evaluated" : st;
            if (st == "correct") line += " " + x(it.e2e.speedup_compile) + " vs torch.compile";
            int ok = 0, bad = 0;
            for (const auto& s : it.subkernels) (s.correct ? ok : bad)++;
            line += "; subkernels " + std::to_string(ok) + "\u2713 " + std::to_string(bad) + "\u2717";
            // The counts of the llm_call records seen so far (a resume feeds the
            // status line the records its log already holds), as report.md counts them.
            line += "; " + std::to_string(llm_.calls) + " LLM calls, " + human_count(static_cast<double>(llm_.total())) +
                    " tokens so far";
            return line;
          },
          [&](const records::Best& b) {
            if (!b.correct) return std::string();  // older logs held placeholders for iterations without a solution
            // A correct solution whose torch.compile baseline is unknown (a torch
            // without it, or a compile past its deadline) has speedup 0: say so.
            if (!b.speedup_compile || *b.speedup_compile <= 0)
              return when + "new best at t=" + std::to_string(b.t) +
                     ": correct end to end; its speedup vs torch.compile is unknown (no torch.compile baseline)";
            return when + "new best: " + x(b.speedup_compile) + " vs torch.compile at t=" + std::to_string(b.t);
          },
          [&](const records::Swap& sw) {
            return when + "swapped " + sw.name + ": " + sw.from + " -> " + sw.to + " (end-to-end " +
                   x(sw.speedup_before) + " -> " + x(sw.speedup_after) + ")";
          },
          [&](const records::Postfuse& pf) {
            return when + "post-fusion attempt " + std::to_string(pf.attempt) + ": " + pf.status +
                   (pf.speedup_compile ? " " + x(pf.speedup_compile) : "");
          },
          [&](const records::RunEnd& end) {
            std::string line =
                when + "run " + end.status + ": best " + x(end.best_speedup_compile) + " vs torch.compile";
            if (!end.solution_dir.empty()) line += "; solution in " + end.solution_dir;
            if (!end.message.empty()) line += "; " + end.message;
            return line;
          },
          [](const auto&) { return std::string(); }},
      ev);
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

void StatusLine::on_event(const records::Event& ev, bool replayed) {
  std::lock_guard g(mu_);
  if (mode_ == Mode::kQuiet) return;
  if (mode_ == Mode::kEventsJson) {
    if (replayed) return;  // already in the log, printed by the process that logged it
    std::string line = records::to_json(ev).dump(-1, ' ', false, json::error_handler_t::replace);
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
