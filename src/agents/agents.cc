#include "agents/agents.h"

#include "eval/roofline.h"

#include <chrono>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

namespace mk::agents {

Conversation Conversation::from(const RenderedPrompt& p) {
  Conversation c;
  c.system = p.system;
  c.messages.push_back({"user", p.user});
  return c;
}

Conversation Conversation::followed_by(const std::string& assistant, const std::string& user) const {
  Conversation c = *this;
  c.messages.push_back({"assistant", assistant});
  c.messages.push_back({"user", user});
  return c;
}

void Gate::acquire() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return free_ > 0; });
  --free_;
}

void Gate::release() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++free_;
  }
  cv_.notify_one();
}

nlohmann::json CallRecord::to_json() const {
  nlohmann::json j = {{"agent", agent},
                      {"task", task},
                      {"sample", sample},
                      {"ok", ok},
                      {"tokens",
                       {{"input", usage.input},
                        {"output", usage.output},
                        {"cache_read", usage.cache_read},
                        {"cache_write", usage.cache_write},
                        {"estimated", usage.estimated}}},
                      {"from_cache", from_cache},
                      {"truncated", truncated}};
  if (!model.empty()) j["model"] = model;
  if (!ok) j["error"] = error;
  return j;
}

Exchange call_llm(llm::Provider& llm, const Conversation& conv, const std::string& agent, const std::string& task,
                  int sample, Gate* gate, int max_tokens, const std::string& reasoning_effort) {
  llm::Request req;
  req.system = conv.system;
  req.messages = conv.messages;
  req.agent = agent;
  req.task = task;
  req.sample = sample;
  req.max_tokens = max_tokens;
  req.reasoning_effort = reasoning_effort;
  req.cache_prefix_messages = conv.messages.size() > 1 ? 1 : 0;
  Exchange ex;
  ex.call.agent = agent;
  ex.call.task = task;
  ex.call.sample = sample;
  if (gate) gate->acquire();
  const auto t0 = std::chrono::steady_clock::now();
  llm::Reply reply;
  try {
    reply = llm.complete(req);
  } catch (const std::exception& e) {
    llm::LlmError err;
    err.kind = llm::LlmError::Kind::kMalformed;  // our fault, not the endpoint's
    err.message = std::string("provider threw: ") + e.what();
    reply = llm::Reply::Err(std::move(err));
  }
  ex.call.latency_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (gate) gate->release();
  if (reply.ok()) {
    const auto& c = *reply.completion;
    ex.reply = c.text;
    ex.call.ok = true;
    ex.call.usage = c.usage;
    ex.call.from_cache = c.from_cache;
    ex.call.truncated = c.truncated;
    ex.call.model = c.model;
  } else {
    const auto& e = *reply.error;
    ex.call.ok = false;
    ex.call.error = e.message.empty() ? "LLM call failed" : e.message;
    ex.call.usage = e.billed;  // what the endpoint billed for the failed answer (an empty reply, say)
    using K = llm::LlmError::Kind;
    // An endpoint that refuses the key, does not know the model, or cannot be
    // reached at all (refused, no such host, TLS: final, never retried) stops
    // the run: a network failure is not a verdict on the method.
    ex.call.fatal = e.kind == K::kAuth || e.kind == K::kConfig || e.kind == K::kUnmatchedReplay ||
                    e.kind == K::kNotFound || (e.kind == K::kNetwork && !e.retryable);
    ex.call.cancelled = e.kind == K::kCancelled;
  }
  return ex;
}

