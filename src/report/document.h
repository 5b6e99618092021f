// A report as a document: a title, the blocks before the first section (the
// key facts, banners) and the sections, each a heading and blocks. What a
// run's report says is built once from its ReportData (sections.h); two
// renderers draw it, markdown.cc (report.md) and html.cc (report.html, with
// its CSS). Where the two reports differ (HTML's key-figure tiles and charts,
// markdown's list of facts and time table, a word here and there), the block
// or the piece of text says which renderer draws it.
#pragma once

#include <string>
#include <variant>
#include <vector>

namespace mk::report::doc {

/// Which renderers draw a block, a section or a piece of text.
enum class Only : char { kBoth, kMarkdown, kHtml };

/// A piece of text in one style.
struct Span {
  enum class Style : char {
    kPlain,
    kStrong,        ///< markdown **text**, HTML <b>
    kStrongInHtml,  ///< HTML <b>; markdown plain
    kCode,          ///< markdown `text`, HTML <code>
    kCodeInHtml,    ///< HTML <code>; markdown plain
    kItalic,        ///< markdown *text*, HTML <i>
    kPill,          ///< HTML a pill (<span class="pill KIND">); markdown plain
    kSmall,         ///< HTML <span class="small">; markdown plain
    kNote,          ///< HTML a small note under a table cell's text; markdown plain
  };
  /// How a renderer escapes the text. The report's own words go out as they
  /// are (none holds &, < or >; report.html has always kept their
  /// apostrophes); text from the run is escaped for HTML and, where report.md
  /// has always done so, kept to one line with its | escaped.
  enum class Escape : char {
    kNone,
    kHtml,             ///< HTML escapes it; markdown writes it as it is
    kHtmlAndMarkdown,  ///< HTML escapes it; markdown keeps it to one line and escapes |
  };
  std::string text{};
  Style style = Style::kPlain;
  Escape escape = Escape::kNone;
  Only only = Only::kBoth;
  std::string pill{};  ///< kPill: ok, no, new, torch or reused
};
/// Text is spans in order; a table cell without any span is blank.
using Text = std::vector<Span>;

/// The report's own words.
inline Span words(std::string s) { return {std::move(s)}; }
/// Text from the run (a status, a message, a number).
inline Span value(std::string s) { return {std::move(s), Span::Style::kPlain, Span::Escape::kHtml}; }
/// Text from the run that report.md keeps to one line (a name in a table, a list item).
inline Span one_line(std::string s) { return {std::move(s), Span::Style::kPlain, Span::Escape::kHtmlAndMarkdown}; }
inline Span styled(Span s, Span::Style style) {
  s.style = style;
  return s;
}
inline Span pill(Span s, std::string kind) {
  s.style = Span::Style::kPill;
  s.pill = std::move(kind);
  return s;
}
inline Span md_only(Span s) {
  s.only = Only::kMarkdown;
  return s;
}
inline Span html_only(Span s) {
  s.only = Only::kHtml;
  return s;
}
/// The same place in both reports, worded differently.
inline Text either(std::string markdown, std::string html) {
  return {md_only(words(std::move(markdown))), html_only(words(std::move(html)))};
}

struct Paragraph {
  enum class Kind : char {
    kPlain,
    kLead,       ///< a section's introduction (HTML sets it in grey)
    kKeyFigure,  ///< a key figure told in a sentence (HTML sets it large)
  };
  Text text{};
  Kind kind = Kind::kPlain;
  bool blank_after = true;  ///< markdown: a blank line after it (report.md's last line has none)
};

/// A bulleted list.
struct List {
  std::vector<Text> items{};
};

struct Table {
  struct Column {
    Text head{};
    bool paths = false;  ///< holds paths: HTML lets them wrap anywhere
  };
  struct Row {
    std::vector<Text> cells{};
    bool total = false;  ///< a total row (HTML sets it apart)
  };
  std::vector<Column> columns{};
  std::vector<Row> rows{};
  bool centered = false;  ///< markdown: every column after the first centred
};

/// A chart, as SVG. Markdown has no pictures: only HTML draws one.
struct Figure {
  std::string svg{};
};

/// The tiles at the top of report.html: a label, a large value and a note
/// under it. Only HTML draws them; report.md says the same in its list of facts.
struct KeyFigures {
  enum class Tone : char { kPlain, kGood, kBad, kWarn };
  struct Tile {
    std::string label{}, value{}, note{};
    Tone tone = Tone::kPlain;
  };
  std::vector<Tile> tiles{};
};

/// A line that must not be missed, above the sections.
struct Banner {
  enum class Kind : char {
    kAlert,    ///< red, as it is
    kWarning,  ///< yellow; markdown "WARNING: ", HTML a warning sign
    kFailure,  ///< red; HTML a cross
  };
  Kind kind = Kind::kAlert;
  std::string head{};    ///< from the run: escaped in HTML
  std::string detail{};  ///< after the head (HTML: smaller, on its own line); may be ""
};

struct Block {
  std::variant<Paragraph, List, Table, Figure, KeyFigures, Banner> body{};
  Only only = Only::kBoth;
};
inline Block md_only(Block b) {
  b.only = Only::kMarkdown;
  return b;
}
inline Block html_only(Block b) {
  b.only = Only::kHtml;
  return b;
}

struct Section {
  Text heading{};
  std::vector<Block> blocks{};
  Only only = Only::kBoth;
  bool footer = false;  ///< the closing section (HTML sets it as a footer)
};

struct Document {
  std::string title{};  ///< from the run: escaped in HTML
  /// HTML only, a line under the title; report.md gives the same facts in its list.
  Text subtitle{};
  std::vector<Block> preface{};  ///< before the first section
  std::vector<Section> sections{};
};

/// report.md.
std::string markdown(const Document& d);
/// report.html: one self-contained page (inline CSS and SVG, no scripts).
std::string html(const Document& d);

}  // namespace mk::report::doc
