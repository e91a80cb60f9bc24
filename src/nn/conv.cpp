// Convolution and pooling layers (include/ember/nn/conv.h).
#include "ember/nn/conv.h"

#include "ember/nn/init.h"
#include "nn/json_util.h"

namespace ember::nn {

Conv2d::Conv2d(ConvOptions opts) : options(opts) {
  if (opts.in <= 0 || opts.out <= 0 || opts.groups <= 0 || opts.in % opts.groups || opts.out % opts.groups)
    throw Error(fmt::format("Conv2d: in ({}) and out ({}) must be positive multiples of groups ({})", opts.in,
                            opts.out, opts.groups));
  if (opts.kernel.h <= 0 || opts.kernel.w <= 0)
    throw Error(fmt::format("Conv2d: kernel must be positive, got {}x{}", opts.kernel.h, opts.kernel.w));
  init::InitOptions io{.seed = opts.seed, .dtype = opts.dtype, .device = opts.device};
  Shape wshape{opts.out, opts.in / opts.groups, opts.kernel.h, opts.kernel.w};
  weight = Param<4>(Tensor<4>(init::default_weight(wshape, io)));
  if (opts.bias) {
    if (io.seed) io.seed = *io.seed + 1;
    bias = Param<1>(Tensor<1>(init::default_bias(opts.out, init::fans(wshape).first, io)));
  }
}

Array Conv2d::forward(const Array& x) {
  if (x.rank() != 4 || x.size(1) != options.in)
    throw Error(fmt::format("Conv2d: expected input [N, {}, H, W], got {}", options.in, x.shape().str()));
  ember::Conv2dOptions op{.stride = options.stride, .padding = options.padding, .dilation = options.dilation,
                          .groups = options.groups};
  return bias.defined() ? conv2d(x, weight.array(), bias.array(), op) : conv2d(x, weight.array(), op);
}

std::string Conv2d::config() const {
  const auto& o = options;
  json pad = o.padding.is_same ? json("same") : json{o.padding.top, o.padding.bottom, o.padding.left, o.padding.right};
  return json{{"in", o.in},
              {"out", o.out},
              {"kernel", {o.kernel.h, o.kernel.w}},
              {"stride", {o.stride.h, o.stride.w}},
              {"padding", pad},
              {"dilation", {o.dilation.h, o.dilation.w}},
              {"groups", o.groups},
              {"bias", o.bias},
              {"dtype", std::string(dtype_name(o.dtype))}}
      .dump();
}

static json pool_json(const Pool2dOptions& o) {
  return json{{"kernel", {o.kernel.h, o.kernel.w}},
              {"stride", {o.stride.h, o.stride.w}},
              {"padding", {o.padding.h, o.padding.w}},
              {"count_include_pad", o.count_include_pad}};
}
std::string MaxPool2d::config() const { return pool_json(options).dump(); }
std::string AvgPool2d::config() const { return pool_json(options).dump(); }
std::string AdaptiveAvgPool2d::config() const { return json{{"output", {options.output.h, options.output.w}}}.dump(); }

Array global_avg_pool2d(const Array& x) {
  if (x.rank() != 4) throw Error(fmt::format("global_avg_pool2d: expected [N, C, H, W], got {}", x.shape().str()));
  return mean(x, {2, 3});
}

}  // namespace ember::nn
