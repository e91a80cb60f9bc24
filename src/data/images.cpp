// Fashion-MNIST, augmentations, the image folder dataset (stb_image) and the default batchers.
#include <stb/stb_image.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <numeric>

#include "ember/data/idx.h"
#include "ember/data/image.h"
#include "ember/data/loader.h"
#include "ember/ops.h"
#include "data/readers_internal.h"
#include "io/read_file.h"

namespace ember::data {

namespace fs = std::filesystem;

// ---- augmentations --------------------------------------------------------------------------------
ImageAugment random_crop(int64_t padding) {
  return [padding](Image& img, Rng& rng) {
    if (padding <= 0) return;
    int64_t dy = int64_t(rng.below(uint64_t(2 * padding + 1))) - padding;
    int64_t dx = int64_t(rng.below(uint64_t(2 * padding + 1))) - padding;
    Image out = img;
    for (int64_t c = 0; c < img.channels; ++c)
      for (int64_t y = 0; y < img.height; ++y)
        for (int64_t x = 0; x < img.width; ++x) {
          int64_t sy = y + dy, sx = x + dx;
          bool inside = sy >= 0 && sy < img.height && sx >= 0 && sx < img.width;
          out.at(c, y, x) = inside ? img.at(c, sy, sx) : 0.0f;
        }
    img = std::move(out);
  };
}

ImageAugment horizontal_flip(double p) {
  return [p](Image& img, Rng& rng) {
    if (rng.uniform() >= p) return;
    for (int64_t c = 0; c < img.channels; ++c)
      for (int64_t y = 0; y < img.height; ++y) {
        float* row = &img.at(c, y, 0);
        std::reverse(row, row + img.width);
      }
  };
}

ImageAugment normalize(std::vector<float> mean, std::vector<float> std) {
  if (mean.empty() || mean.size() != std.size()) throw Error("data::normalize: give one mean and one std per channel");
  return [mean, std](Image& img, Rng&) {
    if (mean.size() != 1 && int64_t(mean.size()) != img.channels)
      throw Error("data::normalize: " + std::to_string(mean.size()) + " means for an image of " +
                  std::to_string(img.channels) + " channels");
    int64_t plane = img.height * img.width;
    for (int64_t c = 0; c < img.channels; ++c) {
      size_t k = mean.size() == 1 ? 0 : size_t(c);
      float m = mean[k], inv = 1.0f / std[k];
      float* p = img.pixels.data() + c * plane;
      for (int64_t i = 0; i < plane; ++i) p[i] = (p[i] - m) * inv;
    }
  };
}

std::shared_ptr<Transformed<LabeledImage>> augment(DatasetPtr<LabeledImage> src, std::vector<ImageAugment> steps,
                                                   uint64_t seed) {
  return transform(
      std::move(src),
      [steps = std::move(steps)](LabeledImage item, Rng& rng) {
        for (const ImageAugment& s : steps) s(item.image, rng);
        return item;
      },
      seed);
}

// ---- Fashion-MNIST ----------------------------------------------------------------------------
const std::vector<std::string>& FashionMnist::class_names() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

std::string FashionMnist::resolve_dir(const FashionMnistOptions& opts) {
  if (!opts.dir.empty()) return opts.dir;
  if (const char* env = std::getenv("EMBER_FASHION_MNIST_DIR"); env && *env) return env;
  return kDefaultDir;
}

namespace {
std::string find_file(const std::string& dir, const std::string& stem) {
  for (const char* ext : {".gz", ""}) {
    std::string p = dir + "/" + stem + ext;
    if (fs::exists(p)) return p;
  }
  throw Error("Fashion-MNIST: " + dir + "/" + stem + ".gz not found. Install Debian's dataset-fashion-mnist package "
              "(sudo apt-get install dataset-fashion-mnist, or run scripts/setup.sh), or point "
              "EMBER_FASHION_MNIST_DIR at a folder holding the four IDX files.");
}
}  // namespace

std::shared_ptr<FashionMnist> FashionMnist::train(FashionMnistOptions opts) {
  std::string dir = resolve_dir(opts);
  return std::make_shared<FashionMnist>(find_file(dir, "train-images-idx3-ubyte"), find_file(dir, "train-labels-idx1-ubyte"));
}
std::shared_ptr<FashionMnist> FashionMnist::test(FashionMnistOptions opts) {
  std::string dir = resolve_dir(opts);
  return std::make_shared<FashionMnist>(find_file(dir, "t10k-images-idx3-ubyte"), find_file(dir, "t10k-labels-idx1-ubyte"));
}

FashionMnist::FashionMnist(const std::string& images_path, const std::string& labels_path) {
  const int64_t num_classes = int64_t(class_names().size());  // MNIST has 10 classes as well
  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);
  if (images.dtype != DType::U8 || images.dims.size() != 3)
    throw Error(images_path + ": expected u8 images of rank 3 [n, h, w]");
  if (labels.dtype != DType::U8 || labels.dims.size() != 1)
    throw Error(labels_path + ": expected u8 labels of rank 1 [n]");
  if (labels.dims[0] != images.dims[0])
    throw Error(images_path + " holds " + std::to_string(images.dims[0]) + " images but " + labels_path + " " +
                std::to_string(labels.dims[0]) + " labels");
  if (images.dims[1] == 0 || images.dims[2] == 0)
    throw Error(images_path + ": images of " + std::to_string(images.dims[1]) + " x " + std::to_string(images.dims[2]) +
                " pixels");
  h_ = images.dims[1];
  w_ = images.dims[2];
  pixels_ = std::move(images.bytes);
  labels_ = labels.values<int64_t>();
  // A label the model has no output for would only fail (or be silently clamped) deep inside a loss.
  for (size_t i = 0; i < labels_.size(); ++i)
    if (labels_[i] < 0 || labels_[i] >= num_classes)
      throw Error(labels_path + ": label " + std::to_string(labels_[i]) + " at index " + std::to_string(i) +
                  " is outside [0, " + std::to_string(num_classes) + ") (the data set has " + std::to_string(num_classes) +
                  " classes)");
}

