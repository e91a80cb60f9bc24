// `ember onnx-check MODEL.onnx` and `ember onnx-run MODEL.onnx --input name=file.pb ...`
// (src/cli/onnx_commands.cpp). Both return the process exit code; bad arguments throw
// std::invalid_argument (main prints the usage and exits with 2).
#pragma once

namespace ember::cli {

int cmd_onnx_check(int argc, char** argv);
int cmd_onnx_run(int argc, char** argv);
extern const char* kOnnxUsage;

}  // namespace ember::cli
