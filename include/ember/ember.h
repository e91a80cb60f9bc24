// Ember: one include for the whole public API.
#pragma once

#include "ember/array.h"
#include "ember/autograd.h"
#include "ember/debug.h"
#include "ember/device.h"
#include "ember/dtype.h"
#include "ember/error.h"
#include "ember/ops.h"
#include "ember/shape.h"
#include "ember/tensor.h"
#include "ember/version.h"

// Neural networks, optimizers, records.
#include "ember/io/safetensors.h"
#include "ember/nn/activation.h"
#include "ember/nn/container.h"
#include "ember/nn/dropout.h"
#include "ember/nn/embedding.h"
#include "ember/nn/init.h"
#include "ember/nn/linear.h"
#include "ember/nn/loss.h"
#include "ember/nn/module.h"
#include "ember/nn/norm.h"
#include "ember/optim/adam.h"
#include "ember/optim/optimizer.h"
#include "ember/optim/scheduler.h"
#include "ember/optim/sgd.h"
