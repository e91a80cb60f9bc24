// Images as dataset items, augmentations, and the image datasets: Fashion-MNIST (the IDX files
// of Debian's dataset-fashion-mnist package) and an image folder (root/<class>/<file>.png|jpg,
// decoded with stb_image).
//
//   auto train = data::FashionMnist::train();            // 60,000 LabeledImage of [1, 28, 28]
//   auto aug = data::augment(train, {data::random_crop(4), data::horizontal_flip(),
//                                    data::normalize({0.2860f}, {0.3530f})}, /*seed=*/1);
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/data/dataset.h"

namespace ember::data {

// A [channels, height, width] image of floats (pixel values in [0, 1] before normalization).
struct Image {
  int64_t channels = 1, height = 0, width = 0;
  std::vector<float> pixels{};  // channel-major (CHW)
  float& at(int64_t c, int64_t y, int64_t x) { return pixels[size_t((c * height + y) * width + x)]; }
  float at(int64_t c, int64_t y, int64_t x) const { return pixels[size_t((c * height + y) * width + x)]; }
};

struct LabeledImage {
  Image image{};
  int64_t label = 0;
};

// ---- augmentations: each changes an image using the random generator it is given -----------------
using ImageAugment = std::function<void(Image&, Rng&)>;
// Pads by `padding` zeros on each side and crops back to the original size at a random offset.
ImageAugment random_crop(int64_t padding);
// Mirrors left-right with probability p.
ImageAugment horizontal_flip(double p = 0.5);
// (x - mean[c]) / std[c] per channel (one value: all channels). Deterministic.
ImageAugment normalize(std::vector<float> mean, std::vector<float> std);
// Applies the augmentations in order; randomness depends on (seed, epoch, index) only.
std::shared_ptr<Transformed<LabeledImage>> augment(DatasetPtr<LabeledImage> src, std::vector<ImageAugment> steps,
                                                   uint64_t seed);

// ---- Fashion-MNIST ----------------------------------------------------------------------------
struct FashionMnistOptions {
  // Folder with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]. Empty: $EMBER_FASHION_MNIST_DIR,
  // else /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist package).
  std::string dir{};
};
class FashionMnist : public Dataset<LabeledImage> {
 public:
  static constexpr const char* kDefaultDir = "/usr/share/datasets/fashion-mnist";
  static const std::vector<std::string>& class_names();  // "T-shirt/top", "Trouser", ...

  // 60,000 training / 10,000 test images. A missing file raises ember::Error naming the path and
  // the package to install.
  static std::shared_ptr<FashionMnist> train(FashionMnistOptions opts = {});
  static std::shared_ptr<FashionMnist> test(FashionMnistOptions opts = {});
  // Images and labels from two IDX files (any MNIST-like pair).
  FashionMnist(const std::string& images_path, const std::string& labels_path);

  size_t size() const override { return labels_.size(); }
  LabeledImage get(size_t i) const override;
  int64_t height() const { return h_; }
  int64_t width() const { return w_; }
  // The resolved data folder for options (see FashionMnistOptions::dir).
  static std::string resolve_dir(const FashionMnistOptions& opts);

 private:
  std::vector<uint8_t> pixels_;
  std::vector<int64_t> labels_;
  int64_t h_ = 0, w_ = 0;
};

// ---- image folder ----------------------------------------------------------------------------
struct ImageFolderOptions {
  int channels = 0;        // 0: the channel count of the first image; 1 (grey) or 3 (RGB) converts
  int64_t height = 0;      // 0: keep the size (all images must then have one size); else resized
  int64_t width = 0;       //    (nearest neighbour)
};
// root/<class name>/<image> with classes sorted by name (label = position). PNG, JPEG, BMP, GIF.
class ImageFolder : public Dataset<LabeledImage> {
 public:
  explicit ImageFolder(const std::string& root, ImageFolderOptions opts = {});
  size_t size() const override { return files_.size(); }
  LabeledImage get(size_t i) const override;  // decodes the file (thread-safe)
  const std::vector<std::string>& classes() const { return classes_; }
  const std::string& path(size_t i) const { return files_.at(i); }

 private:
  std::vector<std::string> classes_, files_;
  std::vector<int64_t> labels_;
  ImageFolderOptions opts_;
};
// Decodes one image file to [channels, h, w] floats in [0, 1] (channels 0: as stored).
Image load_image(const std::string& path, int channels = 0);

}  // namespace ember::data
