// How every command's --help looks: options in named groups, everything
// wrapped at 80 columns, plain type names (no parser notation such as
// "FLOAT:FLOAT in [1e-09 - 1]"), defaults said in words, and a footer with
// examples and the command's exit statuses (help_footer).
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace mk::cli {

inline constexpr size_t kHelpWidth = 80;

/// Words of `text` filled into lines of at most `width` columns: the first
/// starts with `first`, the rest with `indent`. Newlines in text are kept; a
/// word longer than a line stands alone (and is the only thing past width).
inline std::string wrap_text(const std::string& text, size_t width, const std::string& first = "",
                             const std::string& indent = "") {
  std::string out, line = first;
  bool line_has_word = false;
  auto flush = [&] {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
    line = indent;
    line_has_word = false;
  };
  std::string word;
  auto put = [&] {
    if (word.empty()) return;
    if (line_has_word && line.size() + 1 + word.size() > width) flush();
    if (line_has_word) line += ' ';
    line += word;
    line_has_word = true;
    word.clear();
  };
  for (char c : text) {
    if (c == ' ') {
      put();
    } else if (c == '\n') {
      put();
      flush();
    } else {
      word += c;
    }
  }
  put();
  if (line_has_word || out.empty()) flush();
  return out;
}

/// The footer of a command's help: a few example command lines, then every
/// exit status the command can return with what it means.
inline std::string help_footer(const std::vector<std::string>& examples,
                               const std::vector<std::pair<int, std::string>>& exits) {
  std::string out = "Examples:\n";
  for (const auto& e : examples) out += wrap_text(e, kHelpWidth, "  ", "      ");
  out += "\nExit status:\n";
  for (const auto& [code, what] : exits) {
    std::string head = "  " + std::to_string(code);
    head.resize(7, ' ');
    out += wrap_text(what, kHelpWidth, head, "       ");
  }
  return out;
}

class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter() { column_width(30); }

  std::string make_description(const CLI::App* app) const override {
    std::string d = app->get_description();
    return d.empty() ? std::string() : wrap_text(d, kHelpWidth) + "\n";
  }

  std::string make_usage(const CLI::App* app, std::string name) const override {
    std::string u = CLI::Formatter::make_usage(app, std::move(name));
    while (!u.empty() && u.back() == '\n') u.pop_back();
    return wrap_text(u, kHelpWidth, "", "         ");
  }

  std::string make_group(std::string group, bool is_positional, std::vector<const CLI::Option*> opts) const override {
    std::string out = "\n" + group + ":\n";
    for (const CLI::Option* o : opts) out += make_option(o, is_positional);
    return out;
  }

  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override {
    if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
    return make_description(app) + make_usage(app, std::move(name)) + make_positionals(app) + option_groups(app) +
           make_subcommands(app, mode) + "\n" + make_footer(app);
  }

  std::string option_groups(const CLI::App* app) const {
    // CLI11 puts a blank line after every group but the last; make_group
    // already starts each with one.
    std::string out;
    std::vector<std::string> groups = app->get_groups();
    // The help flag's group ("Other") last, though CLI11 made it first.
    if (auto it = std::find(groups.begin(), groups.end(), "Other"); it != groups.end()) {
      groups.erase(it);
      groups.push_back("Other");
    }
    for (const std::string& group : groups) {
      auto opts = app->get_options([&](const CLI::Option* o) { return o->get_group() == group && o->nonpositional(); });
      if (!group.empty() && !opts.empty()) out += make_group(group, false, opts);
    }
    return out;
  }

  std::string make_option(const CLI::Option* opt, bool is_positional) const override {
    std::string left = "  " + make_option_name(opt, is_positional) + make_option_opts(opt);
    std::string desc = make_option_desc(opt);
    const std::string indent(get_column_width(), ' ');
    if (left.size() + 1 >= get_column_width()) return left + "\n" + wrap_text(desc, kHelpWidth, indent, indent);
    left.resize(get_column_width(), ' ');
    return wrap_text(desc, kHelpWidth, left, indent);
  }

  /// The value's name as a person writes it: the option's own type_name when
  /// it is plain (FILE, DIR, SPEC, N/M), else INT, NUMBER or TEXT, or the
  /// choices (device|synced); never a validator's range notation.
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string t = opt->get_type_name();
    if (opt->get_type_size() == 0 || t.empty()) return {};  // a flag
    std::string shown;
    if (auto b = t.find('{'); b != std::string::npos) {
      auto e = t.find('}', b);
      shown = t.substr(b + 1, e == std::string::npos ? std::string::npos : e - b - 1);
      for (auto& c : shown)
        if (c == ',') c = '|';
    } else if (auto c = t.find(':'); c != std::string::npos && t.find(' ', c) == std::string::npos &&
               t.find('|', c) != std::string::npos) {
      shown = t.substr(c + 1);  // a validator that names the choices: default|calibrated|FILE
    } else {
      shown = t.substr(0, c);
      if (shown == "FLOAT") shown = "NUMBER";
    }
    return " " + shown;
  }

  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string d = opt->get_description();
    const std::string def = opt->get_default_str();
    // (Not for an optional value such as --swap [TAU]: its default_str is the
    // value it takes when given alone.)
    if (!def.empty() && d.find("default") == std::string::npos && opt->get_type_size() != 0 &&
        opt->get_expected_min() > 0)
      d += " (default: " + def + ")";
    return d;
  }

  std::string make_footer(const CLI::App* app) const override {
    std::string f = app->get_footer();
    return f.empty() ? std::string() : f + (f.back() == '\n' ? "" : "\n");
  }
};

/// Options added while one lives go into the help group `name` (CLI11's
/// option_defaults), e.g. { OptionGroup g(app, "LLM"); app.add_option(...); }.
class OptionGroup {
 public:
  OptionGroup(CLI::App& app, const std::string& name) : app_(app), saved_(app.option_defaults()->get_group()) {
    app_.option_defaults()->group(name);
  }
  ~OptionGroup() { app_.option_defaults()->group(saved_); }
  OptionGroup(const OptionGroup&) = delete;
  OptionGroup& operator=(const OptionGroup&) = delete;

 private:
  CLI::App& app_;
  std::string saved_;
};

/// Gives app the HelpFormatter, its help flag in the group "Other", and
/// nothing else (idempotent).
inline void use_help_formatter(CLI::App& app) {
  if (std::dynamic_pointer_cast<HelpFormatter>(app.get_formatter())) return;
  app.formatter(std::make_shared<HelpFormatter>());
  if (CLI::Option* h = app.get_help_ptr()) {
    h->description("print this help");
    h->group("Other");
  }
}

}  // namespace mk::cli
