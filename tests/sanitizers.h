#pragma once

// EDGESGD_UNDER_ASAN is 1 in AddressSanitizer builds: GCC defines __SANITIZE_ADDRESS__, Clang
// reports the feature through __has_feature instead.
#if defined(__SANITIZE_ADDRESS__)
#define EDGESGD_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EDGESGD_UNDER_ASAN 1
#endif
#endif
#ifndef EDGESGD_UNDER_ASAN
#define EDGESGD_UNDER_ASAN 0
#endif
