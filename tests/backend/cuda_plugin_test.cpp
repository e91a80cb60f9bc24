// The CUDA plugin through its C table (abi.h), on whatever CUDA device the process has: on a
// machine without a GPU, ctest backend.cuda.emulated points the plugin at the host emulation of
// the driver and NVRTC (tests/backend/fake_cuda/); on a GPU machine scripts/gpu-check.sh runs the
// same tests on the real device. Checked: buffers (bounds, offsets, copies), a kernel's results,
// deferred errors with their launch's tag and the interpreter's wording, the error slab filling
// up (the queue synchronizes and keeps every error in order), and events ordering two queues.
// Without a device the tests skip with the plugin's reason, or fail under
// EMBER_REQUIRE_CUDA_DEVICE=1.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/abi.h"

namespace ember::testing {
namespace {

const ember_backend_v2* cuda_table() {
  static const ember_backend_v2* table = [] () -> const ember_backend_v2* {
    void* lib = dlopen(EMBER_CUDA_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return nullptr;
    auto entry = reinterpret_cast<ember_backend_entry_fn>(dlsym(lib, EMBER_BACKEND_ENTRY_SYMBOL));
    return entry ? entry(EMBER_BACKEND_ABI_VERSION) : nullptr;
  }();
  return table;
}

class CudaPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    t = cuda_table();
    ASSERT_NE(t, nullptr) << "cannot load " << EMBER_CUDA_PLUGIN;
    if (t->device_count() == 0) {
      const char* why = t->no_device_reason ? t->no_device_reason() : "no reason given";
      if (const char* r = std::getenv("EMBER_REQUIRE_CUDA_DEVICE"); r && std::string(r) == "1")
        FAIL() << "EMBER_REQUIRE_CUDA_DEVICE=1 but the CUDA plugin has no device: " << why;
      GTEST_SKIP() << "no CUDA device: " << why;
    }
    ASSERT_EQ(t->queue_create(0, &q, &st), EMBER_OK) << st.message;
  }
  void TearDown() override {
    for (ember_program p : programs) t->program_destroy(p);
    for (ember_buffer b : buffers) t->buffer_free(q, b);
    if (q) t->queue_destroy(q);
  }

  ember_buffer buffer(size_t bytes) {
    ember_buffer b = nullptr;
    EXPECT_EQ(t->buffer_alloc(0, bytes, &b, &st), EMBER_OK) << st.message;
    buffers.push_back(b);
    return b;
  }
  template <class T>
  ember_buffer upload(const std::vector<T>& v) {
    ember_buffer b = buffer(v.size() * sizeof(T));
    EXPECT_EQ(t->buffer_write(q, b, 0, v.data(), v.size() * sizeof(T), &st), EMBER_OK) << st.message;
    return b;
  }
  template <class T>
  std::vector<T> download(ember_buffer b, size_t n, ember_queue on = nullptr) {
    std::vector<T> v(n);
    EXPECT_EQ(t->buffer_read(on ? on : q, b, 0, v.data(), n * sizeof(T), &st), EMBER_OK) << st.message;
    return v;
  }

  // c = a / b over n int32 points (integer division: an error on a zero divisor).
  ember_program divide_program() {
    static const ember_kir_inst insts[] = {
        {EMBER_KIR_LOAD, EMBER_I32, 0, -1, -1, -1, 0, 0, 0, 0},
        {EMBER_KIR_LOAD, EMBER_I32, 0, -1, -1, -1, 1, 0, 0, 0},
        {EMBER_KIR_DIV, EMBER_I32, 0, 0, 1, -1, -1, 0, 0, 0},
        {EMBER_KIR_STORE, EMBER_I32, 0, 2, -1, -1, 2, 0, 0, 0},
    };
    static const uint8_t dtypes[] = {EMBER_I32, EMBER_I32, EMBER_I32};
    const ember_kir_program prog{"divide", 4, insts, 3, dtypes, 0};
    ember_program p = nullptr;
    EXPECT_EQ(t->program_create(0, &prog, &p, &st), EMBER_OK) << st.message;
    programs.push_back(p);
    return p;
  }
  int32_t run(ember_program p, ember_queue on, std::vector<ember_buffer> bufs, int64_t n, uint64_t tag) {
    std::vector<ember_kir_arg> args(bufs.size());
    for (size_t i = 0; i < bufs.size(); ++i) {
      args[i].buffer = bufs[i];
      args[i].strides[0] = 1;
    }
    ember_kir_launch l{};
    l.outer_rank = 1;
    l.shape[0] = n;
    l.n_args = int32_t(args.size());
    l.args = args.data();
    return t->program_run(on, p, &l, tag, &st);
  }