std::string trim_text(const std::string& s, size_t head, size_t tail, size_t max_chars) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  std::string l;
  while (std::getline(in, l)) lines.push_back(l);
  std::string out;
  if (lines.size() <= head + tail) {
    out = s;
  } else {
    for (size_t i = 0; i < head; ++i) out += lines[i] + "\n";
    out += fmt::format("[... {} lines omitted ...]\n", lines.size() - head - tail);
    for (size_t i = lines.size() - tail; i < lines.size(); ++i) out += lines[i] + "\n";
  }
  if (out.size() > max_chars) {
    size_t keep = max_chars / 2;
    out = out.substr(0, keep) + "\n[... omitted ...]\n" + out.substr(out.size() - keep);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string eval_feedback(const eval::Verdict& r) {
  std::string out = fmt::format("Status: {}", eval::to_string(r.status));
  if (!r.kind.empty()) out += fmt::format(" ({})", r.kind);
  out += "\n";
  if (!r.reasons.empty()) {
    out += "Reasons:\n";
    for (size_t i = 0; i < r.reasons.size() && i < 6; ++i) out += "- " + trim_text(r.reasons[i], 3, 0, 300) + "\n";
    if (r.reasons.size() > 6) out += fmt::format("- ... and {} more\n", r.reasons.size() - 6);
  }
  if (!r.feedback.empty()) out += "Details:\n" + trim_text(r.feedback, 20, 30, 4000) + "\n";
  if (r.status == eval::VerdictStatus::kIncorrect && r.max_abs_err.value_or(0) > 0) {
    // The tolerances the evaluator applied, as it reports them (--atol/--rtol).
    const auto c = r.worker_checks().correctness;
    if (c && c->atol && c->rtol)
      out += fmt::format("Largest absolute error: {:.3g} (allowed: |diff| <= atol + rtol * |expected|, atol = {:.3g}, "
                         "rtol = {:.3g})\n",
                         *r.max_abs_err, *c->atol, *c->rtol);
    else
      out += fmt::format("Largest absolute error: {:.3g}\n", *r.max_abs_err);
  }
  auto speed = [&](const char* what, const eval::Timing& base, double s) {
    if (!base.valid) return std::string();
    return fmt::format("; {} {:.4g} ms, speedup {:.3f}x", what, base.median_ms, s);
  };
  if (r.correct() && r.runtime.valid) {
    out += fmt::format("Runtime: {:.4g} ms (median){}{}\n", r.runtime.median_ms,
                       speed("torch.compile", r.compiled, r.speedup_compile), speed("eager", r.eager, r.speedup_eager));
    if (r.speedup_compile > 0)
      out += fmt::format("It runs at {:.3f}x the speed of torch.compile{}.\n", r.speedup_compile,
                         r.speedup_compile < 1 ? " (slower: there is room to improve)" : "");
  }
  return out;
}

std::string hardware_text(const nlohmann::json& info_in) {
  nlohmann::json info = info_in;
  if (info.is_object() && info.contains("gpus") && info["gpus"].is_array() && !info["gpus"].empty()) {
    nlohmann::json g = info["gpus"][0];
    for (auto it = info.begin(); it != info.end(); ++it)
      if (it.key() != "gpus" && !g.contains(it.key())) g[it.key()] = it.value();
    info = g;
  }
  if (!info.is_object() || info.empty() || !info.contains("name"))
    return "The evaluator did not report the GPU; assume a recent NVIDIA data-centre GPU and autotune.";
  std::string out = fmt::format("- GPU: {}", info.value("name", std::string("unknown")));
  if (info.contains("capability") && info["capability"].is_array() && info["capability"].size() == 2)
    out += fmt::format(" (compute capability {}.{})", info["capability"][0].get<int>(), info["capability"][1].get<int>());
  out += "\n";
  auto num = [&](const char* k) -> double {
    return info.contains(k) && info[k].is_number() ? info[k].get<double>() : -1;
  };
  if (num("sm_count") > 0) out += fmt::format("- Streaming multiprocessors: {}\n", static_cast<int>(num("sm_count")));
  if (num("memory_bytes") > 0) out += fmt::format("- Memory: {:.0f} GiB\n", num("memory_bytes") / (1 << 30));
  if (num("l2_bytes") > 0) out += fmt::format("- L2 cache: {:.0f} MiB\n", num("l2_bytes") / (1 << 20));
  if (num("shared_memory_per_block_optin") > 0)
    out += fmt::format("- Shared memory per block (opt-in): {:.0f} KiB\n", num("shared_memory_per_block_optin") / 1024);
  else if (num("shared_memory_per_block") > 0)
    out += fmt::format("- Shared memory per block: {:.0f} KiB\n", num("shared_memory_per_block") / 1024);
  if (num("registers_per_sm") > 0) out += fmt::format("- 32-bit registers per SM: {:.0f}\n", num("registers_per_sm"));
  if (num("warp_size") > 0) out += fmt::format("- Warp size: {:.0f}\n", num("warp_size"));
  if (num("max_threads_per_block") > 0)
    out += fmt::format("- Max threads per block: {:.0f} (num_warps <= {:.0f})\n", num("max_threads_per_block"),
                       num("max_threads_per_block") / 32);
  for (const char* k : {"torch", "triton", "cuda"})
    if (info.contains(k) && info[k].is_string()) out += fmt::format("- {}: {}\n", k, info[k].get<std::string>());
  out += "- Precision: the reference's own dtypes (see its get_inputs() and parameters); each output must have the "
         "reference's dtype. TF32 is off for the reference, for torch.compile and for your kernel's process "
         "(Triton's float32 tl.dot default is set to IEEE); still write tl.dot(a, b, input_precision=\"ieee\") "
         "on float32 operands, which means the same on every Triton: TF32 results usually miss float32's "
         "tolerance. With bf16, fp16 or fp8 data, accumulate in float32 and round once on store.";
  return out;
}

namespace {

Result<Conversation> render(const Prompts& p, const std::string& name, const Vars& vars) {
  auto r = p.render(name, vars);
  if (!r) return Error{r.error()};
  return Conversation::from(*r);
}

std::string files_listing(const problem::Topology& topo) {
  std::string out;
  for (const auto& sp : topo.subproblems)
    out += fmt::format("### subkernel_problems/{}.py\n\n```python\n{}\n```\n\n", sp.name, sp.source);
  return out;
}

}  // namespace

Result<Conversation> decompose_prompt(const Prompts& p, const problem::Problem& problem, const std::string& previous) {
  return render(p, "decompose", {{"problem_source", problem.source}, {"previous", previous}});
}

std::string inputs_text(const nlohmann::json& input_layouts) {
  if (!input_layouts.is_array() || input_layouts.empty()) return "";
  auto dims = [](const nlohmann::json& v) {
    std::string out = "[";
    if (v.is_array())
      for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i].dump();
    return out + "]";
  };
  std::string out =
      "In the composed solution the top level passes some of this module's inputs as views that are not "
      "contiguous, and your kernel is checked with exactly these layouts (strides in elements; trial k uses "
      "call k mod " + std::to_string(input_layouts.size()) + "):\n";
  for (size_t c = 0; c < input_layouts.size(); ++c) {
    const auto& call = input_layouts[c];
    if (!call.is_array()) continue;
    out += fmt::format("- call {}:", c + 1);
    for (size_t i = 0; i < call.size(); ++i) {
      const auto& in = call[i];
      if (!in.is_object()) continue;
      bool contiguous = in.value("contiguous", false);
      bool broadcast = false;
      if (in.contains("stride") && in["stride"].is_array())
        for (const auto& st : in["stride"]) broadcast |= st.is_number() && st.get<double>() == 0;
      out += fmt::format(" input {}: shape {}, stride {}{}{};", i, dims(in.value("shape", nlohmann::json())),
                         dims(in.value("stride", nlohmann::json())),
                         in.value("offset", 0) ? fmt::format(", storage offset {}", in.value("offset", 0)) : "",
                         contiguous ? " (contiguous)" : broadcast ? " (a broadcast view: stride 0 repeats values)"
                                                                  : " (not contiguous)");
    }
    out += "\n";
  }
  out += "Index every input through its strides (pass x.stride(d) to the kernel and use it in the pointer "
         "arithmetic), or call .contiguous() on it first (that costs a copy). Never assume a flat, contiguous "
         "layout, and never call .view() where the layout may not allow it.";
  return out;
}

