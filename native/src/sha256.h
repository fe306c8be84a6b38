/*
 * sha256.h - SHA-256 (FIPS 180-4), for the table file's trailer, template
 * hash and vocabulary hash. Streaming; no global state.
 */
#ifndef CHATPARSE_SHA256_H
#define CHATPARSE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cp_sha256 {
    uint32_t h[8];
    uint64_t total;        /* bytes hashed so far */
    uint8_t block[64];
    size_t fill;           /* bytes in block */
} cp_sha256;

void cp_sha256_init(cp_sha256 *s);
void cp_sha256_update(cp_sha256 *s, const void *data, size_t n);
/* Write the 32-byte digest; s must be re-initialized before reuse. */
void cp_sha256_final(cp_sha256 *s, uint8_t out[32]);
/* One-shot digest of n bytes. */
void cp_sha256_digest(const void *data, size_t n, uint8_t out[32]);

#ifdef __cplusplus
}
#endif

#endif /* CHATPARSE_SHA256_H */