  const ember_backend_v2* t = nullptr;
  ember_queue q = nullptr;
  ember_status st{};
  std::vector<ember_buffer> buffers;
  std::vector<ember_program> programs;
};

TEST_F(CudaPluginTest, BuffersKeepTheirBytesAndRefuseOutOfRangeAccess) {
  std::vector<uint8_t> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 7 + 3);
  ember_buffer a = upload(bytes), b = buffer(1000);
  // b = [a[500..1000), a[0..500)], by two copies at offsets.
  ASSERT_EQ(t->buffer_copy(q, b, 0, a, 500, 500, &st), EMBER_OK) << st.message;
  ASSERT_EQ(t->buffer_copy(q, b, 500, a, 0, 500, &st), EMBER_OK) << st.message;
  std::vector<uint8_t> got(300);
  ASSERT_EQ(t->buffer_read(q, b, 400, got.data(), got.size(), &st), EMBER_OK) << st.message;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], bytes[(400 + i + 500) % 1000]) << i;
  EXPECT_EQ(t->buffer_write(q, a, 995, bytes.data(), 10, &st), EMBER_ERR_INVALID);
  EXPECT_STREQ(st.message, "cuda: write of 10 bytes at 995 into a buffer of 1000");
  EXPECT_EQ(t->buffer_read(q, a, 1001, got.data(), 0, &st), EMBER_ERR_INVALID);
  EXPECT_EQ(t->buffer_copy(q, b, 600, a, 0, 500, &st), EMBER_ERR_INVALID);
}

TEST_F(CudaPluginTest, AFailingKernelIsADeferredErrorWithItsTag) {
  const std::vector<int32_t> a = {7, -7, 9, 100, 5, -2147483647 - 1}, b = {2, 2, 0, -3, 5, -1};
  ember_buffer ga = upload(a), gb = upload(b), gc = buffer(a.size() * 4);
  ember_program p = divide_program();
  ASSERT_EQ(run(p, q, {ga, gb, gc}, int64_t(a.size()), 42), EMBER_OK) << st.message;
  ASSERT_EQ(t->queue_synchronize(q, &st), EMBER_ERR_INVALID);
  EXPECT_EQ(st.tag, 42u);
  EXPECT_STREQ(st.message, "divide: integer division by zero");
  EXPECT_EQ(t->queue_synchronize(q, &st), EMBER_OK) << "the error is returned once";
  // The other points are computed (truncating division; INT_MIN / -1 wraps, as the interpreter).
  const std::vector<int32_t> c = download<int32_t>(gc, a.size());
  EXPECT_EQ(c[0], 3);
  EXPECT_EQ(c[1], -3);
  EXPECT_EQ(c[3], -33);
  EXPECT_EQ(c[4], 1);
  EXPECT_EQ(c[5], -2147483647 - 1);
}

TEST_F(CudaPluginTest, ErrorsOfMoreLaunchesThanTheErrorSlabHoldsAllArriveInOrder) {
  const std::vector<int32_t> a = {6, 8}, ok = {3, 2}, zero = {3, 0};
  ember_buffer ga = upload(a), g_ok = upload(ok), g_zero = upload(zero), gc = buffer(8);
  ember_program p = divide_program();
  const std::vector<int> failing = {3, 1100, 2098};
  for (int i = 0; i < 2100; ++i) {  // past two slabs of 1024
    const bool fail = std::find(failing.begin(), failing.end(), i) != failing.end();
    ASSERT_EQ(run(p, q, {ga, fail ? g_zero : g_ok, gc}, 2, uint64_t(1000 + i)), EMBER_OK) << st.message;
  }
  for (int i : failing) {
    ASSERT_EQ(t->queue_synchronize(q, &st), EMBER_ERR_INVALID) << "launch " << i;
    EXPECT_EQ(st.tag, uint64_t(1000 + i));
    EXPECT_EQ(st.reserved, 0u) << "no error was lost";
  }
  EXPECT_EQ(t->queue_synchronize(q, &st), EMBER_OK) << st.message;
  EXPECT_EQ(download<int32_t>(gc, 2), (std::vector<int32_t>{2, 4}));
}