std::string shapes_text(const std::string& mode) {
  const std::string variants =
      "other values of the module-level size constants that get_inputs() reads (batch_size, seq_len, dim, ...: "
      "smaller, larger and not powers of two; the constants get_init_inputs() reads, the model's own shape, stay)";
  if (mode == "search")
    return "Your kernel is checked at the shapes get_inputs() makes as written (where it is timed) and also at " +
           variants + ". The shapes are not fixed: read every size from the input tensors, mask the tails of the "
           "last tile, and never hard-code a size. A kernel that holds only at the benchmark's shape is rejected, "
           "and the feedback names the shape it failed at.";
  if (mode == "check")
    return "Your kernel is judged and timed at the shapes get_inputs() makes as written. Users run it at other "
           "sizes too: the solution returned is also checked at " + variants + ", and the report says which shapes "
           "it holds at. Read sizes from the input tensors rather than hard-coding them.";
  if (mode == "benchmark")
    return "The input shapes are fixed: your kernel is checked and timed only at the shapes get_inputs() makes "
           "(and at each entry of get_input_configs(), where the problem lists several).";
  return "";
}

Result<Conversation> generate_prompt(const KernelContext& k, const std::string& problem_source,
                                     const std::string& inputs) {
  return render(*k.prompts, "generate",
                {{"problem_source", problem_source}, {"hardware", k.hardware}, {"inputs", inputs},
                 {"shapes", k.shapes}});
}

