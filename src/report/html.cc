// report.html: the document (document.h) drawn as one self-contained page,
// with inline CSS and SVG, no scripts and no external references, so that it
// renders anywhere, offline.
#include <variant>

#include "report/document.h"
#include "report/svg.h"

namespace mk::report::doc {

namespace {

using svg::escape;

const char* kCss = R"CSS(
*{box-sizing:border-box}
body{margin:0;background:#f3f4f7;color:#1f2328;font:14px/1.5 -apple-system,"Segoe UI","DejaVu Sans",Helvetica,Arial,sans-serif}
main{max-width:1120px;margin:0 auto;padding:28px 28px 40px}
header h1{font-size:24px;margin:0 0 4px;font-weight:650;letter-spacing:-.2px}
header .sub{color:#57606a;margin:0 0 18px}
code{font:12.5px/1.4 "DejaVu Sans Mono",Menlo,Consolas,monospace;background:#eef0f3;padding:1px 5px;border-radius:4px}
.cards{display:grid;grid-template-columns:repeat(4,1fr);gap:12px;margin-bottom:16px}
.kpi{background:#fff;border:1px solid #e1e4e8;border-radius:10px;padding:14px 16px}
.kpi .label{color:#57606a;font-size:12px;text-transform:uppercase;letter-spacing:.5px}
.kpi .value{font-size:26px;font-weight:650;margin-top:2px}
.kpi .note{color:#6e7781;font-size:12px}
.good{color:#1a7f37}.bad{color:#cf222e}.warn{color:#9a6700}
.banner{border-radius:10px;padding:12px 16px;margin:0 0 14px;font-weight:600;border:1px solid}
.banner.pytorch{background:#fff8c5;border-color:#d4a72c;color:#6b4d00}
.banner.fail{background:#ffebe9;border-color:#ff8182;color:#82071e}
.banner .small{font-weight:400;display:block;margin-top:2px}
section{background:#fff;border:1px solid #e1e4e8;border-radius:10px;padding:18px 20px;margin:0 0 16px}
section h2{font-size:17px;margin:0 0 4px;font-weight:650}
section p.lead{color:#57606a;margin:0 0 12px}
.chart{overflow-x:auto}
svg{max-width:100%;height:auto;display:block}
table{border-collapse:collapse;width:100%;font-size:13px;margin-top:8px}
th,td{padding:6px 10px;border-bottom:1px solid #eaecef;text-align:right;white-space:nowrap}
th{background:#f6f8fa;color:#424a53;font-weight:600}
th:first-child,td:first-child{text-align:left;white-space:normal}
td .note{color:#8c959f;font-size:11.5px}
tr.total td{font-weight:650;border-top:2px solid #d0d7de}
.pill{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600}
.pill.ok{background:#dafbe1;color:#1a7f37}.pill.no{background:#ffebe9;color:#cf222e}.pill.new{background:#eaeef2;color:#57606a}
.pill.torch{background:#fff8c5;color:#7d4e00;margin-left:6px}
.pill.reused{background:#ddf4ff;color:#0550ae;margin-left:6px}
th.path,td.path{white-space:normal;word-break:break-all;text-align:left}
p.saved{font-size:15px;margin:0 0 4px}
p.saved .small{color:#6e7781;font-size:12.5px;font-weight:400}
.changes{margin:10px 0 0;padding-left:18px;color:#424a53}
footer{color:#6e7781;font-size:12.5px}
footer table{font-size:12.5px}
.split2{display:grid;grid-template-columns:1fr;gap:8px}
)CSS";

std::string text(const Text& t) {
  std::string out;
  for (const Span& s : t) {
    if (s.only == Only::kMarkdown) continue;
    const std::string x = s.escape == Span::Escape::kNone ? s.text : escape(s.text);
    switch (s.style) {
      case Span::Style::kPlain: out += x; break;
      case Span::Style::kStrong:
      case Span::Style::kStrongInHtml: out += "<b>" + x + "</b>"; break;
      case Span::Style::kCode:
      case Span::Style::kCodeInHtml: out += "<code>" + x + "</code>"; break;
      case Span::Style::kItalic: out += "<i>" + x + "</i>"; break;
      case Span::Style::kPill: out += "<span class=\"pill " + s.pill + "\">" + x + "</span>"; break;
      case Span::Style::kSmall: out += "<span class=\"small\">" + x + "</span>"; break;
      case Span::Style::kNote: out += "<div class=\"note\">" + x + "</div>"; break;
    }
  }
  return out;
}

std::string cell(const char* tag, const Text& t, bool paths) {
  return std::string("<") + tag + (paths ? " class=\"path\">" : ">") + text(t) + "</" + tag + ">";
}

std::string table(const Table& t) {
  std::string out = "<table><tr>";
  for (const auto& c : t.columns) out += cell("th", c.head, c.paths);
  out += "</tr>";
  for (const auto& r : t.rows) {
    out += r.total ? "<tr class=\"total\">" : "<tr>";
    for (size_t i = 0; i < r.cells.size(); ++i)
      out += cell("td", r.cells[i], i < t.columns.size() && t.columns[i].paths);
    out += "</tr>";
  }
  return out + "</table>";
}

std::string tiles(const KeyFigures& k) {
  std::string out = "<div class=\"cards\">";
  for (const auto& t : k.tiles) {
    const char* tone = t.tone == KeyFigures::Tone::kGood   ? " good"
                       : t.tone == KeyFigures::Tone::kBad  ? " bad"
                       : t.tone == KeyFigures::Tone::kWarn ? " warn"
                                                           : "";
    out += "<div class=\"kpi\"><div class=\"label\">" + escape(t.label) + "</div><div class=\"value" + tone + "\">" +
           escape(t.value) + "</div><div class=\"note\">" + escape(t.note) + "</div></div>";
  }
  return out + "</div>";
}

std::string banner(const Banner& b) {
  const bool warning = b.kind == Banner::Kind::kWarning;
  return std::string("<div class=\"banner ") + (warning ? "pytorch" : "fail") + "\">" +
         (warning                            ? "\u26a0 "
          : b.kind == Banner::Kind::kFailure ? "\u2717 "
                                             : "") +
         escape(b.head) + (b.detail.empty() ? "" : "<span class=\"small\">" + escape(b.detail) + "</span>") + "</div>";
}

std::string paragraph(const Paragraph& p) {
  const char* open = p.kind == Paragraph::Kind::kLead        ? "<p class=\"lead\">"
                     : p.kind == Paragraph::Kind::kKeyFigure ? "<p class=\"saved\">"
                                                             : "<p>";
  return open + text(p.text) + "</p>";
}

std::string block(const Block& b) {
  if (b.only == Only::kMarkdown) return "";
  struct Draw {
    std::string operator()(const Paragraph& p) const { return paragraph(p); }
    std::string operator()(const List& l) const {
      std::string out = "<ul class=\"changes\">";
      for (const Text& item : l.items) out += "<li>" + text(item) + "</li>";
      return out + "</ul>";
    }
    std::string operator()(const Table& t) const { return table(t); }
    std::string operator()(const Figure& f) const { return "<div class=\"chart\">" + f.svg + "</div>"; }
    std::string operator()(const KeyFigures& k) const { return tiles(k); }
    std::string operator()(const Banner& b) const { return banner(b); }
  };
  return std::visit(Draw{}, b.body);
}

std::string section(const Section& s) {
  std::string out = s.footer ? "<section><footer><h2 style=\"color:#1f2328\">" : "<section><h2>";
  out += text(s.heading) + "</h2>";
  for (const Block& b : s.blocks) out += block(b);
  return out + (s.footer ? "</footer></section>\n" : "</section>\n");
}

}  // namespace

std::string html(const Document& d) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<meta name=\"generator\" content=\"mkevolve report\"><title>" +
      escape(d.title) + "</title><style>" + kCss + "</style></head><body><main>\n";
  out += "<header><h1>" + escape(d.title) + "</h1><p class=\"sub\">" + text(d.subtitle) + "</p></header>\n";
  for (const Block& b : d.preface)
    if (b.only != Only::kMarkdown) out += block(b) + "\n";
  for (const Section& s : d.sections)
    if (s.only != Only::kMarkdown) out += section(s);
  return out + "</main></body></html>\n";
}

}  // namespace mk::report::doc
