#pragma once

// Instruction-set targets of the x86-64 kernels that are compiled once per instruction set and
// chosen at run time (Philox in philox_batch.cc, qsgd, natural). The AVX-512 string is the one
// place that differs between GCC and Clang; both compile the same features, so the paths are
// picked (by internal::BestPhiloxIsa) and vectorised the same way, and give the same bits.

#if defined(__x86_64__) && defined(__GNUC__)
#define EDGESGD_X86_SIMD 1
#else
#define EDGESGD_X86_SIMD 0
#endif

#if EDGESGD_X86_SIMD
// The AVX-512 features internal::BestPhiloxIsa requires before it picks the AVX-512 path.
#if defined(__clang__)
// Clang's target attribute takes no vector width, and under its generic tuning (which the
// attribute keeps) the vectorisers already use 512-bit registers once AVX-512 is available.
#define EDGESGD_AVX512_TARGET "avx512f,avx512vl,avx512bw,avx512dq"
#else
// GCC vectorises only 256 bits wide under AVX-512 unless told otherwise.
#define EDGESGD_AVX512_TARGET "avx512f,avx512vl,avx512bw,avx512dq,prefer-vector-width=512"
#endif
#endif
