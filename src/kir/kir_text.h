// A line-based text form of KIR programs (abi.h), exact to the bit, so that a program can be
// written out by one process and read back by another: EMBER_KIR_DUMP=dir makes the registry
// write every program it compiles (runtime/registry.cpp), and the CUDA code check renders each
// of them as CUDA C and compiles it with NVRTC (tools/cuda_compile_check.cpp).
//
//   kir 1
//   name <the program's name, to the end of the line>
//   args <n> <storage dtype>...
//   reduction <0|1>
//   insts <n>
//   <op> <dtype> <phase> <a> <b> <c> <arg> <aux> <fimm's 64 bits in hex> <iimm>   (n lines)
#pragma once

#include <string>
#include <vector>

#include "backend/abi.h"

namespace ember::kir {

// A program read back: owns what its ember_kir_program view points to.
struct TextProgram {
  std::string name;
  std::vector<ember_kir_inst> insts;
  std::vector<uint8_t> arg_dtypes;
  int32_t has_reduction = 0;
  ember_kir_program view() const {
    return {name.c_str(), int32_t(insts.size()), insts.data(), int32_t(arg_dtypes.size()), arg_dtypes.data(),
            has_reduction};
  }
};

std::string program_text(const ember_kir_program& program);

// Parses program_text's output; throws ember::Error naming `source` and the line on bad input
// (operands out of order, unknown ops or dtypes, a truncated file).
TextProgram parse_program_text(const std::string& text, const std::string& source);

}  // namespace ember::kir
