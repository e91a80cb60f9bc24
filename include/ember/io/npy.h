// NumPy's .npy files (format versions 1.0, 2.0 and 3.0: the magic "\x93NUMPY", a header length,
// a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} and the raw
// data), so arrays move between Ember and NumPy/PyTorch scripts without a conversion step.
//
//   Array x = io::load_npy("input.npy");        // numpy.save(..., np.float32 array)
//   io::save_npy("output.npy", y);              // numpy.load gives y's dtype and shape
//
// Read: float16/32/64, int8–64, uint8–64 and bool, little- or big-endian, C or Fortran order.
// Written: every Ember dtype but bfloat16 (NumPy has none: cast first), little-endian, C order,
// version 1.0 (2.0 when the header needs it). Malformed or truncated files raise ember::Error
// naming the file and the problem; they never crash (tools/fuzz/npy_fuzz.cpp; the tests replay
// its corpus).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember/array.h"

namespace ember::io {

// Parses a whole .npy file held in memory; `name` starts error messages (the file's path).
Array parse_npy(const uint8_t* data, size_t size, Device device = Device::cpu(), const std::string& name = "npy");
// The bytes of a .npy file holding x.
std::vector<uint8_t> serialize_npy(const Array& x);

Array load_npy(const std::string& path, Device device = Device::cpu());
// Atomic, as safetensors' save_file: a crash mid-save leaves any previous file intact.
void save_npy(const std::string& path, const Array& x);

}  // namespace ember::io
