// The one place that includes the protobuf classes (Debian's libonnx-dev: onnx/onnx-ml.pb.h,
// generated from ONNX 1.12's onnx.proto); everything else sees the plain structs of ember/onnx/onnx.h.
#pragma once

#ifndef ONNX_ML
#define ONNX_ML 1
#endif
#ifndef ONNX_NAMESPACE
#define ONNX_NAMESPACE onnx
#endif
#include <onnx/onnx_pb.h>  // defines ONNX_API, then includes onnx-ml.pb.h

#include <string>

#include "ember/onnx/onnx.h"

namespace ember::onnx::detail {

// The tensor's value on the CPU; `what` names it in errors ("initializer 'w'", a file path).
Array tensor_to_array(const ::onnx::TensorProto& t, const std::string& what, const LoadOptions& opts);
void array_to_tensor(const Array& value, const std::string& name, ::onnx::TensorProto* t);

}  // namespace ember::onnx::detail
