// Ember's core API in one include: arrays and typed tensors, the ops, autograd, devices and
// dtypes, autocast, anomaly detection, the profiler and execution statistics, the version. No
// nn, optim, io, data, train, dist or onnx: those are ember/nn.h, ember/optim.h,
// ember/io/safetensors.h, the data/ and train/ headers, or ember/ember.h for everything.
// Compiling it costs about half of ember/ember.h (docs/install.md, "Sizes and compile time";
// tools/include_cost.sh measures it).
#pragma once

#include "ember/anomaly.h"
#include "ember/array.h"
#include "ember/autocast.h"
#include "ember/autograd.h"
#include "ember/debug.h"
#include "ember/device.h"
#include "ember/dtype.h"
#include "ember/error.h"
#include "ember/ops.h"
#include "ember/ops_nn.h"
#include "ember/profiler.h"
#include "ember/shape.h"
#include "ember/tensor.h"
#include "ember/version.h"
