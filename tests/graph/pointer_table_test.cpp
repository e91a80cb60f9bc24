// PointerTable (src/graph/pointer_table.h): the reusable pointer -> value table of realize, the
// plan cache's key and the backward order. Checked against std::unordered_map on the same keys.
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>
#include <vector>

#include "graph/pointer_table.h"

namespace ember {
namespace {

struct Item {
  int id;
};

TEST(PointerTableTest, InsertFindAndOverwrite) {
  std::vector<Item> items(5);
  PointerTable<Item, int> t;
  EXPECT_EQ(t.find(&items[0]), nullptr) << "an empty table finds nothing";
  auto [v, fresh] = t.insert(&items[0]);
  EXPECT_TRUE(fresh);
  EXPECT_EQ(*v, 0) << "a new value is default-constructed";
  *v = 7;
  auto [again, fresh_again] = t.insert(&items[0]);
  EXPECT_FALSE(fresh_again);
  EXPECT_EQ(*again, 7);
  t[&items[1]] = 9;
  ASSERT_NE(t.find(&items[1]), nullptr);
  EXPECT_EQ(*t.find(&items[1]), 9);
  EXPECT_EQ(*t.find(&items[0]), 7);
  EXPECT_EQ(t.find(&items[2]), nullptr);
  EXPECT_EQ(t.size(), 2u);
}

// Growing rehashes every entry; clearing forgets them all, and a key inserted again after a
// clear starts from a default value, not the forgotten one.
TEST(PointerTableTest, MatchesUnorderedMapThroughGrowthAndClears) {
  std::vector<Item> items(20000);
  std::mt19937 rng(3);
  PointerTable<Item, long> t;
  for (int round = 0; round < 4; ++round) {
    t.clear();
    EXPECT_EQ(t.size(), 0u);
    std::unordered_map<const Item*, long> want;
    const size_t n = round == 0 ? 10 : size_t(5000) * size_t(round);
    for (size_t i = 0; i < 3 * n; ++i) {
      const Item* k = &items[rng() % n];
      long& got = t[k];
      auto [it, fresh] = want.try_emplace(k, 0);
      ASSERT_EQ(got, it->second) << "round " << round << ", a key seen " << (fresh ? "first" : "again");
      got += long(i) + 1;
      it->second += long(i) + 1;
    }
    ASSERT_EQ(t.size(), want.size());
    for (const Item& item : items) {
      auto it = want.find(&item);
      long* got = t.find(&item);
      if (it == want.end()) {
        ASSERT_EQ(got, nullptr) << "round " << round << ": a key never inserted this round is found";
      } else {
        ASSERT_NE(got, nullptr);
        ASSERT_EQ(*got, it->second);
      }
    }
  }
}

TEST(PointerTableTest, ReserveKeepsEntries) {
  std::vector<Item> items(100);
  PointerTable<Item, int> t;
  for (int i = 0; i < 50; ++i) t[&items[size_t(i)]] = i;
  t.reserve(100000);
  for (int i = 0; i < 50; ++i) {
    ASSERT_NE(t.find(&items[size_t(i)]), nullptr);
    EXPECT_EQ(*t.find(&items[size_t(i)]), i);
  }
  EXPECT_EQ(t.find(&items[60]), nullptr);
}

}  // namespace
}  // namespace ember
