/* mbed TLS configuration for edgesgd's bare-metal builds: what the auth layer uses (SHA-256,
 * HMAC through the message-digest layer, constant-time comparison, zeroization) and nothing
 * else. There is no heap: mbed TLS allocates from a static pool (transport/auth/src/
 * bare_metal_pool.cc), and no standard-library function is a default. */
#ifndef EDGESGD_MBEDTLS_CONFIG_H
#define EDGESGD_MBEDTLS_CONFIG_H

#define MBEDTLS_PLATFORM_C
#define MBEDTLS_PLATFORM_MEMORY
#define MBEDTLS_PLATFORM_NO_STD_FUNCTIONS
#define MBEDTLS_MD_C
#define MBEDTLS_SHA256_C
/* The rolled-up SHA-256 loop: about 2 KiB less flash for a modest cost per block. */
#define MBEDTLS_SHA256_SMALLER
/* The static pool's allocator. */
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
void *edgesgd_mbedtls_calloc(size_t count, size_t size);
void edgesgd_mbedtls_free(void *block);
#ifdef __cplusplus
}
#endif
#define MBEDTLS_PLATFORM_CALLOC_MACRO edgesgd_mbedtls_calloc
#define MBEDTLS_PLATFORM_FREE_MACRO edgesgd_mbedtls_free

#include "mbedtls/check_config.h"

#endif /* EDGESGD_MBEDTLS_CONFIG_H */
