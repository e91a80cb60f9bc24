// Helpers for the JSON configs of layer options (nlohmann-json, kept out of public headers).
#pragma once

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ember/device.h"
#include "ember/dtype.h"
#include "ember/error.h"

namespace ember::nn {

using json = nlohmann::json;

inline json parse_json(const std::string& text, const char* what) {
  try {
    json j = json::parse(text);
    if (!j.is_object()) throw Error(fmt::format("{}::from_json: expected a JSON object", what));
    return j;
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}::from_json: {}", what, e.what()));
  }
}

template <class T>
void read_field(const json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end()) return;  // keep the default
  try {
    out = it->get<T>();
  } catch (const json::exception& e) {
    throw Error(fmt::format("config field '{}': {}", key, e.what()));
  }
}

template <class T>
void read_optional(const json& j, const char* key, std::optional<T>& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  T v{};
  read_field(j, key, v);
  out = v;
}

// The end of every options from_json: each key of the input must be one the parsed options write
// back (`written`: their to_json), so a misspelled or unknown key is an error naming it instead
// of a default kept silently. A null value (an unset optional) is allowed for any key.
inline void reject_unknown_keys(const json& j, const std::string& written, const char* what) {
  json known = json::parse(written);
  std::string unknown, names;
  for (const auto& [key, value] : j.items())
    if (!value.is_null() && !known.contains(key)) unknown += (unknown.empty() ? "'" : ", '") + key + "'";
  if (unknown.empty()) return;
  for (const auto& [key, value] : known.items()) names += (names.empty() ? "" : ", ") + key;
  throw Error(fmt::format("{}::from_json: unknown key {} (the keys are: {})", what, unknown, names));
}

inline DType dtype_from_name(const std::string& name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (dtype_name(DType(i)) == name) return DType(i);
  throw Error(fmt::format("unknown dtype '{}'", name));
}

inline void read_dtype(const json& j, const char* key, DType& out) {
  std::string s;
  if (j.contains(key)) {
    read_field(j, key, s);
    out = dtype_from_name(s);
  }
}

inline void read_device(const json& j, const char* key, Device& out) {
  std::string s;
  if (j.contains(key)) {
    read_field(j, key, s);
    out = Device::parse(s);
  }
}

}  // namespace ember::nn
