#include "eval/batch_file.h"

#include <algorithm>
#include <utility>

#include "eval/sources.h"
#include "util/fs.h"

namespace mk::eval {

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// A bad line, kept with its number so that errors from parsing and from the
// file checks come out in file order.
struct LineError {
  int line;
  std::string message;
};

struct Parsed {
  std::vector<BatchPair> pairs;
  std::vector<LineError> errors;
};

std::string where(const fs::path& file, int line) { return file.string() + ":" + std::to_string(line) + ": "; }

fs::path anchor(const fs::path& dir, const std::string& field) {
  fs::path p(field);
  if (p.is_absolute() || dir.empty()) return p;
  return dir / p;
}

Parsed parse_lines(std::string_view text, const fs::path& file) {
  Parsed out;
  const fs::path dir = file.parent_path();
  int number = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    ++number;
    start = end + 1;
    while (!line.empty() && is_blank(line.back())) line.remove_suffix(1);  // CRLF, trailing blanks
    size_t first = 0;
    while (first < line.size() && is_blank(line[first])) ++first;
    if (first == line.size() || line[first] == '#') continue;

    auto fields = split_batch_fields(line);
    if (!fields || fields->size() != 2) {
      std::string msg = where(file, number) + "expected 'PROBLEM KERNEL', got '" + std::string(line) + "'";
      if (!fields) msg += " (" + fields.error() + ")";
      out.errors.push_back({number, std::move(msg)});
      continue;
    }
    out.pairs.push_back({anchor(dir, (*fields)[0]), anchor(dir, (*fields)[1]), number});
  }
  return out;
}

// Errors from parsing and from the file checks, merged into file order.
BatchContents finish(Parsed parsed) {
  std::stable_sort(parsed.errors.begin(), parsed.errors.end(),
                   [](const LineError& a, const LineError& b) { return a.line < b.line; });
  BatchContents out;
  out.pairs = std::move(parsed.pairs);
  for (auto& e : parsed.errors) out.errors.push_back(std::move(e.message));
  return out;
}

Error no_pairs(const fs::path& file) {
  return Error{file.string() + ": no pairs: expected lines 'PROBLEM KERNEL' (blank lines and '#' comments are skipped)"};
}

}  // namespace

Result<std::vector<std::string>> split_batch_fields(std::string_view line) {
  std::vector<std::string> fields;
  size_t i = 0;
  while (true) {
    while (i < line.size() && is_blank(line[i])) ++i;
    if (i == line.size()) break;
    std::string field;
    if (line[i] == '"') {
      size_t close = line.find('"', i + 1);
      if (close == std::string_view::npos) return Error{"unterminated quote"};
      field = std::string(line.substr(i + 1, close - i - 1));
      i = close + 1;
      if (i < line.size() && !is_blank(line[i])) return Error{"text right after a closing quote"};
      if (field.empty()) return Error{"an empty quoted path"};
    } else {
      size_t stop = i;
      while (stop < line.size() && !is_blank(line[stop])) ++stop;
      field = std::string(line.substr(i, stop - i));
      if (field.find('"') != std::string::npos) return Error{"a quote inside a path: quote the whole path"};
      i = stop;
    }
    fields.push_back(std::move(field));
  }
  return fields;
}

Result<BatchContents> parse_batch(std::string_view text, const fs::path& file) {
  Parsed parsed = parse_lines(text, file);
  if (parsed.errors.empty() && parsed.pairs.empty()) return no_pairs(file);
  return finish(std::move(parsed));
}

Result<BatchContents> read_batch_file(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return Error{file.string() + ": no such file"};
  if (!fs::is_regular_file(file, ec)) return Error{file.string() + ": not a regular file"};
  auto text = read_file(file);
  if (!text) return Error{text.error()};

  Parsed parsed = parse_lines(*text, file);
  if (parsed.errors.empty() && parsed.pairs.empty()) return no_pairs(file);
  // Check the well-formed lines on disk too, so one run names every bad line.
  std::vector<BatchPair> good;
  for (auto& pair : parsed.pairs) {
    size_t before = parsed.errors.size();
    auto bad = [&](const fs::path& p, const char* what) {
      parsed.errors.push_back({pair.line, where(file, pair.line) + p.string() + ": " + what});
    };
    if (!fs::exists(pair.problem, ec))
      bad(pair.problem, "no such file");
    else if (!fs::is_regular_file(pair.problem, ec))
      bad(pair.problem, "not a regular file");

    if (!fs::exists(pair.kernel, ec)) {
      bad(pair.kernel, "no such file");
    } else if (auto resolved = resolve_kernel_path(pair.kernel); !resolved) {
      parsed.errors.push_back({pair.line, where(file, pair.line) + resolved.error()});
    } else if (!fs::is_regular_file(*resolved, ec)) {
      bad(*resolved, "not a regular file");
    } else {
      pair.kernel = *resolved;
    }
    if (parsed.errors.size() == before) good.push_back(std::move(pair));
  }
  parsed.pairs = std::move(good);
  return finish(std::move(parsed));
}

}  // namespace mk::eval
