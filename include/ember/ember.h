// Ember: one include for the whole public API.
#pragma once

#include "ember/array.h"
#include "ember/autograd.h"
#include "ember/device.h"
#include "ember/dtype.h"
#include "ember/error.h"
#include "ember/ops.h"
#include "ember/shape.h"
#include "ember/tensor.h"
#include "ember/version.h"
