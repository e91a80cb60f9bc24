// Every header of ember/nn/: modules, layers, losses, initializers (and, through them, the core:
// ember/tensor.h). Saving and loading models is ember/io/safetensors.h; optimizers are
// ember/optim.h. tools/include_cost.sh --check fails when a header of ember/nn/ is missing here.
#pragma once

#include "ember/nn/activation.h"
#include "ember/nn/activation_extra.h"
#include "ember/nn/attention.h"
#include "ember/nn/container.h"
#include "ember/nn/conv.h"
#include "ember/nn/conv1d.h"
#include "ember/nn/conv3d.h"
#include "ember/nn/conv_transpose.h"
#include "ember/nn/dropout.h"
#include "ember/nn/embedding.h"
#include "ember/nn/group_norm.h"
#include "ember/nn/init.h"
#include "ember/nn/linear.h"
#include "ember/nn/loss.h"
#include "ember/nn/loss_extra.h"
#include "ember/nn/module.h"
#include "ember/nn/norm.h"
#include "ember/nn/positional.h"
#include "ember/nn/recurrent.h"
#include "ember/nn/transformer.h"
#include "ember/nn/upsample.h"
