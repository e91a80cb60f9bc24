// See handfused.inc: scalar glibc math per element.
#define HANDFUSED_NS handfused_scalar
#include "handfused.inc"
