// See handfused.inc: -ffast-math lets GCC call glibc libmvec vector math.
#define HANDFUSED_NS handfused_vec
#include "handfused.inc"
