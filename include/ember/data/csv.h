// A CSV file as a dataset of rows: a header line names the columns, every other line holds
// numbers. Target columns (by name) go to Row::targets, the others to Row::features.
//
//   auto rows = data::CsvDataset::open("houses.csv", {.targets = {"price"}});
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ember/data/dataset.h"

namespace ember::data {

struct Row {
  std::vector<float> features{};
  std::vector<float> targets{};
};

struct CsvOptions {
  std::vector<std::string> targets{};  // names of target columns (may be empty)
  char delimiter = ',';
};

class CsvDataset : public Dataset<Row> {
 public:
  // Parses the whole file now; errors name the file, line and column.
  static std::shared_ptr<CsvDataset> open(const std::string& path, CsvOptions opts = {});
  static std::shared_ptr<CsvDataset> parse(const std::string& text, CsvOptions opts = {}, const std::string& name = "CSV");
  size_t size() const override { return rows_.size(); }
  Row get(size_t i) const override {
    check_index(i, "CsvDataset");
    return rows_[i];
  }
  const std::vector<std::string>& feature_names() const { return feature_names_; }
  const std::vector<std::string>& target_names() const { return target_names_; }

 private:
  std::vector<Row> rows_;
  std::vector<std::string> feature_names_, target_names_;
};

}  // namespace ember::data
