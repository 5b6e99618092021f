// Small SVG helpers for report.html: a canvas that collects elements, and the
// three charts the report draws (line chart with failure markers, stacked
// horizontal bars, status grid). Everything is plain text; no scripts, no
// external references, so the file renders anywhere, offline.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mk::report::svg {

/// Escapes &, <, >, " and ' for text and attribute values.
std::string escape(std::string_view s);

/// A number with at most `digits` decimals and no trailing zeros ("1.5", "2").
std::string num(double v, int digits = 2);

/// "nice" tick values covering [lo, hi] (about n of them): 0, 0.5, 1, 1.5 ...
std::vector<double> nice_ticks(double lo, double hi, int n = 5);

/// Collects SVG elements; str() wraps them in an <svg> with a title for screen readers.
class Canvas {
 public:
  Canvas(double width, double height) : w_(width), h_(height) {}
  void line(double x1, double y1, double x2, double y2, std::string_view stroke, double width = 1,
            std::string_view dash = "");
  void polyline(const std::vector<std::pair<double, double>>& pts, std::string_view stroke, double width = 2,
                std::string_view dash = "");
  void rect(double x, double y, double w, double h, std::string_view fill, double rx = 0,
            std::string_view stroke = "", std::string_view tooltip = "");
  void circle(double cx, double cy, double r, std::string_view fill, std::string_view stroke = "#fff",
              std::string_view tooltip = "");
  /// An "x" marker (a failed evaluation).
  void cross(double cx, double cy, double size, std::string_view stroke, std::string_view tooltip = "");
  /// anchor: start, middle, end. weight: normal, bold.
  void text(double x, double y, std::string_view s, std::string_view anchor = "start", double size = 12,
            std::string_view fill = "#333", std::string_view weight = "normal", double rotate = 0);
  void raw(std::string_view element) { body_ += element; }
  std::string str(std::string_view title) const;
  double width() const { return w_; }
  double height() const { return h_; }

 private:
  double w_, h_;
  std::string body_;
};

/// One line of a line chart: y per x index; nullopt with failed=true draws a
/// cross in the failure strip, nullopt without failed leaves a gap.
struct Series {
  std::string name;
  std::string color;
  std::vector<std::optional<double>> y;
  std::vector<bool> failed;  ///< same length as y (missing entries count as not failed)
  double width = 2;
  std::string dash;          ///< e.g. "6 4"
};

struct LineChart {
  std::string title;         ///< for the <title> element
  std::string y_label;
  std::string x_label;
  std::vector<std::string> x_ticks;  ///< one label per x index
  std::vector<Series> series;
  std::optional<double> reference;   ///< a dashed horizontal line (1.0 = parity with the baseline)
  std::string y_suffix = "\u00d7";   ///< after each y value: "×" for speedups, "" for fractions
  std::string reference_label;
  double width = 1000, height = 340;
};
std::string line_chart(const LineChart& c);

/// A horizontal bar made of stacked parts.
struct Bar {
  std::string label;
  std::vector<double> parts;  ///< one per BarChart::part_names
  std::string note;           ///< drawn after the bar ("1.2M tokens, 45 calls")
};
struct BarChart {
  std::string title;
  std::vector<std::string> part_names;
  std::vector<std::string> part_colors;
  std::vector<Bar> bars;
  double width = 1000;
};
std::string bar_chart(const BarChart& c);

/// A grid of cells: rows x columns, each cell ok / failed / pending / absent.
enum class Cell { kAbsent, kOk, kFailed, kPending };
struct Grid {
  std::string title;
  std::vector<std::string> column_heads;     ///< "t=1"
  std::vector<std::string> column_subheads;  ///< "split"
  std::vector<std::string> column_tooltips;
  std::vector<std::string> row_labels;
  std::vector<std::string> row_notes;        ///< small text under each label ("split of 4")
  std::vector<std::vector<Cell>> cells;      ///< [row][column]
  std::vector<std::vector<std::string>> cell_tooltips;  ///< optional, same shape
};
std::string grid(const Grid& g);

/// The categorical palette used for subkernel lines (colour-blind-friendly).
const std::vector<std::string>& palette();

}  // namespace mk::report::svg
