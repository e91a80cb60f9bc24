// Loops compiled once per instruction set and picked when the plugin loads (GCC's target_clones;
// the library itself is built for the x86-64 baseline): EMBER_CLONES on the function that holds
// the loop, EMBER_BODY on the template bodies it calls, which must be inlined into each clone, as
// GCC compiles an out-of-line body for the baseline only (pool_max.cpp's 3x3 forward ran SSE2 code).
// Clang and other targets get plain functions.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define EMBER_CLONES __attribute__((target_clones("avx512f", "avx2,fma", "default")))
#else
#define EMBER_CLONES
#endif
#define EMBER_BODY __attribute__((always_inline)) inline
