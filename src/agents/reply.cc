#include "agents/reply.h"

#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "util/strings.h"

namespace mk::agents {

const char* kKernelFormatHint =
    "Reply with exactly one fenced code block that holds the whole Python file and opens with the line "
    "```python file=kernel.py, and define class ModelNew in it.";
const char* kFilesFormatHint =
    "Give every file as its own fenced code block opened with ```python file=<path>, for example "
    "```python file=decomposed_problem.py and ```python file=subkernel_problems/<name>.py.";

namespace {

std::string strip_quotes(std::string s) {
  while (!s.empty() && (s.front() == '"' || s.front() == '\'' || s.front() == '`')) s.erase(s.begin());
  while (!s.empty() && (s.back() == '"' || s.back() == '\'' || s.back() == '`' || s.back() == ',')) s.pop_back();
  return s;
}

/// Path from a fence's info string: file=, path=, filename=, title=, lang:PATH, or a bare *.py token.
std::string path_from_info(const std::string& info, std::string* lang) {
  static const std::regex kv(R"re((?:file|path|filename|name|title)\s*[=:]\s*("[^"]+"|'[^']+'|\S+))re");
  std::smatch m;
  std::istringstream in(info);
  std::string first;
  in >> first;
  std::string path;
  if (std::regex_search(info, m, kv)) {
    path = strip_quotes(m[1]);
  }
  size_t colon = first.find(':');
  if (path.empty() && colon != std::string::npos && first.size() > colon + 1 &&
      first.find('=') == std::string::npos) {
    *lang = first.substr(0, colon);
    path = first.substr(colon + 1);
  } else if (first.find('=') == std::string::npos) {
    *lang = first;
  }
  if (path.empty()) {
    std::string tok;
    std::istringstream all(info);
    while (all >> tok) {
      tok = strip_quotes(tok);
      if (tok.size() > 3 && tok.substr(tok.size() - 3) == ".py" && tok.find('=') == std::string::npos) {
        path = tok;
        if (*lang == tok) lang->clear();
        break;
      }
    }
  }
  return path;
}

std::string path_from_heading(const std::string& line) {
  if (line.size() > 160) return "";
  static const std::regex tok(R"(([A-Za-z0-9_./-]+\.py)\b)");
  std::smatch m;
  if (std::regex_search(line, m, tok)) return m[1];
  return "";
}

bool defines_modelnew(const std::string& code) {
  static const std::regex re(R"((^|\n)class\s+ModelNew\s*[(:])");
  return std::regex_search(code, re);
}

}  // namespace

std::vector<CodeBlock> extract_code_blocks(const std::string& text) {
  static const std::regex fence_open(R"(^\s{0,3}(`{3,}|~{3,})\s*(.*)$)");
  static const std::regex file_comment(R"(^\s*#\s*(?:file|path|filename)\s*:\s*(\S+\.py)\s*$)", std::regex::icase);
  std::vector<CodeBlock> out;
  auto lines = split_lines(text);
  std::string prev_text_line;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(lines[i], m, fence_open)) {
      if (lines[i].find_first_not_of(" \t") != std::string::npos) prev_text_line = lines[i];
      continue;
    }
    std::string fence = m[1];
    CodeBlock b;
    b.path = path_from_info(m[2], &b.lang);
    b.closed = false;
    std::string code;
    size_t j = i + 1;
    for (; j < lines.size(); ++j) {
      const std::string& l = lines[j];
      size_t lead = l.find_first_not_of(' ');
      if (lead != std::string::npos && lead <= 3 && l.compare(lead, fence.size(), fence) == 0 &&
          l.find_first_not_of(std::string(1, fence[0]) + " \t", lead) == std::string::npos) {
        b.closed = true;
        break;
      }
      code += l + "\n";
    }
    // A `# file: x.py` first line names the block when the fence did not.
    size_t nl = code.find('\n');
    std::smatch fm;
    std::string first = code.substr(0, nl);
    if (std::regex_match(first, fm, file_comment)) {
      if (b.path.empty()) b.path = fm[1];
      code = nl == std::string::npos ? "" : code.substr(nl + 1);
    }
    if (b.path.empty()) b.path = path_from_heading(prev_text_line);
    b.code = std::move(code);
    out.push_back(std::move(b));
    prev_text_line.clear();
    i = j;
  }
  return out;
}

Result<std::string> parse_kernel_reply(const std::string& text) {
  auto blocks = extract_code_blocks(text);
  if (blocks.empty())
    return Error{"the reply contains no fenced code block (a block starts with ```python file=kernel.py and "
                 "ends with ```)"};
  const CodeBlock* pick = nullptr;
  bool truncated = false;
  for (const auto& b : blocks) {
    if (!b.closed) {
      truncated = true;
      continue;
    }
    if (!defines_modelnew(b.code)) continue;
    // Prefer a block explicitly named kernel.py; otherwise the last one wins
    // (models often restate a corrected version at the end).
    if (!pick || b.path == "kernel.py" || pick->path != "kernel.py") pick = &b;
  }
  if (pick) return pick->code;
  if (truncated)
    return Error{"the reply ended inside a code block, so the file is incomplete (probably cut off by the "
                 "length limit); send the complete file again, more compactly"};
  return Error{"no code block defines `class ModelNew(nn.Module)`; the file must define ModelNew"};
}

Result<std::map<std::string, std::string>> parse_files_reply(const std::string& text) {
  auto blocks = extract_code_blocks(text);
  std::map<std::string, std::string> files;
  std::vector<const CodeBlock*> unnamed;
  for (const auto& b : blocks) {
    if (!b.closed)
      return Error{fmt::format("the reply ended inside the code block{} (probably cut off by the length limit); "
                               "send all files again, complete",
                               b.path.empty() ? "" : " for " + b.path)};
    if (b.path.empty()) {
      if (b.lang.empty() || b.lang == "python" || b.lang == "py") unnamed.push_back(&b);
      continue;
    }
    files[b.path] = b.code;
  }
  for (const CodeBlock* b : unnamed) {
    if (defines_modelnew(b->code) && !files.count("decomposed_problem.py")) {
      files["decomposed_problem.py"] = b->code;
      continue;
    }
    return Error{"a code block has no file path; open every block with ```python file=<path>, e.g. "
                 "```python file=subkernel_problems/linear_gelu.py"};
  }
  if (files.empty())
    return Error{"the reply contains no file; give each file as a fenced block opened with "
                 "```python file=<path>"};
  return files;
}

bool is_no_change_reply(const std::string& text) {
  return text.find("NO_CHANGE") != std::string::npos && extract_code_blocks(text).empty();
}

Result<JudgeVerdict> parse_verdict(const std::string& text) {
  static const std::regex v(R"(VERDICT\s*[:=]\s*\**\s*(PASS|CHEAT|CHEATING)\b)", std::regex::icase);
  static const std::regex r(R"(REASON\s*[:=]\s*(.*))", std::regex::icase);
  std::smatch m;
  if (!std::regex_search(text, m, v))
    return Error{"the reply has no `VERDICT: PASS` or `VERDICT: CHEAT` line"};
  JudgeVerdict out;
  std::string word = m[1];
  for (auto& c : word) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  out.cheating = word != "PASS";
  std::smatch rm;
  if (std::regex_search(text, rm, r)) out.reason = rm[1];
  if (out.reason.size() > 400) out.reason = out.reason.substr(0, 400) + "...";
  return out;
}

}  // namespace mk::agents