LabeledImage FashionMnist::get(size_t i) const {
  check_index(i, "FashionMnist");
  LabeledImage s;
  s.image.channels = 1;
  s.image.height = h_;
  s.image.width = w_;
  s.image.pixels.resize(size_t(h_ * w_));
  const uint8_t* p = pixels_.data() + i * size_t(h_ * w_);
  for (size_t k = 0; k < s.image.pixels.size(); ++k) s.image.pixels[k] = float(p[k]) * (1.0f / 255.0f);
  s.label = labels_[i];
  return s;
}

// ---- image folder ----------------------------------------------------------------------------
Image load_image(const std::string& path, int channels) { return detail::load_image(path, channels, detail::kMaxImagePixels); }

Image detail::load_image(const std::string& path, int channels, int64_t max_pixels) {
  if (channels < 0 || channels > 4) throw Error("load_image: channels must be 0 (as stored) to 4, not " + std::to_string(channels));
  std::vector<uint8_t> file = io::detail::read_regular_file(path, "load_image");
  if (file.size() > size_t(INT_MAX)) throw Error(path + ": " + std::to_string(file.size()) + " bytes is too large for the image decoder");
  int w = 0, h = 0, c = 0;
  // Check the size from the header first: a small file can declare (and expand to) gigabytes.
  if (!stbi_info_from_memory(file.data(), int(file.size()), &w, &h, &c))
    throw Error(path + ": cannot decode the image (" + std::string(stbi_failure_reason()) + ")");
  if (int64_t(w) * int64_t(h) > max_pixels)
    throw Error(path + ": " + std::to_string(w) + " x " + std::to_string(h) + " pixels is more than the limit of " +
                std::to_string(max_pixels) + " pixels");
  stbi_uc* data = stbi_load_from_memory(file.data(), int(file.size()), &w, &h, &c, channels);
  if (!data) throw Error(path + ": cannot decode the image (" + std::string(stbi_failure_reason()) + ")");
  Image img;
  img.channels = channels ? channels : c;
  img.height = h;
  img.width = w;
  img.pixels.resize(size_t(img.channels) * size_t(h) * size_t(w));
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < img.channels; ++k)
        img.at(k, y, x) = float(data[(y * w + x) * img.channels + k]) * (1.0f / 255.0f);
  stbi_image_free(data);
  return img;
}

