// report.md: the document (document.h) drawn as markdown. Figures and key-figure
// tiles are HTML's alone; report.md states those facts in its list instead.
#include <variant>

#include "report/document.h"

namespace mk::report::doc {

namespace {

// A table cell or list item stays one line, and its | no column break.
std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

std::string text(const Text& t) {
  std::string out;
  for (const Span& s : t) {
    if (s.only == Only::kHtml) continue;
    const std::string x = s.escape == Span::Escape::kHtmlAndMarkdown ? md_cell(s.text) : s.text;
    switch (s.style) {
      case Span::Style::kStrong: out += "**" + x + "**"; break;
      case Span::Style::kCode: out += "`" + x + "`"; break;
      case Span::Style::kItalic: out += "*" + x + "*"; break;
      default: out += x;  // the other styles are HTML's alone
    }
  }
  return out;
}

// A blank cell is "| |"; any other, even one whose text is empty, "| text |".
std::string row(const std::vector<Text>& cells) {
  std::string out = "|";
  for (const Text& c : cells) out += c.empty() ? " |" : " " + text(c) + " |";
  return out + "\n";
}

std::string table(const Table& t) {
  std::vector<Text> heads;
  for (const auto& c : t.columns) heads.push_back(c.head);
  std::string out = row(heads) + "|";
  for (size_t i = 0; i < t.columns.size(); ++i) out += t.centered && i > 0 ? ":---:|" : "---|";
  out += "\n";
  for (const auto& r : t.rows) out += row(r.cells);
  return out + "\n";
}

std::string banner(const Banner& b) {
  return "> **" + std::string(b.kind == Banner::Kind::kWarning ? "WARNING: " : "") + b.head +
         (b.detail.empty() ? "" : " " + b.detail) + "**\n\n";
}

std::string block(const Block& b) {
  if (b.only == Only::kHtml) return "";
  struct Draw {
    std::string operator()(const Paragraph& p) const { return text(p.text) + (p.blank_after ? "\n\n" : "\n"); }
    std::string operator()(const List& l) const {
      std::string out;
      for (const Text& item : l.items) out += "- " + text(item) + "\n";
      return out + "\n";
    }
    std::string operator()(const Table& t) const { return table(t); }
    std::string operator()(const Banner& b) const { return banner(b); }
    std::string operator()(const Figure&) const { return ""; }
    std::string operator()(const KeyFigures&) const { return ""; }
  };
  return std::visit(Draw{}, b.body);
}

}  // namespace

std::string markdown(const Document& d) {
  std::string out = "# " + d.title + "\n\n";
  for (const Block& b : d.preface) out += block(b);
  for (const Section& s : d.sections) {
    if (s.only == Only::kHtml) continue;
    out += "## " + text(s.heading) + "\n\n";
    for (const Block& b : s.blocks) out += block(b);
  }
  return out;
}

}  // namespace mk::report::doc
