// A program that returns from main with work still queued on the CPU device (eval() does not
// wait): the work must finish before the libraries it uses tear down their static state. It
// crashed in oneDNN before the queues drained from a thread_local destructor (realize.cpp,
// register_exit_drain): oneDNN made static objects lazily while the queued matmuls ran, after
// the last exit handler that drains the queues was registered, so they were destroyed first.
// Run by CTest (graph.exit_with_queued_work): exit status 0 (the crash was a SIGSEGV at exit in
// most runs; the products' values are tested elsewhere).

#include "ember/ember.h"

using namespace ember;

int main() {
  Array a = normal({64, 128, 128}, 0, 1, {.seed = 1}).eval();
  Array v = normal({64, 128, 64}, 0, 1, {.seed = 2}).eval();
  Array q = normal({64, 128, 64}, 0, 1, {.seed = 3}).eval();
  Array p = softmax(mul(a, 1.0), 2).eval();
  // Products of several shapes and layouts queued without waiting, then main returns.
  for (int r = 0; r < 20; ++r) matmul(a, v).eval();
  for (int r = 0; r < 20; ++r) matmul(p, v).eval();
  for (int r = 0; r < 20; ++r) matmul(q, transpose(v, 1, 2)).eval();
  const Array vt = contiguous(transpose(v, 1, 2)).eval();
  for (int r = 0; r < 20; ++r) matmul(q, vt).eval();
  return 0;
}
