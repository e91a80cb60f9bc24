// The Upsample layer (include/ember/nn/upsample.h), which runs interpolate() (src/ops/nn_resample.cpp).
#include "ember/nn/upsample.h"
#include "nn/layer_error.h"

#include <cmath>
#include <optional>

#include "nn/json_util.h"

namespace ember::nn {

namespace {
bool is_nearest(InterpolateMode m) { return m == InterpolateMode::Nearest || m == InterpolateMode::NearestExact; }
std::string sizes_text(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }
std::string scales_text(const std::vector<double>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }
}  // namespace

// ---- Upsample -----------------------------------------------------------------------------------
Upsample::Upsample(InterpolateOptions opts) : options(std::move(opts)) {
  const bool has_size = !options.size.empty(), has_scale = !options.scale_factor.empty();
  if (has_size == has_scale)
    throw nn_error(fmt::format("Upsample: give exactly one of size ({}) and scale_factor ({})", sizes_text(options.size),
                            scales_text(options.scale_factor)));
  if (options.align_corners && is_nearest(options.mode))
    throw nn_error(fmt::format("Upsample: align_corners only applies to the linear modes, not '{}'",
                            interpolate_mode_name(options.mode)));
}

}  // namespace ember::nn

// InterpolateOptions belongs to interpolate() (ember/ops_nn.h); its JSON form is the Upsample
// layer's config.
namespace ember {

using nn::json;

std::string InterpolateOptions::to_json() const {
  json j{{"size", size},
         {"scale_factor", scale_factor},
         {"mode", interpolate_mode_name(mode)},
         {"align_corners", align_corners},
         {"recompute_scale_factor", recompute_scale_factor}};
  return j.dump();
}

InterpolateOptions InterpolateOptions::from_json(const std::string& text) {
  json j = nn::parse_json(text, "InterpolateOptions");
  InterpolateOptions o;
  if (j.contains("size") && j["size"].is_number()) o.size = {j["size"].get<int64_t>()};
  else nn::read_field(j, "size", o.size);
  if (j.contains("scale_factor") && j["scale_factor"].is_number()) o.scale_factor = {j["scale_factor"].get<double>()};
  else nn::read_field(j, "scale_factor", o.scale_factor);
  if (j.contains("mode")) {
    std::string m;
    nn::read_field(j, "mode", m);
    bool found = false;
    for (InterpolateMode mode : {InterpolateMode::Nearest, InterpolateMode::NearestExact, InterpolateMode::Linear,
                                 InterpolateMode::Bilinear, InterpolateMode::Bicubic})
      if (m == interpolate_mode_name(mode)) {
        o.mode = mode;
        found = true;
      }
    if (!found)
      throw nn::nn_error(fmt::format("config field 'mode': unknown mode '{}' (nearest, nearest-exact, linear, bilinear, bicubic)", m));
  }
  nn::read_field(j, "align_corners", o.align_corners);
  nn::read_field(j, "recompute_scale_factor", o.recompute_scale_factor);
  nn::reject_unknown_keys(j, o.to_json(), "InterpolateOptions");
  return o;
}

}  // namespace ember