ImageFolder::ImageFolder(const std::string& root, ImageFolderOptions opts) : opts_(opts) {
  if (!fs::is_directory(root)) throw Error("ImageFolder: " + root + " is not a folder");
  if (opts.channels != 0 && opts.channels != 1 && opts.channels != 3 && opts.channels != 4)
    throw Error("ImageFolder: channels must be 0 (as stored), 1, 3 or 4");
  if (opts.height < 0 || opts.width < 0 ||
      (opts.height > 0 && opts.width > 0 && opts.height > detail::kMaxImagePixels / opts.width))
    throw Error("ImageFolder: height " + std::to_string(opts.height) + " and width " + std::to_string(opts.width) +
                " must be >= 0 and give at most " + std::to_string(detail::kMaxImagePixels) + " pixels");
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) classes_.push_back(e.path().filename().string());
  std::sort(classes_.begin(), classes_.end());
  const std::vector<std::string> exts = {".png", ".jpg", ".jpeg", ".bmp", ".gif"};
  for (size_t k = 0; k < classes_.size(); ++k) {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(fs::path(root) / classes_[k])) {
      std::string ext = e.path().extension().string();
      std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
      if (e.is_regular_file() && std::find(exts.begin(), exts.end(), ext) != exts.end()) files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    for (auto& f : files) {
      files_.push_back(f);
      labels_.push_back(int64_t(k));
    }
  }
  if (files_.empty()) throw Error("ImageFolder: no images (png, jpg, bmp, gif) in the class folders of " + root);
}

LabeledImage ImageFolder::get(size_t i) const {
  check_index(i, "ImageFolder");
  LabeledImage s;
  s.image = load_image(files_[i], opts_.channels);
  s.label = labels_[i];
  if (opts_.height > 0 && opts_.width > 0 && (s.image.height != opts_.height || s.image.width != opts_.width)) {
    Image r;
    r.channels = s.image.channels;
    r.height = opts_.height;
    r.width = opts_.width;
    r.pixels.resize(size_t(r.channels * r.height * r.width));
    for (int64_t c = 0; c < r.channels; ++c)
      for (int64_t y = 0; y < r.height; ++y)
        for (int64_t x = 0; x < r.width; ++x)
          r.at(c, y, x) = s.image.at(c, y * s.image.height / r.height, x * s.image.width / r.width);
    s.image = std::move(r);
  }
  return s;
}

// ---- batchers ------------------------------------------------------------------------------
ImageBatch Collate<LabeledImage>::operator()(std::vector<LabeledImage>& items, Device device) const {
  if (items.empty()) throw Error("Collate: empty batch");
  const Image& first = items[0].image;
  size_t plane = first.pixels.size();
  std::vector<float> pixels(items.size() * plane);
  std::vector<int64_t> labels(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const Image& im = items[i].image;
    if (im.channels != first.channels || im.height != first.height || im.width != first.width)
      throw Error("Collate: images of different sizes in one batch ([" + std::to_string(first.channels) + ", " +
                  std::to_string(first.height) + ", " + std::to_string(first.width) + "] and [" +
                  std::to_string(im.channels) + ", " + std::to_string(im.height) + ", " + std::to_string(im.width) +
                  "]); give ImageFolder a size");
    std::copy(im.pixels.begin(), im.pixels.end(), pixels.begin() + long(i * plane));
    labels[i] = items[i].label;
  }
  int64_t n = int64_t(items.size());
  return {Tensor<4>(from_vector(pixels, Shape{n, first.channels, first.height, first.width}, device)),
          Tensor<1, Int>(from_vector(labels, Shape{n}, device))};
}

RowBatch Collate<Row>::operator()(std::vector<Row>& items, Device device) const {
  if (items.empty()) throw Error("Collate: empty batch");
  size_t nf = items[0].features.size(), nt = items[0].targets.size();
  std::vector<float> x, y;
  x.reserve(items.size() * nf);
  y.reserve(items.size() * nt);
  for (const Row& r : items) {
    if (r.features.size() != nf || r.targets.size() != nt) throw Error("Collate: rows of different lengths in one batch");
    x.insert(x.end(), r.features.begin(), r.features.end());
    y.insert(y.end(), r.targets.begin(), r.targets.end());
  }
  int64_t n = int64_t(items.size());
  return {Tensor<2>(from_vector(x, Shape{n, int64_t(nf)}, device)), Tensor<2>(from_vector(y, Shape{n, int64_t(nt)}, device))};
}

std::vector<size_t> epoch_order(size_t n, bool shuffle, uint64_t seed, uint64_t epoch) {
  if (shuffle) return permutation(n, mix64(seed) + epoch);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  return order;
}

}  // namespace ember::data
