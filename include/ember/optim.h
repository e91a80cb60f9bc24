// Every header of ember/optim/: the optimizers, learning-rate schedulers and the gradient scaler
// (and, through them, ember/nn/module.h and the core). tools/include_cost.sh --check fails when a
// header of ember/optim/ is missing here.
#pragma once

#include "ember/optim/adadelta.h"
#include "ember/optim/adam.h"
#include "ember/optim/adam_family.h"
#include "ember/optim/grad_scaler.h"
#include "ember/optim/lbfgs.h"
#include "ember/optim/lr_scheduler.h"
#include "ember/optim/lr_scheduler_extra.h"
#include "ember/optim/optimizer.h"
#include "ember/optim/rmsprop_adagrad_lion.h"
#include "ember/optim/sgd.h"
