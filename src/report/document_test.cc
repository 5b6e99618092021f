#include "report/document.h"

#include <gtest/gtest.h>

namespace mk::report::doc {
namespace {

Document one_section(std::vector<Block> blocks) {
  Document d;
  d.title = "T";
  d.sections.push_back({{words("S")}, std::move(blocks)});
  return d;
}

TEST(Document, EachRendererDrawsOnlyWhatIsMarkedForIt) {
  Document d = one_section({{Paragraph{{words("both")}}},
                            {Paragraph{{words("md block")}}, Only::kMarkdown},
                            {Paragraph{{words("html block")}}, Only::kHtml},
                            {Paragraph{{words("a"), md_only(words("B")), html_only(words("C")), words("d")}}},
                            {Figure{"<svg>chart</svg>"}, Only::kHtml}});
  d.sections.push_back({{words("md section")}, {}, Only::kMarkdown});
  d.sections.push_back({{words("html section")}, {}, Only::kHtml});
  const std::string md = markdown(d), page = html(d);
  EXPECT_EQ(md, "# T\n\n## S\n\nboth\n\nmd block\n\naBd\n\n## md section\n\n");
  EXPECT_NE(page.find("<p>both</p><p>html block</p><p>aCd</p><div class=\"chart\"><svg>chart</svg></div>"),
            std::string::npos);
  EXPECT_NE(page.find("<h2>html section</h2>"), std::string::npos);
  EXPECT_EQ(page.find("md block"), std::string::npos);
  EXPECT_EQ(page.find("md section"), std::string::npos);
}

TEST(Document, RunTextIsEscapedAndTheReportsOwnWordsAreNot) {
  Document d = one_section({{Paragraph{{words("the GPU's "), value("a|b<c>\nd"), words(" "), one_line("e|f\ng"),
                                       words(" "), styled(value("x"), Span::Style::kStrongInHtml)}}}});
  EXPECT_EQ(markdown(d), "# T\n\n## S\n\nthe GPU's a|b<c>\nd e\\|f g x\n\n");
  EXPECT_NE(html(d).find("<p>the GPU's a|b&lt;c&gt;\nd e|f\ng <b>x</b></p>"), std::string::npos);
}

TEST(Document, MarkdownTellsABlankCellFromAnEmptyOne) {
  Table t;
  t.columns = {{{words("a")}}, {{words("b")}}, {{words("c")}}};
  t.centered = true;
  t.rows.push_back({{{value("1")}, {}, {words("")}}});
  const std::string md = markdown(one_section({{t}}));
  EXPECT_NE(md.find("| a | b | c |\n|---|:---:|:---:|\n| 1 | |  |\n\n"), std::string::npos) << md;
  EXPECT_NE(html(one_section({{t}})).find("<tr><td>1</td><td></td><td></td></tr>"), std::string::npos);
}

}  // namespace
}  // namespace mk::report::doc
