// A port of PyTorch's MNIST example (pytorch/examples, mnist/main.py) on Fashion-MNIST: the same
// network (conv-conv-max pool-dropout-fc-dropout-fc, log-softmax and NLL loss), Adadelta with
// lr 1.0, StepLR with gamma 0.7 after every epoch, the same flags and the same printout. The data
// are Debian's dataset-fashion-mnist (or $EMBER_FASHION_MNIST_DIR), normalized with Fashion-MNIST's
// mean and standard deviation where the original uses MNIST's.
//   ./build/release/bin/example-mnist [--epochs 14] [--limit N] [--batch-size 64] [--lr 1.0] ...
#include <ember/ember.h>

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

using namespace ember;

struct Net : nn::Module {
  nn::Conv2d conv1{{.in = 1, .out = 32, .kernel = 3, .stride = 1}};
  nn::Conv2d conv2{{.in = 32, .out = 64, .kernel = 3, .stride = 1}};
  nn::Dropout dropout1{{.p = 0.25}};
  nn::Dropout dropout2{{.p = 0.5}};
  nn::Linear fc1{{.in = 9216, .out = 128}};
  nn::Linear fc2{{.in = 128, .out = 10}};
  EMBER_MODULE(conv1, conv2, dropout1, dropout2, fc1, fc2)

  Tensor<2> forward(const Tensor<4>& input) {
    Tensor<4> x = conv1(input);
    x = relu(x);
    x = conv2(x);
    x = relu(x);
    x = max_pool2d(x, {.kernel = 2});
    x = dropout1(x);
    Tensor<2> h = x.flatten<2>(1);
    h = fc1(h);
    h = relu(h);
    h = dropout2(h);
    h = fc2(h);
    return nn::log_softmax(h, 1);
  }
};

// The flags of the original (argparse), plus --limit: use the first N training and test images.
struct Args {
  int64_t batch_size = 64;
  int64_t test_batch_size = 1000;
  int64_t epochs = 14;
  double lr = 1.0;
  double gamma = 0.7;
  bool dry_run = false;
  uint64_t seed = 1;
  int64_t log_interval = 10;
  bool save_model = false;
  size_t limit = 0;  // 0: all 60,000 / 10,000
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << flag << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (flag == "--batch-size") a.batch_size = std::stoll(value());
    else if (flag == "--test-batch-size") a.test_batch_size = std::stoll(value());
    else if (flag == "--epochs") a.epochs = std::stoll(value());
    else if (flag == "--lr") a.lr = std::stod(value());
    else if (flag == "--gamma") a.gamma = std::stod(value());
    else if (flag == "--dry-run") a.dry_run = true;
    else if (flag == "--seed") a.seed = std::stoull(value());
    else if (flag == "--log-interval") a.log_interval = std::stoll(value());
    else if (flag == "--save-model") a.save_model = true;
    else if (flag == "--limit") a.limit = std::stoull(value());
    else {
      std::cerr << "usage: example-mnist [--batch-size N] [--test-batch-size N] [--epochs N] [--lr LR]\n"
                   "                     [--gamma G] [--dry-run] [--seed S] [--log-interval N] [--save-model]\n"
                   "                     [--limit N]\n";
      std::exit(flag == "--help" || flag == "-h" ? 0 : 2);
    }
  }
  return a;
}

using ImageLoader = data::DataLoader<data::LabeledImage>;

// train() of the original (ember::train is the Learner's namespace, hence the name).
void train_epoch(const Args& args, Net& model, ImageLoader& train_loader, optim::Optimizer& optimizer, int64_t epoch) {
  model.train();
  int64_t batch_idx = 0, seen = 0;
  const size_t total = train_loader.num_items();
  for (auto& [data, target] : train_loader) {
    Tensor<2> output = model(data);
    Tensor<1> loss = nn::nll_loss(output, target);
    optimizer.step(loss.backward());  // zero_grad, backward and step: gradients are returned, not stored
    seen += data.shape()[0];
    if (batch_idx % args.log_interval == 0) {
      std::printf("Train Epoch: %lld [%lld/%zu (%.0f%%)]\tLoss: %.6f\n", (long long)epoch, (long long)seen, total,
                  100.0 * double(batch_idx) / double(train_loader.size()), loss.item<double>());
      if (args.dry_run) break;
    }
    ++batch_idx;
  }
}

double test(Net& model, ImageLoader& test_loader) {
  model.eval();
  NoGradGuard no_grad;  // torch.no_grad()
  double test_loss = 0;
  int64_t correct = 0;
  for (auto& [data, target] : test_loader) {
    Tensor<2> output = model(data);
    test_loss += nn::nll_loss(output, target, {.reduction = nn::Reduction::Sum}).item<double>();
    Tensor<1, Int> pred = output.argmax(1).squeeze<1>();
    correct += pred.equal(target).to_int().sum().item<int64_t>();
  }
  const double n = double(test_loader.num_items());
  test_loss /= n;
  std::printf("\nTest set: Average loss: %.4f, Accuracy: %lld/%.0f (%.0f%%)\n\n", test_loss, (long long)correct, n,
              100.0 * double(correct) / n);
  return double(correct) / n;
}

int main(int argc, char** argv) {
  // Many small kernels: OpenMP threads that sleep between them keep a shared machine usable (as
  // the ember command does). Read when the CPU backend loads, so set first.
  ::setenv("GOMP_SPINCOUNT", "0", 0);
  Args args = parse_args(argc, argv);
  manual_seed(args.seed);

  // transforms.Normalize with Fashion-MNIST's statistics (the original: MNIST's 0.1307, 0.3081).
  std::vector<data::ImageAugment> transform = {data::normalize({0.2860f}, {0.3530f})};
  auto train_images = data::FashionMnist::train();
  auto test_images = data::FashionMnist::test();
  size_t train_n = args.limit ? std::min(args.limit, train_images->size()) : train_images->size();
  size_t test_n = args.limit ? std::min(args.limit, test_images->size()) : test_images->size();
  auto dataset1 = data::augment(data::take(train_images, train_n), transform, args.seed);
  auto dataset2 = data::augment(data::take(test_images, test_n), transform, args.seed);
  data::DataLoader train_loader(dataset1, {.batch_size = size_t(args.batch_size), .shuffle = true, .workers = 1,
                                           .seed = args.seed});
  data::DataLoader test_loader(dataset2, {.batch_size = size_t(args.test_batch_size), .workers = 1});

  Net model;
  optim::Adadelta optimizer(model, {.lr = args.lr});
  optim::StepLr scheduler(optimizer, {.step_size = 1, .gamma = args.gamma});
  double accuracy = 0;
  for (int64_t epoch = 1; epoch <= args.epochs; ++epoch) {
    train_epoch(args, model, train_loader, optimizer, epoch);
    accuracy = test(model, test_loader);
    scheduler.step();
  }
  if (args.save_model) save(model, "mnist_cnn.safetensors");  // torch.save(model.state_dict(), ...)
  // A trained network is far above chance (10 %); a dry run only checks that everything runs.
  return args.dry_run || accuracy > 0.5 ? 0 : 1;
}