Result<Conversation> debug_prompt(const KernelContext& k, const std::string& problem_source, const std::string& kernel,
                                  const eval::Verdict& result, const std::string& inputs) {
  return render(*k.prompts, "debug",
                {{"problem_source", problem_source},
                 {"hardware", k.hardware},
                 {"kernel", kernel},
                 {"feedback", eval_feedback(result)},
                 {"inputs", inputs},
                 {"shapes", k.shapes}});
}

Result<Conversation> optimize_prompt(const KernelContext& k, const std::string& problem_source,
                                     const std::string& kernel, const eval::Verdict& result,
                                     const std::string& inputs) {
  // Where its time goes against the roofline (issue 15); empty on the CPU,
  // without a work record, or without a timed run.
  std::string profile = k.gpu_name.empty() ? std::string() : eval::roofline::prompt_block(result, k.gpu_name);
  return render(*k.prompts, "optimize",
                {{"problem_source", problem_source},
                 {"hardware", k.hardware},
                 {"kernel", kernel},
                 {"feedback", eval_feedback(result)},
                 {"profile", profile},
                 {"inputs", inputs},
                 {"shapes", k.shapes}});
}

Result<Conversation> split_prompt(const Prompts& p, const problem::Problem& problem, const problem::Topology& topo,
                                  const std::map<std::string, std::string>& failing) {
  std::string list;
  for (const auto& [name, why] : failing)
    list += fmt::format("### {}\n\n{}\n\n", name, why.empty() ? "No correct kernel was found." : why);
  return render(p, "split",
                {{"problem_source", problem.source},
                 {"top_level", topo.top_level},
                 {"subproblem_files", files_listing(topo)},
                 {"failing", list}});
}

Result<Conversation> fuse_prompt(const Prompts& p, const problem::Problem& problem, const problem::Topology& topo,
                                 const std::string& status_table) {
  return render(p, "fuse",
                {{"problem_source", problem.source},
                 {"top_level", topo.top_level},
                 {"subproblem_files", files_listing(topo)},
                 {"status_table", status_table}});
}

Result<Conversation> postfuse_prompt(const KernelContext& k, const problem::Problem& problem,
                                     const problem::Topology& topo, const std::map<std::string, std::string>& kernels,
                                     double speedup) {
  std::string files = fmt::format("### decomposed_solution.py (top level)\n\n```python\n{}\n```\n\n", topo.top_level);
  for (const auto& sp : topo.subproblems) {
    auto it = kernels.find(sp.name);
    if (it == kernels.end()) continue;
    files += fmt::format("### subkernel_implementations/{}.py\n\n```python\n{}\n```\n\n", sp.name, it->second);
  }
  return render(*k.prompts, "postfuse",
                {{"problem_source", problem.source},
                 {"hardware", k.hardware},
                 {"solution_files", files},
                 {"speedup", fmt::format("{:.3f}x", speedup)}});
}

Result<Conversation> judge_prompt(const Prompts& p, const std::string& problem_source, const std::string& kernel) {
  return render(p, "judge", {{"problem_source", problem_source}, {"kernel", kernel}});
}

Result<std::string> reask_message(const Prompts& p, const std::string& error, const std::string& format_hint) {
  auto r = p.render("reask", {{"error", error}, {"format", format_hint}});
  if (!r) return Error{r.error()};
  return r->user;
}

namespace {
std::string failure_list(const std::vector<std::string>& failures, const std::string& feedback) {
  std::string out;
  for (size_t i = 0; i < failures.size() && i < 12; ++i) out += "- " + trim_text(failures[i], 6, 4, 800) + "\n";
  if (failures.size() > 12) out += fmt::format("- ... and {} more\n", failures.size() - 12);
  if (!feedback.empty()) out += "\n" + trim_text(feedback, 20, 20, 3000) + "\n";
  if (out.empty()) out = "- verification failed without details\n";
  return out;
}
}  // namespace

Result<std::string> decompose_feedback_message(const Prompts& p, const std::vector<std::string>& failures,
                                               const std::string& feedback) {
  auto r = p.render("decompose_feedback", {{"failures", failure_list(failures, feedback)}});
  if (!r) return Error{r.error()};
  return r->user;
}

Result<std::string> refine_feedback_message(const Prompts& p, const std::vector<std::string>& failures,
                                            const std::string& feedback) {
  auto r = p.render("refine_feedback", {{"failures", failure_list(failures, feedback)}});
  if (!r) return Error{r.error()};
  return r->user;
}

}  // namespace mk::agents
