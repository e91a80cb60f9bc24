// Synchronized batch normalization: batch statistics over every rank of a data-parallel group,
// so that N ranks x batch B normalize as one process with batch N x B would (PyTorch's
// SyncBatchNorm). For models whose per-rank batch is too small for good statistics.
//
//   Net model;                                           // with BatchNorm1d/2d layers
//   dist::synchronize_batch_norm(model, *comm);          // or DataParallelOptions{.sync_batch_norm = true}
//   dist::DataParallel dp(*comm, model);
//
// Each synchronized layer makes three small collectives per training-mode forward (the element
// count, the per-channel sum, the per-channel squared deviation) and two per backward (their
// gradients); each waits for its value, so the forward and backward graphs are evaluated in
// pieces around them. Eval mode uses the running statistics and communicates nothing.
#pragma once

#include "ember/array.h"
#include "ember/dist/communicator.h"
#include "ember/nn/module.h"

namespace ember::dist {

// The sum of `x` over every rank (same shape and dtype on each), as a differentiable op: its
// gradient on each rank is the sum over ranks of the output's gradients, itself an all-reduce
// made inside backward, so every rank must run the same backward passes in the same order. The
// result has history only when `x` requires grad; it is not differentiable twice.
Array all_reduce_sum(Communicator& comm, const Array& x, Loc loc = Loc::current());

// Points every nn::BatchNorm (1d and 2d) of `model` at `comm` (sets its group_sum); returns how
// many layers it changed. The communicator must outlive the model's training-mode forward
// passes. desynchronize_batch_norm(model) undoes it (local statistics again).
int synchronize_batch_norm(nn::Module& model, Communicator& comm);
int desynchronize_batch_norm(nn::Module& model);

}  // namespace ember::dist
