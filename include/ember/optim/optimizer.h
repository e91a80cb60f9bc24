// Optimizer base: parameters of one dtype and device live in one flat arena (the model's
// parameters become views of it), so an update is a few elementwise ops over whole flat tensors
// rather than several per parameter, and step() realizes every parameter, every piece of optimizer
// state and the model's buffers in one ember::eval. State is keyed by parameter identity (the
// shared slot), saved and loaded by parameter name.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ember/autograd.h"
#include "ember/nn/module.h"

namespace ember::optim {

// Gradient clipping applied inside step() over the flat gradients of all groups.
struct ClipOptions {
  std::optional<double> max_norm{};   // rescale so the global L2 norm is at most this
  std::optional<double> max_value{};  // clamp each gradient element to [-v, v]
};

// A parameter group: parameters with their own learning rate and/or weight decay (PyTorch's
// param_groups). Names must be unique over all groups (they key the state dict): take them from
// the model's named_parameters(). A group's rate is relative: it stays group.lr / (optimizer's
// rate at construction) times the optimizer's current rate, so schedulers scale every group as
// PyTorch's do.
struct ParamGroup {
  std::vector<nn::NamedParam> params{};
  std::optional<double> lr{};            // unset: the optimizer's
  std::optional<double> weight_decay{};  // unset: the optimizer's
};

class Optimizer {
 public:
  // All parameters of `model` (frozen ones too: they are skipped while frozen) and its buffers
  // (realized with each step, so running statistics never build long chains).
  Optimizer(nn::Module& model, double lr, ClipOptions clip);
  Optimizer(std::vector<nn::NamedParam> params, double lr, ClipOptions clip);
  Optimizer(std::vector<ParamGroup> groups, double lr, ClipOptions clip);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Applies one update with the gradients of a backward pass. Parameters without a gradient in
  // `grads` (frozen, or unused by the loss) keep their values and state.
  void step(const Gradients& grads);

  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  int64_t steps() const { return step_; }
  // The global gradient norm of the last step (computed when clipping by norm), else undefined.
  const Array& last_grad_norm() const { return last_norm_; }
  // Number of flat arenas (one per parameter group, dtype and device).
  size_t num_groups() const { return groups_.size(); }
  // The flat parameter arena of a group (the model's parameters are views of it).
  const Array& arena(size_t group) const { return groups_.at(group).flat; }

  // "step" and, per parameter and state, "<param name>.<state>" (e.g. "fc1.weight.exp_avg").
  nn::StateDict state_dict();
  // Restores a state_dict of an optimizer of the same type over the same parameters.
  void load_state_dict(const nn::StateDict& state);
  virtual std::string type_name() const = 0;

 protected:
  struct Entry {
    nn::ParamRef param{};
    std::string name{};
    int64_t offset = 0;
    int64_t numel = 0;
    Shape shape{};
    const void* installed = nullptr;  // the node of the view this optimizer last installed
  };
  struct Group {
    DType dtype = DType::F32;
    Device device{};
    size_t param_group = 0;              // index into the ParamGroups given at construction
    double lr_scale = 1;                 // the group's rate over the optimizer's
    std::optional<double> weight_decay{};  // the group's own weight decay, if any
    std::vector<Entry> entries{};
    int64_t numel = 0;
    Array flat{};                          // parameter values
    std::map<std::string, Array> state{};  // flat optimizer state, same layout as `flat`
  };
  // The names of the flat state tensors this optimizer keeps (created as zeros).
  virtual std::vector<std::string> state_names() const = 0;
  // The value a state tensor starts at (AdaGrad's initial accumulator); zero by default.
  virtual double state_initial_value(const std::string&) const { return 0; }
  // New flat parameters for one group; updates group.state (new arrays). `step` counts from 1.
  virtual Array update(Group& group, const Array& params, const Array& grads, int64_t step) = 0;
  // The learning rate and weight decay of a group (`fallback`: the optimizer's weight decay).
  double group_lr(const Group& g) const { return lr_ * g.lr_scale; }
  static double group_weight_decay(const Group& g, double fallback) { return g.weight_decay.value_or(fallback); }
  // A factor that changes between steps (learning rate, bias corrections) as a one-element array
  // in `like`'s dtype and device. Fused kernels read such a scalar from memory (KIR LOAD_UNIFORM)
  // instead of baking its value in, so one compiled update kernel serves every step.
  static Array step_scalar(double v, const Array& like);
  // Where an Adam-family update starts (torch.optim's order): the gradient, negated when
  // `maximize`; then the group's weight decay (`weight_decay` unless the group has its own)
  // added to it as wd * params (L2), or with `decoupled` (AdamW's rule) applied to the parameters
  // instead, scaled by 1 - lr * wd. With no weight decay both are the inputs.
  struct Decayed {
    Array grad{}, params{};
  };
  Decayed decayed_gradient(const Group& group, const Array& params, const Array& grad, double weight_decay,
                           bool maximize, bool decoupled) const;

 private:
  void build_groups(std::vector<ParamGroup> param_groups);
  void refresh_flat(Group& g);
  void install_views(Group& g);
  void ensure_state();

  std::vector<Group> groups_;
  std::vector<nn::ParamRef> buffers_;
  double lr_;
  ClipOptions clip_;
  int64_t step_ = 0;
  bool state_ready_ = false;
  Array last_norm_;
};

// Free-standing clipping of a Gradients map (PyTorch's clip_grad_norm_ / clip_grad_value_):
// replaces the gradients of `params` and returns the global norm before clipping.
Array clip_grad_norm(Gradients& grads, const std::vector<nn::ParamRef>& params, double max_norm);
void clip_grad_value(Gradients& grads, const std::vector<nn::ParamRef>& params, double max_value);

}  // namespace ember::optim
