// Datasets and the loader: combinators, split sizes, order and shuffling determinism across
// worker counts, last-batch handling, errors from workers, augmentations, CSV parsing.
#include <gtest/gtest.h>

#include <ember/ember.h>

#include <set>

namespace ember::data {
namespace {

std::shared_ptr<InMemory<Row>> numbers(int n) {
  std::vector<Row> rows;
  for (int i = 0; i < n; ++i) rows.push_back({{float(i), float(2 * i)}, {float(i % 3)}});
  return in_memory(rows);
}

std::vector<float> first_features(RowBatch& b) {
  auto v = b.inputs.to_vector();
  std::vector<float> out;
  for (size_t i = 0; i < v.size(); i += 2) out.push_back(v[i]);
  return out;
}

TEST(DatasetTest, Combinators) {
  auto ds = numbers(10);
  EXPECT_EQ(ds->size(), 10u);
  EXPECT_THROW(ds->get(10), Error);
  auto doubled = map(ds, [](Row r) { r.features[0] *= 10; return r; });
  EXPECT_EQ(doubled->get(3).features[0], 30.0f);
  auto even = filter(ds, [](const Row& r) { return int(r.features[0]) % 2 == 0; });
  ASSERT_EQ(even->size(), 5u);
  EXPECT_EQ(even->get(4).features[0], 8.0f);
  auto part = partial(ds, 2, 5);
  ASSERT_EQ(part->size(), 3u);
  EXPECT_EQ(part->get(0).features[0], 2.0f);
  EXPECT_THROW(partial(ds, 5, 11), Error);
  EXPECT_EQ(take(ds, 100)->size(), 10u);
  auto both = concat<Row>({take(ds, 3), partial(ds, 7, 10)});
  ASSERT_EQ(both->size(), 6u);
  EXPECT_EQ(both->get(3).features[0], 7.0f);
  auto win = window(ds, 4, 3);
  ASSERT_EQ(win->size(), 3u);  // starts 0, 3, 6
  EXPECT_EQ(win->get(2)[3].features[0], 9.0f);
  auto sh = shuffle(ds, 5);
  std::set<float> seen;
  for (size_t i = 0; i < sh->size(); ++i) seen.insert(sh->get(i).features[0]);
  EXPECT_EQ(seen.size(), 10u);  // a permutation
  EXPECT_EQ(shuffle(ds, 5)->indices(), sh->indices());  // same seed, same order
  EXPECT_NE(shuffle(ds, 6)->indices(), sh->indices());
}

TEST(DatasetTest, SplitSizes) {
  auto ds = numbers(101);
  auto [a, b] = split(ds, 0.9);
  EXPECT_EQ(a->size(), 91u);  // round(90.9)
  EXPECT_EQ(b->size(), 10u);
  EXPECT_EQ(b->get(0).features[0], 91.0f);  // seed 0 keeps the order
  auto [c, d] = split(ds, 0.5, 3);
  EXPECT_EQ(c->size() + d->size(), 101u);
  std::set<float> all;
  for (size_t i = 0; i < c->size(); ++i) all.insert(c->get(i).features[0]);
  for (size_t i = 0; i < d->size(); ++i) all.insert(d->get(i).features[0]);
  EXPECT_EQ(all.size(), 101u);  // disjoint and complete
  EXPECT_THROW(split(ds, 1.5), Error);
}

TEST(LoaderTest, OrderAndLastBatch) {
  auto ds = numbers(10);
  DataLoader keep(ds, {.batch_size = 4});
  EXPECT_EQ(keep.size(), 3u);
  std::vector<size_t> sizes;
  std::vector<float> order;
  for (auto& b : keep) {
    sizes.push_back(size_t(b.inputs.size(0)));
    for (float v : first_features(b)) order.push_back(v);
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{4, 4, 2}));
  EXPECT_EQ(order, (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  DataLoader drop(ds, {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(drop.size(), 2u);
  EXPECT_EQ(drop.num_items(), 8u);
  size_t n = 0;
  for (auto& b : drop) n += size_t(b.inputs.size(0));
  EXPECT_EQ(n, 8u);
}

std::vector<float> epoch_items(size_t workers, uint64_t epoch, uint64_t seed = 11) {
  DataLoader loader(numbers(37), {.batch_size = 5, .shuffle = true, .workers = workers, .prefetch = 2, .seed = seed});
  loader.set_epoch(epoch);
  std::vector<float> out;
  for (auto& b : loader)
    for (float v : first_features(b)) out.push_back(v);
  return out;
}

TEST(LoaderTest, ShufflingIsDeterministicAcrossWorkerCounts) {
  auto ref = epoch_items(0, 0);
  ASSERT_EQ(ref.size(), 37u);
  EXPECT_EQ(std::set<float>(ref.begin(), ref.end()).size(), 37u);
  for (size_t w : {1, 2, 4, 7}) EXPECT_EQ(epoch_items(w, 0), ref) << w << " workers";
  EXPECT_NE(epoch_items(2, 1), ref);  // another epoch, another order
  EXPECT_EQ(epoch_items(3, 1), epoch_items(0, 1));
  EXPECT_NE(epoch_items(0, 0, 12), ref);  // another seed
}

TEST(LoaderTest, EpochsAdvanceAndEarlyBreakIsSafe) {
  DataLoader loader(numbers(20), {.batch_size = 3, .shuffle = true, .workers = 2});
  for (auto& b : loader) {
    (void)b;
    break;  // joins the workers
  }
  EXPECT_EQ(loader.epoch(), 1u);
  size_t batches = 0;
  for (auto& b : loader) batches += b.inputs.size(0) > 0;
  EXPECT_EQ(batches, 7u);
}

TEST(LoaderTest, WorkerErrorsReachTheConsumer) {
  auto bad = map(numbers(10), [](Row r) {
    if (r.features[0] == 6) throw Error("item 6 is broken");
    return r;
  });
  DataLoader loader(bad, {.batch_size = 2, .workers = 2});
  size_t good = 0;
  try {
    for (auto& b : loader) good += size_t(b.inputs.size(0));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("item 6 is broken"), std::string::npos);
  }
  EXPECT_EQ(good, 6u);
}

TEST(AugmentTest, SeededPerEpochAndIndex) {
  std::vector<LabeledImage> imgs;
  for (int i = 0; i < 4; ++i) {
    LabeledImage s;
    s.image = {1, 4, 4, std::vector<float>(16)};
    for (int k = 0; k < 16; ++k) s.image.pixels[size_t(k)] = float(k + 1);
    imgs.push_back(s);
  }
  auto aug = augment(in_memory(imgs), {random_crop(1), horizontal_flip(0.5)}, 9);
  auto a = aug->get(1).image.pixels;
  EXPECT_EQ(aug->get(1).image.pixels, a);  // same epoch and index: same result
  bool changed = false;
  for (uint64_t e = 1; e < 8; ++e) {
    aug->set_epoch(e);
    changed |= aug->get(1).image.pixels != a;
  }
  EXPECT_TRUE(changed);
  Image img{1, 1, 3, {1, 2, 3}};
  Rng rng(0);
  normalize({2}, {0.5})(img, rng);
  EXPECT_EQ(img.pixels, (std::vector<float>{-2, 0, 2}));
  Image flip{1, 1, 3, {1, 2, 3}};
  horizontal_flip(1.0)(flip, rng);
  EXPECT_EQ(flip.pixels, (std::vector<float>{3, 2, 1}));
}

TEST(CsvTest, ParsesAndReportsErrors) {
  auto ds = CsvDataset::parse("a, b ,y\n1,2,3\n4,5.5,-6\n\n", {.targets = {"y"}});
  ASSERT_EQ(ds->size(), 2u);
  EXPECT_EQ(ds->feature_names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ds->get(1).features, (std::vector<float>{4, 5.5f}));
  EXPECT_EQ(ds->get(1).targets, (std::vector<float>{-6}));
  EXPECT_THROW(CsvDataset::parse("a,b\n1\n"), Error);
  EXPECT_THROW(CsvDataset::parse("a,b\n1,x\n"), Error);
  EXPECT_THROW(CsvDataset::parse("a,b\n1,2\n", {.targets = {"z"}}), Error);
  DataLoader loader(ds, {.batch_size = 2});
  for (auto& [x, y] : loader) {
    EXPECT_EQ(x.shape().str(), "[2, 2]");
    EXPECT_EQ(y.shape().str(), "[2, 1]");
  }
}

}  // namespace
}  // namespace ember::data
