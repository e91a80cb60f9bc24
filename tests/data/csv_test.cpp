// CsvDataset edge cases: values out of float range, underflow, NaN and infinity, empty fields,
// a UTF-8 byte order mark, duplicate or empty column names, ragged rows, CRLF line endings and
// stray carriage returns. Every error names the file, the line and the column.
#include <gtest/gtest.h>

#include <ember/ember.h>

#include <filesystem>
#include <fstream>

namespace ember::data {
namespace {

std::string error_of(const std::string& text, CsvOptions opts = {}) {
  try {
    CsvDataset::parse(text, std::move(opts), "t.csv");
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(CsvHardeningTest, OutOfRangeValuesAreNamedAsSuch) {
  std::string msg = error_of("a,b\n1,2\n3,1e39\n");
  EXPECT_NE(msg.find("t.csv: line 3, column 2 ('b'): '1e39' is out of float range"), std::string::npos) << msg;
  EXPECT_NE(error_of("a\n-1e39\n").find("'-1e39' is out of float range"), std::string::npos);
  EXPECT_NE(error_of("a\n1e99999\n").find("'1e99999' is out of float range"), std::string::npos);
  // Too small for a float: rounds to zero (or a subnormal), as any float conversion would.
  auto ds = CsvDataset::parse("a,b\n1e-50,-1e-40\n");
  EXPECT_EQ(ds->get(0).features[0], 0.0f);
  EXPECT_EQ(ds->get(0).features[1], -1e-40f);
  EXPECT_EQ(error_of("a\nx1\n"), "t.csv: line 2, column 1 ('a'): 'x1' is not a number");
}

TEST(CsvHardeningTest, NanAndInfinityAreRefused) {
  for (std::string v : {"nan", "NaN", "inf", "-Infinity"}) {
    std::string msg = error_of("a,b\n1," + v + "\n");
    EXPECT_NE(msg.find("t.csv: line 2, column 2 ('b'): '" + v + "' is not a finite number"), std::string::npos) << msg;
  }
}

TEST(CsvHardeningTest, EmptyFieldsAreRefused) {
  EXPECT_EQ(error_of("a,b,c\n1,,3\n"), "t.csv: line 2, column 2 ('b'): empty field");
  EXPECT_EQ(error_of("a,b\n1, \n"), "t.csv: line 2, column 2 ('b'): empty field");
}

TEST(CsvHardeningTest, ByteOrderMarkIsStripped) {
  auto ds = CsvDataset::parse("\xEF\xBB\xBFy,x\n1,2\n", {.targets = {"y"}});
  EXPECT_EQ(ds->target_names(), (std::vector<std::string>{"y"}));
  EXPECT_EQ(ds->get(0).targets, (std::vector<float>{1}));
  EXPECT_EQ(ds->get(0).features, (std::vector<float>{2}));
}

TEST(CsvHardeningTest, DuplicateAndEmptyColumnNamesAreRefused) {
  EXPECT_EQ(error_of("a,b,a\n1,2,3\n"), "t.csv: line 1: columns 1 and 3 are both named 'a'");
  EXPECT_EQ(error_of("a,,b\n1,2,3\n"), "t.csv: line 1: column 2 has no name");
  EXPECT_EQ(error_of("a,b\n1,2\n", {.targets = {"b", "b"}}), "t.csv: target column 'b' is named twice in the options");
}

TEST(CsvHardeningTest, RaggedRowsNameTheLineAndCounts) {
  EXPECT_EQ(error_of("a,b\n1,2\n1,2,3\n"), "t.csv: line 3: 3 values, the header has 2 columns");
  EXPECT_EQ(error_of("a,b\n\n1\n"), "t.csv: line 3: 1 values, the header has 2 columns");
}

TEST(CsvHardeningTest, LineEndings) {
  auto ds = CsvDataset::parse("a,b\r\n1,2\r\n3,4\r\n", {.targets = {"b"}});
  ASSERT_EQ(ds->size(), 2u);
  EXPECT_EQ(ds->get(1).features, (std::vector<float>{3}));
  EXPECT_EQ(ds->get(1).targets, (std::vector<float>{4}));
  // A carriage return inside a line is not a line ending: "1\r2" is not the number 12.
  EXPECT_EQ(error_of("a,b\n1\r2,3\n"), "t.csv: line 2, column 1 ('a'): '1\r2' is not a number");
}

TEST(CsvHardeningTest, OpenNamesTheFile) {
  std::string path = (std::filesystem::temp_directory_path() / "ember_bad.csv").string();
  std::ofstream(path) << "x,y\n1,2\n3,1e40\n";
  try {
    CsvDataset::open(path);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": line 3, column 2 ('y'): '1e40' is out of float range (beyond +-3.4e38)");
  }
}

}  // namespace
}  // namespace ember::data
