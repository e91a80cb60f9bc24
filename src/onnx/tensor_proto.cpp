// TensorProto <-> Array: payloads from raw_data (little-endian) or the typed fields, external data
// files beside the model, and the checks a hostile file needs (declared sizes must match the
// payload before anything is allocated).
#include <cstring>
#include <filesystem>
#include <limits>

#include "ember/ops.h"
#include "io/read_file.h"
#include "onnx/proto.h"

namespace ember::onnx {

std::string onnx_type_name(int32_t t) {
  switch (t) {
    case 1: return "float32";
    case 2: return "uint8";
    case 3: return "int8";
    case 4: return "uint16";
    case 5: return "int16";
    case 6: return "int32";
    case 7: return "int64";
    case 8: return "string";
    case 9: return "bool";
    case 10: return "float16";
    case 11: return "float64";
    case 12: return "uint32";
    case 13: return "uint64";
    case 14: return "complex64";
    case 15: return "complex128";
    case 16: return "bfloat16";
    case 17: return "float8e4m3fn";
    case 18: return "float8e4m3fnuz";
    case 19: return "float8e5m2";
    case 20: return "float8e5m2fnuz";
    case 21: return "uint4";
    case 22: return "int4";
    case 23: return "float4e2m1";
    case 24: return "float8e8m0";
    case 25: return "uint2";
    case 26: return "int2";
    default: return "type " + std::to_string(t);
  }
}

DType dtype_from_onnx(int32_t t, const std::string& what) {
  switch (t) {
    case 1: return DType::F32;
    case 2: return DType::U8;
    case 3: return DType::I8;
    case 4: return DType::U16;
    case 5: return DType::I16;
    case 6: return DType::I32;
    case 12: return DType::U32;
    case 13: return DType::U64;
    case 7: return DType::I64;
    case 9: return DType::Bool;
    case 10: return DType::F16;
    case 11: return DType::F64;
    case 16: return DType::BF16;
    default:
      throw Unsupported(what + ": element type " + onnx_type_name(t) +
                        " has no Ember dtype (supported: float32, float64, float16, bfloat16, int8, int16, "
                        "int32, int64, uint8, uint16, uint32, uint64, bool)");
  }
}

int32_t onnx_type_from_dtype(DType d) {
  switch (d) {
    case DType::F32: return 1;
    case DType::U8: return 2;
    case DType::I32: return 6;
    case DType::I64: return 7;
    case DType::Bool: return 9;
    case DType::F16: return 10;
    case DType::F64: return 11;
    case DType::BF16: return 16;
    case DType::I8: return 3;
    case DType::U16: return 4;
    case DType::I16: return 5;
    case DType::U32: return 12;
    case DType::U64: return 13;
  }
  return 0;
}

namespace detail {

namespace {

// Copies `count` typed-field values into `dst` as elements of `dtype`.
template <class Field>
void copy_typed(const Field& field, DType dtype, void* dst) {
  const int n = field.size();
  for (int i = 0; i < n; ++i) {
    auto v = field.Get(i);
    switch (dtype) {
      case DType::F32: static_cast<float*>(dst)[i] = float(v); break;
      case DType::F64: static_cast<double*>(dst)[i] = double(v); break;
      case DType::I32: static_cast<int32_t*>(dst)[i] = int32_t(v); break;
      case DType::I64: static_cast<int64_t*>(dst)[i] = int64_t(v); break;
      case DType::U8: static_cast<uint8_t*>(dst)[i] = uint8_t(v); break;
      case DType::Bool: static_cast<uint8_t*>(dst)[i] = v != 0; break;
      case DType::I8: static_cast<int8_t*>(dst)[i] = int8_t(v); break;
      case DType::I16: static_cast<int16_t*>(dst)[i] = int16_t(v); break;
      case DType::U16: static_cast<uint16_t*>(dst)[i] = uint16_t(v); break;
      case DType::U32: static_cast<uint32_t*>(dst)[i] = uint32_t(v); break;
      case DType::U64: static_cast<uint64_t*>(dst)[i] = uint64_t(v); break;
      // float16 / bfloat16 values are stored as their bit patterns in int32_data.
      case DType::F16:
      case DType::BF16: static_cast<uint16_t*>(dst)[i] = uint16_t(int64_t(v)); break;
    }
  }
}

std::string external_payload(const ::onnx::TensorProto& t, const std::string& what, const LoadOptions& opts) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::stoll(kv.value());
    else if (kv.key() == "length") length = std::stoll(kv.value());
  }
  if (location.empty()) throw Error(what + ": external data without a location");
  std::filesystem::path rel(location);
  if (rel.is_absolute() || location.find("..") != std::string::npos)
    throw Error(what + ": external data location '" + location + "' must be a relative path inside the model's folder");
  if (opts.base_dir.empty())
    throw Error(what + ": external data '" + location + "' needs the model's folder (use load(path) or LoadOptions::base_dir)");
  std::string path = (std::filesystem::path(opts.base_dir) / rel).string();
  std::vector<uint8_t> bytes = io::detail::read_regular_file(path, "onnx::load", opts.max_bytes);
  if (offset < 0 || uint64_t(offset) > bytes.size())
    throw Error(what + ": external data offset " + std::to_string(offset) + " is past the end of " + path + " (" +
                std::to_string(bytes.size()) + " bytes)");
  uint64_t avail = bytes.size() - uint64_t(offset);
  uint64_t len = length < 0 ? avail : uint64_t(length);
  if (len > avail)
    throw Error(what + ": external data length " + std::to_string(len) + " at offset " + std::to_string(offset) +
                " runs past the end of " + path + " (" + std::to_string(bytes.size()) + " bytes)");
  return std::string(reinterpret_cast<const char*>(bytes.data()) + offset, len);
}

}  // namespace

