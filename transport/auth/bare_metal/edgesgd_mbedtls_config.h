/* mbed TLS configuration for edgesgd's bare-metal builds: what the auth layer uses (SHA-256,
 * HMAC through the message-digest layer, constant-time comparison, zeroization) and what the
 * device side of secure aggregation adds (X25519, HKDF, ChaCha20 and ChaCha20-Poly1305), nothing
 * else. An image links only the parts it calls. There is no heap: mbed TLS allocates from a static pool (transport/auth/src/
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
/* Secure aggregation: X25519 on the bignum layer, its blinding fed by the caller (so no DRBG
 * module), and HKDF, ChaCha20, Poly1305 and their AEAD. */
#define MBEDTLS_BIGNUM_C
/* The bignum multiply-accumulate loop in Thumb-2 assembly (UMAAL on cores with the DSP
 * extension, such as the M4): X25519 in about a third of the instructions of the C loop. */
#define MBEDTLS_HAVE_ASM
#define MBEDTLS_ECP_C
#define MBEDTLS_ECP_DP_CURVE25519_ENABLED
#define MBEDTLS_ECP_NO_INTERNAL_RNG
#define MBEDTLS_HKDF_C
#define MBEDTLS_CHACHA20_C
#define MBEDTLS_POLY1305_C
#define MBEDTLS_CHACHAPOLY_C
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
