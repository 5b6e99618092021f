#include "report/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace mk::report::svg {

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v, int digits) {
  if (!std::isfinite(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

std::vector<double> nice_ticks(double lo, double hi, int n) {
  if (!(hi > lo)) hi = lo + 1;
  double raw = (hi - lo) / std::max(1, n);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  double start = std::floor(lo / step) * step;
  for (double t = start; t <= hi + step * 0.999; t += step) ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

const std::vector<std::string>& palette() {
  // Okabe-Ito plus a few extra distinguishable hues.
  static const std::vector<std::string> p = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9",
                                             "#D55E00", "#7F3C8D", "#8C6D31", "#3969AC", "#F2B701"};
  return p;
}

namespace {

std::string attr(std::string_view name, std::string_view value) {
  return value.empty() ? std::string() : " " + std::string(name) + "=\"" + escape(value) + "\"";
}

std::string title_el(std::string_view tooltip) {
  return tooltip.empty() ? std::string() : "<title>" + escape(tooltip) + "</title>";
}

std::string short_label(const std::string& s, size_t max) {
  // Counts bytes; labels are names of subproblems (ASCII in practice).
  if (s.size() <= max) return s;
  return s.substr(0, max - 1) + "\u2026";
}

}  // namespace

void Canvas::line(double x1, double y1, double x2, double y2, std::string_view stroke, double width,
                  std::string_view dash) {
  body_ += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) + "\"" +
           attr("stroke", stroke) + " stroke-width=\"" + num(width) + "\"" + attr("stroke-dasharray", dash) + "/>";
}

void Canvas::polyline(const std::vector<std::pair<double, double>>& pts, std::string_view stroke, double width,
                      std::string_view dash) {
  if (pts.size() < 2) return;
  std::string p;
  for (const auto& [x, y] : pts) p += num(x) + "," + num(y) + " ";
  p.pop_back();
  body_ += "<polyline points=\"" + p + "\" fill=\"none\"" + attr("stroke", stroke) + " stroke-width=\"" + num(width) +
           "\" stroke-linejoin=\"round\" stroke-linecap=\"round\"" + attr("stroke-dasharray", dash) + "/>";
}

void Canvas::rect(double x, double y, double w, double h, std::string_view fill, double rx, std::string_view stroke,
                  std::string_view tooltip) {
  std::string el = "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(std::max(0.0, w)) +
                   "\" height=\"" + num(std::max(0.0, h)) + "\"" + attr("fill", fill) +
                   (rx > 0 ? " rx=\"" + num(rx) + "\"" : "") + attr("stroke", stroke);
  body_ += tooltip.empty() ? el + "/>" : el + ">" + title_el(tooltip) + "</rect>";
}

void Canvas::circle(double cx, double cy, double r, std::string_view fill, std::string_view stroke,
                    std::string_view tooltip) {
  std::string el = "<circle cx=\"" + num(cx) + "\" cy=\"" + num(cy) + "\" r=\"" + num(r) + "\"" + attr("fill", fill) +
                   attr("stroke", stroke) + (stroke.empty() ? "" : " stroke-width=\"1.5\"");
  body_ += tooltip.empty() ? el + "/>" : el + ">" + title_el(tooltip) + "</circle>";
}

void Canvas::cross(double cx, double cy, double size, std::string_view stroke, std::string_view tooltip) {
  double s = size / 2;
  body_ += "<g" + attr("stroke", stroke) + " stroke-width=\"2.5\" stroke-linecap=\"round\">" + title_el(tooltip) +
           "<line x1=\"" + num(cx - s) + "\" y1=\"" + num(cy - s) + "\" x2=\"" + num(cx + s) + "\" y2=\"" +
           num(cy + s) + "\"/><line x1=\"" + num(cx - s) + "\" y1=\"" + num(cy + s) + "\" x2=\"" + num(cx + s) +
           "\" y2=\"" + num(cy - s) + "\"/></g>";
}

void Canvas::text(double x, double y, std::string_view s, std::string_view anchor, double size, std::string_view fill,
                  std::string_view weight, double rotate) {
  std::string transform =
      rotate != 0 ? " transform=\"rotate(" + num(rotate) + " " + num(x) + " " + num(y) + ")\"" : std::string();
  body_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\"" + attr("text-anchor", anchor) + " font-size=\"" +
           num(size) + "\"" + attr("fill", fill) + (weight != "normal" ? attr("font-weight", weight) : "") + transform +
           ">" + escape(s) + "</text>";
}

std::string Canvas::str(std::string_view title) const {
  return "<svg viewBox=\"0 0 " + num(w_) + " " + num(h_) + "\" width=\"" +
         num(w_) + "\" height=\"" + num(h_) + "\" role=\"img\"" + attr("aria-label", title) +
         " font-family=\"-apple-system, 'Segoe UI', 'DejaVu Sans', Helvetica, Arial, sans-serif\">" +
         title_el(title) + body_ + "</svg>";
}

std::string line_chart(const LineChart& c) {
  Canvas cv(c.width, c.height);
  const double left = 74, right = 210, top = 16, bottom = 78;
  const double px0 = left, px1 = c.width - right, py0 = top, py1 = c.height - bottom;
  const size_t n = c.x_ticks.size();
  double hi = c.reference.value_or(0);
  for (const auto& s : c.series)
    for (const auto& v : s.y)
      if (v && std::isfinite(*v)) hi = std::max(hi, *v);
  hi = c.y_suffix.empty() ? std::max(hi * 1.1, 1.0) : std::max(hi * 1.1, 1.2);
  std::vector<double> ticks = nice_ticks(0, hi, 5);
  hi = ticks.back();
  auto X = [&](size_t i) {
    const double pad = 24;
    if (n <= 1) return (px0 + px1) / 2;
    return px0 + pad + static_cast<double>(i) * (px1 - px0 - 2 * pad) / static_cast<double>(n - 1);
  };
  auto Y = [&](double v) { return py1 - (v / hi) * (py1 - py0); };

  cv.rect(px0, py0, px1 - px0, py1 - py0, "#fbfbfd");
  for (double t : ticks) {
    cv.line(px0, Y(t), px1, Y(t), "#e4e6eb", 1);
    cv.text(px0 - 8, Y(t) + 4, num(t) + c.y_suffix, "end", 11, "#666");
  }
  cv.line(px0, py1, px1, py1, "#9aa0a6", 1);
  for (size_t i = 0; i < n; ++i) {
    cv.line(X(i), py1, X(i), py1 + 4, "#9aa0a6", 1);
    cv.text(X(i), py1 + 17, c.x_ticks[i], "middle", 11, "#555");
  }
  if (c.reference) cv.line(px0, Y(*c.reference), px1, Y(*c.reference), "#5f6368", 1.5, "6 4");
  // The failure strip under the axis.
  const double fy = py1 + 38;
  cv.rect(px0, fy - 10, px1 - px0, 20, "#fdecea", 3);
  cv.text(px0 - 8, fy + 4, "failed", "end", 11, "#c62828", "bold");
  if (!c.x_label.empty()) cv.text((px0 + px1) / 2, c.height - 6, c.x_label, "middle", 12, "#444");
  if (!c.y_label.empty()) cv.text(14, (py0 + py1) / 2, c.y_label, "middle", 12, "#444", "normal", -90);

  // Crosses that fall on the same x are spread out so each stays visible.
  std::map<size_t, int> fails_at, drawn_at;
  for (const auto& s : c.series)
    for (size_t i = 0; i < s.y.size() && i < n; ++i)
      if (!s.y[i] && i < s.failed.size() && s.failed[i]) ++fails_at[i];
  for (const auto& s : c.series) {
    std::vector<std::pair<double, double>> run;
    auto flush = [&] {
      cv.polyline(run, s.color, s.width, s.dash);
      run.clear();
    };
    for (size_t i = 0; i < s.y.size() && i < n; ++i) {
      if (s.y[i] && std::isfinite(*s.y[i])) {
        run.emplace_back(X(i), Y(*s.y[i]));
      } else {
        flush();
      }
    }
    flush();
    for (size_t i = 0; i < s.y.size() && i < n; ++i) {
      if (s.y[i] && std::isfinite(*s.y[i])) {
        cv.circle(X(i), Y(*s.y[i]), s.width >= 3 ? 4.5 : 3.5, s.color, "#fff",
                  s.name + ", " + c.x_ticks[i] + ": " + num(*s.y[i]) + c.y_suffix);
      } else if (i < s.failed.size() && s.failed[i]) {
        int k = drawn_at[i]++, m = fails_at[i];
        double dx = (k - (m - 1) / 2.0) * 11;
        cv.cross(X(i) + dx, fy, 8, s.color, s.name + ", " + c.x_ticks[i] + ": failed");
      }
    }
  }
  // Legend.
  double ly = py0 + 8;
  for (const auto& s : c.series) {
    cv.line(px1 + 16, ly, px1 + 38, ly, s.color, s.width, s.dash);
    cv.circle(px1 + 27, ly, 3, s.color, "");
    cv.text(px1 + 44, ly + 4, short_label(s.name, 24), "start", 11.5, "#333");
    ly += 19;
  }
  if (c.reference) {
    cv.line(px1 + 16, ly, px1 + 38, ly, "#5f6368", 1.5, "6 4");
    cv.text(px1 + 44, ly + 4, c.reference_label, "start", 11.5, "#333");
    ly += 19;
  }
  cv.cross(px1 + 27, ly, 8, "#888");
  cv.text(px1 + 44, ly + 4, "failed", "start", 11.5, "#333");
  return cv.str(c.title);
}

namespace {
std::string si(double v) {
  if (v >= 1e9) return num(v / 1e9, 2) + "G";
  if (v >= 1e6) return num(v / 1e6, 2) + "M";
  if (v >= 1e3) return num(v / 1e3, 1) + "K";
  return num(v, 0);
}
}  // namespace

std::string bar_chart(const BarChart& c) {
  const double label_w = 120, note_w = 190, bar_h = 22, gap = 10, top = 34, bottom = 28;
  double h = top + static_cast<double>(c.bars.size()) * (bar_h + gap) + bottom;
  Canvas cv(c.width, h);
  const double x0 = label_w, x1 = c.width - note_w;
  double max_total = 0;
  for (const auto& b : c.bars) {
    double t = 0;
    for (double p : b.parts) t += p;
    max_total = std::max(max_total, t);
  }
  std::vector<double> ticks = nice_ticks(0, max_total > 0 ? max_total : 1, 5);
  double hi = ticks.back();
  auto X = [&](double v) { return x0 + v / hi * (x1 - x0); };
  // Legend across the top.
  double lx = x0;
  for (size_t i = 0; i < c.part_names.size(); ++i) {
    cv.rect(lx, 8, 12, 12, i < c.part_colors.size() ? c.part_colors[i] : "#888", 2);
    cv.text(lx + 17, 18.5, c.part_names[i], "start", 11.5, "#333");
    lx += 30 + 7.0 * static_cast<double>(c.part_names[i].size());
  }
  double axis_y = top + static_cast<double>(c.bars.size()) * (bar_h + gap);
  for (double t : ticks) {
    cv.line(X(t), top - 4, X(t), axis_y, "#eceef1", 1);
    cv.text(X(t), axis_y + 16, si(t), "middle", 10.5, "#666");
  }
  double y = top;
  for (const auto& b : c.bars) {
    cv.text(x0 - 10, y + bar_h / 2 + 4, short_label(b.label, 16), "end", 12, "#333");
    double x = x0;
    for (size_t i = 0; i < b.parts.size(); ++i) {
      double w = X(b.parts[i]) - x0;
      if (w <= 0) continue;
      std::string name = i < c.part_names.size() ? c.part_names[i] : "";
      cv.rect(x, y, w, bar_h, i < c.part_colors.size() ? c.part_colors[i] : "#888", 0, "",
              b.label + ": " + si(b.parts[i]) + " " + name);
      x += w;
    }
    cv.text(x + 8, y + bar_h / 2 + 4, b.note, "start", 11, "#444");
    y += bar_h + gap;
  }
  cv.line(x0, top - 4, x0, axis_y, "#9aa0a6", 1);
  return cv.str(c.title);
}

std::string grid(const Grid& g) {
  const double label_w = 270, cell_w = 74, cell_h = 36, head_h = 50, pad = 5;
  size_t rows = g.row_labels.size(), cols = g.column_heads.size();
  double w = label_w + static_cast<double>(cols) * cell_w + 12;
  double h = head_h + static_cast<double>(rows) * cell_h + 8;
  Canvas cv(w, h);
  for (size_t c = 0; c < cols; ++c) {
    double cx = label_w + (static_cast<double>(c) + 0.5) * cell_w;
    std::string tip = c < g.column_tooltips.size() ? g.column_tooltips[c] : "";
    if (!tip.empty()) cv.raw("<g><title>" + escape(tip) + "</title>");
    cv.text(cx, 18, g.column_heads[c], "middle", 12.5, "#222", "bold");
    if (c < g.column_subheads.size()) {
      const std::string& sub = g.column_subheads[c];
      std::string color = sub == "split" ? "#b26a00" : (sub == "fuse" || sub == "totalfuse") ? "#1565c0" : "#777";
      cv.text(cx, 36, sub, "middle", 11, color, sub == "initial" || sub == "unchanged" ? "normal" : "bold");
    }
    if (!tip.empty()) cv.raw("</g>");
  }
  cv.line(8, head_h - 4, w - 4, head_h - 4, "#d0d4da", 1);
  for (size_t r = 0; r < rows; ++r) {
    double y = head_h + static_cast<double>(r) * cell_h;
    if (r % 2 == 1) cv.rect(8, y, w - 12, cell_h, "#f7f8fa");
    bool has_note = r < g.row_notes.size() && !g.row_notes[r].empty();
    cv.text(16, y + (has_note ? 15 : 22), short_label(g.row_labels[r], 34), "start", 12.5, "#222");
    if (has_note) cv.text(16, y + 29, short_label(g.row_notes[r], 46), "start", 10, "#888");
    for (size_t c = 0; c < cols; ++c) {
      Cell cell = r < g.cells.size() && c < g.cells[r].size() ? g.cells[r][c] : Cell::kAbsent;
      double x = label_w + static_cast<double>(c) * cell_w;
      std::string tip = r < g.cell_tooltips.size() && c < g.cell_tooltips[r].size() ? g.cell_tooltips[r][c] : "";
      switch (cell) {
        case Cell::kOk:
          cv.rect(x + pad, y + pad, cell_w - 2 * pad, cell_h - 2 * pad, "#2e7d32", 5, "", tip);
          cv.text(x + cell_w / 2, y + cell_h / 2 + 5.5, "\u2713", "middle", 16, "#fff", "bold");
          break;
        case Cell::kFailed:
          cv.rect(x + pad, y + pad, cell_w - 2 * pad, cell_h - 2 * pad, "#c62828", 5, "", tip);
          cv.text(x + cell_w / 2, y + cell_h / 2 + 5.5, "\u2717", "middle", 16, "#fff", "bold");
          break;
        case Cell::kPending:
          cv.rect(x + pad, y + pad, cell_w - 2 * pad, cell_h - 2 * pad, "#eceff1", 5, "#b0bec5", tip);
          cv.text(x + cell_w / 2, y + cell_h / 2 + 4, "new", "middle", 10.5, "#607d8b");
          break;
        case Cell::kAbsent:
          cv.circle(x + cell_w / 2, y + cell_h / 2, 1.8, "#cfd4da", "");
          break;
      }
    }
  }
  return cv.str(g.title);
}

}  // namespace mk::report::svg