Array tensor_to_array(const ::onnx::TensorProto& t, const std::string& what, const LoadOptions& opts) {
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  for (int64_t d : dims)
    if (d < 0) throw Error(what + ": negative dimension " + std::to_string(d));
  if (dims.size() > size_t(kMaxRank))
    throw Unsupported(what + ": rank " + std::to_string(dims.size()) + " is above Ember's maximum " +
                      std::to_string(kMaxRank));
  Shape shape(dims);
  if (t.data_type() == 8) throw Unsupported(what + ": string tensors are not supported");
  DType dtype = dtype_from_onnx(t.data_type(), what);
  check_extent(shape, dtype_size(dtype), "onnx tensor");
  const uint64_t numel = uint64_t(shape.numel());
  const uint64_t nbytes = numel * dtype_size(dtype);

  std::string external;
  const std::string* raw = nullptr;
  if (t.data_location() == ::onnx::TensorProto::EXTERNAL) {
    external = external_payload(t, what, opts);
    raw = &external;
  } else if (t.has_raw_data()) {
    raw = &t.raw_data();
  }
  if (raw) {
    if (raw->size() != nbytes)
      throw Error(what + ": " + std::to_string(raw->size()) + " bytes of data for shape " + shape.str() + " of " +
                  std::string(dtype_name(dtype)) + " (" + std::to_string(nbytes) + " bytes expected)");
    std::vector<uint8_t> host(raw->begin(), raw->end());
    if (dtype == DType::Bool)
      for (auto& b : host) b = b != 0;
    return from_buffer(host.data(), shape, dtype);
  }
  // Typed fields: which one holds the values depends on the type (onnx.proto's table). The count
  // is checked before allocating (a fuzzed [2^41] tensor with no values asked for 34 TB).
  auto typed = [&](const auto& field) {
    if (uint64_t(field.size()) != numel)
      throw Error(what + ": " + std::to_string(field.size()) + " values for shape " + shape.str() + " (" +
                  std::to_string(numel) + " expected)");
    std::vector<uint8_t> host(nbytes);
    copy_typed(field, dtype, host.data());
    return from_buffer(host.data(), shape, dtype);
  };
  switch (t.data_type()) {
    case 1: return typed(t.float_data());
    case 11: return typed(t.double_data());
    case 7: return typed(t.int64_data());
    case 12: case 13: return typed(t.uint64_data());  // uint32, uint64
    default: return typed(t.int32_data());  // int8, int16, int32, uint8, uint16, bool, float16, bfloat16
  }
}

void array_to_tensor(const Array& value, const std::string& name, ::onnx::TensorProto* t) {
  t->set_name(name);
  t->set_data_type(onnx_type_from_dtype(value.dtype()));
  for (int64_t d : value.shape()) t->add_dims(d);
  std::vector<uint8_t> bytes = value.to_bytes();
  t->set_raw_data(std::string(bytes.begin(), bytes.end()));
}

}  // namespace detail

Array tensor_from_memory(const std::string& bytes, const std::string& what) {
  ::onnx::TensorProto t;
  if (!t.ParseFromString(bytes)) throw Error(what + ": not a valid serialized TensorProto");
  return detail::tensor_to_array(t, what, {});
}

Array load_tensor(const std::string& path) {
  std::vector<uint8_t> bytes = io::detail::read_regular_file(path, "onnx::load_tensor");
  return tensor_from_memory(std::string(bytes.begin(), bytes.end()), path);
}

std::string tensor_to_bytes(const Array& value, const std::string& name) {
  ::onnx::TensorProto t;
  detail::array_to_tensor(value, name, &t);
  return t.SerializeAsString();
}

}  // namespace ember::onnx
