// Containers: Sequential (a chain of modules of any types, each with forward(const Array&)) and
// ModuleList<M> (an indexable list of one module type). Parameters are named by position
// ("0.weight", "1.bias"), as in PyTorch, so state dicts line up with torch.nn.Sequential.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "ember/nn/module.h"

namespace ember::nn {

template <class M>
concept ArrayForward = std::derived_from<M, Module> && requires(M& m, const Array& x) {
  { m.forward(x) } -> std::convertible_to<Array>;
};

class Sequential : public Module {
 public:
  Sequential() = default;
  template <ArrayForward... M>
  explicit Sequential(M... modules) {
    (push_back(std::move(modules)), ...);
  }
  // Appends a module; the Sequential keeps its own copy (sharing the module's parameters).
  template <ArrayForward M>
  Sequential& push_back(M module) {
    auto ptr = std::make_shared<M>(std::move(module));
    items_.push_back({ptr, [raw = ptr.get()](const Array& x) { return Array(raw->forward(x)); }});
    return *this;
  }
  size_t size() const { return items_.size(); }
  Module& operator[](size_t i) { return *items_.at(i).module; }
  // The i-th module as its concrete type (throws if it has another type).
  template <class M>
  M& at(size_t i) {
    auto* m = dynamic_cast<M*>(items_.at(i).module.get());
    if (!m) throw Error("Sequential::at: module " + std::to_string(i) + " has another type");
    return *m;
  }

  void visit(Visitor& v) override {
    for (size_t i = 0; i < items_.size(); ++i) v.module(std::to_string(i), *items_[i].module);
  }
  // The built-in layers inside report errors at the line that called the Sequential (their own
  // call lines are in this header); modules written in the user's files keep their own lines.
  Array forward(const Array& x, Loc loc = Loc::current()) {
    UserCall call("Sequential", loc);
    Array h = x;
    for (auto& item : items_) h = item.forward(h);
    return h;
  }
  Array operator()(const Array& x, Loc loc = Loc::current()) { return forward(x, loc); }
  // Typed: same rank in and out, or name the output rank: seq.forward<2>(x).
  template <int D>
  Tensor<D> operator()(const Tensor<D>& x, Loc loc = Loc::current()) {
    return Tensor<D>(forward(x.array(), loc));
  }
  template <int Out, int In>
  Tensor<Out> forward(const Tensor<In>& x, Loc loc = Loc::current()) {
    return Tensor<Out>(forward(x.array(), loc));
  }
  std::string type_name() const override { return "Sequential"; }
  std::string config() const override;

 private:
  struct Item {
    std::shared_ptr<Module> module{};
    std::function<Array(const Array&)> forward;
  };
  std::vector<Item> items_;
};

template <class M>
  requires std::derived_from<M, Module>
class ModuleList : public Module {
 public:
  ModuleList() = default;
  explicit ModuleList(std::vector<M> items) : items_(std::move(items)) {}
  ModuleList& push_back(M m) {
    items_.push_back(std::move(m));
    return *this;
  }
  size_t size() const { return items_.size(); }
  M& operator[](size_t i) { return items_.at(i); }
  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }
  void visit(Visitor& v) override {
    for (size_t i = 0; i < items_.size(); ++i) v.module(std::to_string(i), items_[i]);
  }
  std::string type_name() const override { return "ModuleList"; }

 private:
  std::vector<M> items_;
};

}  // namespace ember::nn
