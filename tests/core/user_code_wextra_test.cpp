// User code compiled with -Wextra -Werror (tests/CMakeLists.txt sets the flags for this file
// only): every public option struct, initialized with one designated field as a user would,
// must not warn (-Wmissing-field-initializers fires for a member without a default member
// initializer). The list is every `struct ...Options` / `...Masks` / `ParamGroup` of
// include/ember at the time of writing; a new struct belongs here too.
#include <gtest/gtest.h>

#include "ember/ember.h"
#include "ember/dist/data_parallel.h"
#include "ember/dist/in_process.h"
#include "ember/dist/sampler.h"
#include "ember/io/safetensors.h"
#include "ember/optim/grad_scaler.h"
#include "ember/optim/lbfgs.h"
#ifdef EMBER_HAVE_ONNX
#include "ember/onnx/onnx.h"
#endif

namespace {

TEST(UserCodeWarnings, OptionStructsTakeDesignatedInitializersWithoutWarnings) {
  [[maybe_unused]] ember::BackwardOptions o0{.retain_graph = {}};
  [[maybe_unused]] ember::TensorOptions o1{.dtype = {}};
  [[maybe_unused]] ember::AutocastOptions o2{.dtype = {}};
  [[maybe_unused]] ember::data::CsvOptions o3{.targets = {}};
  [[maybe_unused]] ember::data::FashionMnistOptions o4{.dir = {}};
  [[maybe_unused]] ember::data::ImageFolderOptions o5{.channels = {}};
  [[maybe_unused]] ember::data::LoaderOptions o6{.batch_size = {}};
  [[maybe_unused]] ember::dist::DataParallelOptions o7{.bucket_mb = {}};
  [[maybe_unused]] ember::dist::InProcessOptions o8{.size = {}};
  [[maybe_unused]] ember::dist::ShardOptions o9{.rank = {}};
  [[maybe_unused]] ember::io::LoadOptions o10{.strict = {}};
  [[maybe_unused]] ember::nn::LeakyReLUOptions o11{.negative_slope = {}};
  [[maybe_unused]] ember::nn::ELUOptions o12{.alpha = {}};
  [[maybe_unused]] ember::nn::GELUOptions o13{.tanh_approximation = {}};
  [[maybe_unused]] ember::nn::SoftplusOptions o14{.beta = {}};
  [[maybe_unused]] ember::nn::SoftmaxOptions o15{.dim = {}};
  [[maybe_unused]] ember::nn::SwiGLUOptions o16{.dim = {}};
  [[maybe_unused]] ember::nn::PReLUOptions o17{.num_parameters = {}};
  [[maybe_unused]] ember::nn::SdpaOptions o18{.attn_mask = {}};
  [[maybe_unused]] ember::nn::MultiheadAttentionOptions o19{.embed_dim = {}};
  [[maybe_unused]] ember::nn::MhaForwardOptions o20{.key_padding_mask = {}};
  [[maybe_unused]] ember::nn::Conv2dLayerOptions o21{.in = {}};
  [[maybe_unused]] ember::nn::AdaptiveAvgPool2dOptions o22{.output = {}};
  [[maybe_unused]] ember::nn::Conv1dLayerOptions o23{.in = {}};
  [[maybe_unused]] ember::nn::AdaptiveAvgPool1dOptions o24{.output = {}};
  [[maybe_unused]] ember::nn::Conv3dOptions o25{.stride = {}};
  [[maybe_unused]] ember::nn::Conv3dLayerOptions o26{.in = {}};
  [[maybe_unused]] ember::nn::ConvTranspose2dOptions o27{.stride = {}};
  [[maybe_unused]] ember::nn::ConvTranspose1dOptions o28{.stride = {}};
  [[maybe_unused]] ember::nn::ConvTranspose1dLayerOptions o29{.in = {}};
  [[maybe_unused]] ember::nn::ConvTranspose2dLayerOptions o30{.in = {}};
  [[maybe_unused]] ember::nn::DropoutOptions o31{.p = {}};
  [[maybe_unused]] ember::nn::EmbeddingOptions o32{.num = {}};
  [[maybe_unused]] ember::nn::GroupNormOptions o33{.groups = {}};
  [[maybe_unused]] ember::nn::InstanceNormOptions o34{.features = {}};
  [[maybe_unused]] ember::nn::init::InitOptions o35{.seed = {}};
  [[maybe_unused]] ember::nn::LinearOptions o36{.in = {}};
  [[maybe_unused]] ember::nn::FlattenOptions o37{.start_dim = {}};
  [[maybe_unused]] ember::nn::CrossEntropyOptions o38{.weight = {}};
  [[maybe_unused]] ember::nn::NllOptions o39{.weight = {}};
  [[maybe_unused]] ember::nn::BceOptions o40{.weight = {}};
  [[maybe_unused]] ember::nn::KlDivOptions o41{.reduction = {}};
  [[maybe_unused]] ember::nn::BatchNormOptions o42{.features = {}};
  [[maybe_unused]] ember::nn::LayerNormOptions o43{.shape = {}};
  [[maybe_unused]] ember::nn::RMSNormOptions o44{.shape = {}};
  [[maybe_unused]] ember::nn::SinusoidalPositionalEncodingOptions o45{.d_model = {}};
  [[maybe_unused]] ember::nn::RotaryOptions o46{.offset = {}};
  [[maybe_unused]] ember::nn::RotaryEmbeddingOptions o47{.dim = {}};
  [[maybe_unused]] ember::nn::RecurrentCellOptions o48{.input_size = {}};
  [[maybe_unused]] ember::nn::RecurrentOptions o49{.input_size = {}};
  [[maybe_unused]] ember::nn::TransformerLayerOptions o50{.d_model = {}};
  [[maybe_unused]] ember::nn::EncoderMasks o51{.mask = {}};
  [[maybe_unused]] ember::nn::DecoderMasks o52{.tgt_mask = {}};
  [[maybe_unused]] ember::nn::TransformerStackOptions o53{.layer = {}};
  [[maybe_unused]] ember::nn::InterpolateOptions o54{.size = {}};
#ifdef EMBER_HAVE_ONNX
  [[maybe_unused]] ember::onnx::LoadOptions o55{.base_dir = {}};
#endif
  [[maybe_unused]] ember::RandomOptions o56{.seed = {}};
  [[maybe_unused]] ember::RandintOptions o57{.seed = {}};
  [[maybe_unused]] ember::Conv2dOptions o58{.stride = {}};
  [[maybe_unused]] ember::Conv1dOptions o59{.stride = {}};
  [[maybe_unused]] ember::Pool2dOptions o60{.kernel = {}};
  [[maybe_unused]] ember::Pool1dOptions o61{.kernel = {}};
  [[maybe_unused]] ember::FusedAttentionOptions o62{.scale = {}};
  [[maybe_unused]] ember::optim::AdadeltaOptions o63{.lr = {}};
  [[maybe_unused]] ember::optim::AdamOptions o64{.lr = {}};
  [[maybe_unused]] ember::optim::AdamWOptions o65{.lr = {}};
  [[maybe_unused]] ember::optim::AdamaxOptions o66{.lr = {}};
  [[maybe_unused]] ember::optim::NadamOptions o67{.lr = {}};
  [[maybe_unused]] ember::optim::RadamOptions o68{.lr = {}};
  [[maybe_unused]] ember::optim::GradScalerOptions o69{.init_scale = {}};
  [[maybe_unused]] ember::optim::LbfgsOptions o70{.lr = {}};
  [[maybe_unused]] ember::optim::ClipOptions o71{.max_norm = {}};
  [[maybe_unused]] ember::optim::ParamGroup o72{.params = {}};
  [[maybe_unused]] ember::optim::RmspropOptions o73{.lr = {}};
  [[maybe_unused]] ember::optim::AdagradOptions o74{.lr = {}};
  [[maybe_unused]] ember::optim::LionOptions o75{.lr = {}};
  [[maybe_unused]] ember::optim::StepLrOptions o76{.step_size = {}};
  [[maybe_unused]] ember::optim::CosineAnnealingOptions o77{.t_max = {}};
  [[maybe_unused]] ember::optim::WarmupDecayOptions o78{.warmup = {}};
  [[maybe_unused]] ember::optim::MultiStepLrOptions o79{.milestones = {}};
  [[maybe_unused]] ember::optim::ExponentialLrOptions o80{.gamma = {}};
  [[maybe_unused]] ember::optim::LinearLrOptions o81{.start_factor = {}};
  [[maybe_unused]] ember::optim::CosineWarmRestartsOptions o82{.t_0 = {}};
  [[maybe_unused]] ember::optim::OneCycleOptions o83{.max_lr = {}};
  [[maybe_unused]] ember::optim::NoamOptions o84{.d_model = {}};
  [[maybe_unused]] ember::optim::SgdOptions o85{.lr = {}};
  // Compiling is the test; one value read back so the aggregate defaults are the documented ones.
  EXPECT_EQ(ember::optim::SgdOptions{.lr = 0.5}.momentum, 0.0);
}

}  // namespace
