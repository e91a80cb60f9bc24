// Adam and AdamW (PyTorch's torch.optim.Adam / AdamW update rules, including amsgrad). Adam adds
// weight decay to the gradient; AdamW decays the weights directly (decoupled).
#pragma once

#include "ember/optim/optimizer.h"

namespace ember::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // AdamW's default is 1e-2
  bool amsgrad = false;
  bool maximize = false;
  ClipOptions clip{};
};

class Adam : public Optimizer {
 public:
  Adam(nn::Module& model, AdamOptions opts) : Adam(model, opts, false) {}
  Adam(std::vector<nn::NamedParam> params, AdamOptions opts) : Adam(std::move(params), opts, false) {}
  Adam(std::vector<ParamGroup> groups, AdamOptions opts) : Adam(std::move(groups), opts, false) {}
  AdamOptions options;
  std::string type_name() const override { return decoupled_ ? "AdamW" : "Adam"; }

 protected:
  Adam(nn::Module& model, AdamOptions opts, bool decoupled);
  Adam(std::vector<nn::NamedParam> params, AdamOptions opts, bool decoupled);
  Adam(std::vector<ParamGroup> groups, AdamOptions opts, bool decoupled);
  std::vector<std::string> state_names() const override;
  Array update(Group& group, const Array& params, const Array& grads, int64_t step) override;

 private:
  bool decoupled_ = false;
};

// AdamW's options: Adam's, with PyTorch's AdamW default weight decay.
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
  ClipOptions clip{};
  AdamOptions adam() const { return {lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, clip}; }
};

class AdamW : public Adam {
 public:
  AdamW(nn::Module& model, AdamWOptions opts = {}) : Adam(model, opts.adam(), true) {}
  AdamW(std::vector<nn::NamedParam> params, AdamWOptions opts = {}) : Adam(std::move(params), opts.adam(), true) {}
  AdamW(std::vector<ParamGroup> groups, AdamWOptions opts = {}) : Adam(std::move(groups), opts.adam(), true) {}
};

}  // namespace ember::optim
