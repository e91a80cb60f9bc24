// Records in the safetensors format (https://github.com/huggingface/safetensors: an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape and byte range,
// then the raw little-endian data). Files are readable by PyTorch and Hugging Face tools.
//
//   save(model, "cnn.safetensors");            // atomic: temporary file, fsync, rename
//   load(model, "cnn.safetensors");            // names, shapes checked; dtypes converted
//   load(model, "torch.safetensors", {.remap = io::rename_prefixes({{"features.", "conv."}})});
//
// Malformed or truncated input raises ember::Error naming the problem; it never crashes
// (tools/fuzz/safetensors_fuzz.cpp fuzzes the parser; tests replay its corpus).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/nn/module.h"
#include "ember/optim/optimizer.h"

namespace ember::io {

using TensorMap = std::map<std::string, Array>;
using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  TensorMap tensors{};
  Metadata metadata{};
};

// One tensor's entry in a header, before its data is read.
struct TensorInfo {
  std::string name{};
  DType dtype = DType::F32;
  Shape shape{};
  uint64_t begin = 0;  // byte range within the data section
  uint64_t end = 0;
};
struct Header {
  std::vector<TensorInfo> tensors{};
  Metadata metadata{};
  uint64_t data_offset = 0;  // where the data section starts in the file
};

// Parses and validates the header of a file held in memory (throws ember::Error).
Header parse_header(const uint8_t* data, size_t size);
// Parses a whole file held in memory into arrays on `device` (throws ember::Error).
SafetensorsFile parse(const uint8_t* data, size_t size, Device device = Device::cpu());
// Serializes arrays (all dtypes; bool as BOOL, f16 as F16, bf16 as BF16) and metadata.
std::vector<uint8_t> serialize(const TensorMap& tensors, const Metadata& metadata = {});

// Files. save_file writes atomically: a crash mid-save leaves any previous file intact.
void save_file(const std::string& path, const TensorMap& tensors, const Metadata& metadata = {});
SafetensorsFile load_file(const std::string& path, Device device = Device::cpu());

// Key remapping when loading: returns the new name, or nullopt to drop the key.
using KeyMap = std::function<std::optional<std::string>(const std::string& key)>;
// Replaces the first matching prefix (rules tried in order); other keys are kept as they are.
KeyMap rename_prefixes(std::vector<std::pair<std::string, std::string>> rules);

struct LoadOptions {
  bool strict = true;  // missing or unexpected keys are errors
  KeyMap remap{};        // applied to every key in the file first
  // A file saved by Ember records each leaf module's type and options (metadata
  // "ember.config"); loading it into a model whose module of the same name has another type or
  // other options (eps, momentum, an activation's approximation, ...) is an error naming both,
  // since shapes alone do not show them. Options that loading converts anyway (dtype, device)
  // and seeds are not compared; neither are files without the record, nor loads with `remap`.
  bool check_config = true;
};

}  // namespace ember::io

namespace ember {

// A model's parameters and buffers (its state_dict) as a safetensors file, with its modules'
// options recorded in the metadata (io::LoadOptions::check_config).
void save(nn::Module& model, const std::string& path);
void load(nn::Module& model, const std::string& path, const io::LoadOptions& opts = {});
// An optimizer's state (step count and per-parameter state).
void save(optim::Optimizer& optimizer, const std::string& path);
void load(optim::Optimizer& optimizer, const std::string& path);

}  // namespace ember