TEST_F(CudaPluginTest, AnEventOrdersASecondQueueAfterTheFirst) {
  ember_queue q2 = nullptr;
  ASSERT_EQ(t->queue_create(0, &q2, &st), EMBER_OK) << st.message;
  ember_event e = nullptr;
  ASSERT_EQ(t->event_create(0, &e, &st), EMBER_OK) << st.message;
  const int64_t n = 5000;  // several blocks
  std::vector<int32_t> a(n), b(n, 3);
  for (int64_t i = 0; i < n; ++i) a[size_t(i)] = int32_t(i * 9);
  ember_buffer ga = upload(a), gb = upload(b), gc = buffer(n * 4), gd = buffer(n * 4);
  ember_program p = divide_program();
  ASSERT_EQ(run(p, q, {ga, gb, gc}, n, 1), EMBER_OK) << st.message;  // c = a / 3 on q
  ASSERT_EQ(t->event_record(e, q, &st), EMBER_OK) << st.message;
  ASSERT_EQ(t->queue_wait_event(q2, e, &st), EMBER_OK) << st.message;
  ASSERT_EQ(run(p, q2, {gc, gb, gd}, n, 2), EMBER_OK) << st.message;  // d = c / 3 on q2
  ASSERT_EQ(t->event_synchronize(e, &st), EMBER_OK) << st.message;
  EXPECT_EQ(t->event_query(e), 1);
  const std::vector<int32_t> d = download<int32_t>(gd, size_t(n), q2);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(d[size_t(i)], int32_t(i)) << i;
  t->event_destroy(e);
  t->queue_destroy(q2);
}

// c [2, 3, 5] = a [2, 3, 4] b, with b [4, 5] a transposed view of a [5, 4] buffer, broadcast over
// the batch (stride 0); NaN and inf among the operands. Expected: the products summed in f64 and
// rounded once, as the reference backend does.
TEST_F(CudaPluginTest, MatmulRunsOnTheDeviceWithBroadcastAndTransposedOperands) {
  std::vector<float> a(24), bt(20);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 7) - 3) * 0.37f;
  for (size_t i = 0; i < bt.size(); ++i) bt[i] = float(int(i % 5) - 2) * 1.3f;
  a[5] = std::nanf("");  // row (0, 1)
  bt[3] = INFINITY;      // b[3][0]
  ember_buffer ga = upload(a), gb = upload(bt), gc = buffer(30 * 4);
  const ember_tensor_desc in[2] = {
      {ga, 0, EMBER_F32, 3, {2, 3, 4}, {12, 4, 1}},
      {gb, 0, EMBER_F32, 3, {1, 4, 5}, {0, 1, 4}},  // b[k][n] = bt[n * 4 + k]
  };
  const ember_tensor_desc out = {gc, 0, EMBER_F32, 3, {2, 3, 5}, {15, 5, 1}};
  ASSERT_EQ(t->library_call(q, EMBER_LIB_MATMUL, in, 2, &out, 1, nullptr, 9, &st), EMBER_OK) << st.message;
  const std::vector<float> c = download<float>(gc, 30);
  for (int batch = 0; batch < 2; ++batch)
    for (int m = 0; m < 3; ++m)
      for (int n = 0; n < 5; ++n) {
        double want = 0;
        for (int k = 0; k < 4; ++k) want += double(a[size_t(batch * 12 + m * 4 + k)]) * double(bt[size_t(n * 4 + k)]);
        const float got = c[size_t(batch * 15 + m * 5 + n)];
        if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << batch << " " << m << " " << n;
        else EXPECT_EQ(got, float(want)) << batch << " " << m << " " << n;
      }
  EXPECT_TRUE(std::isnan(c[5])) << "NaN in a's row (0, 1)";
}

TEST_F(CudaPluginTest, PropertiesDescribeAGpu) {
  ember_device_properties p{};
  p.struct_size = sizeof p;
  ASSERT_EQ(t->device_properties(0, &p, &st), EMBER_OK) << st.message;
  EXPECT_STREQ(p.kind, "gpu");
  EXPECT_EQ(p.async, 1u);
  EXPECT_EQ(p.host_visible, 0u);
  EXPECT_EQ(p.dtypes, (1u << EMBER_NUM_DTYPES) - 1);
  EXPECT_GT(p.memory_total, 0u);
  EXPECT_NE(std::string(p.name).find("(sm_"), std::string::npos) << p.name;
  // Every KIR instruction; of the library calls matmul (the others take the host fallback for now).
  EXPECT_EQ(t->supports_op(0, EMBER_SUPPORT_KIR, EMBER_KIR_ACC_ARGMAX, EMBER_BF16), 1);
  EXPECT_EQ(t->supports_op(0, EMBER_SUPPORT_LIBRARY, EMBER_LIB_MATMUL, EMBER_F32), 1);
  EXPECT_EQ(t->supports_op(0, EMBER_SUPPORT_LIBRARY, EMBER_LIB_CONV2D, EMBER_F32), 0);
  EXPECT_EQ(t->no_device_reason(), nullptr);
}

}  // namespace
}  // namespace ember::testing
