#ifndef OSPREY_SHA256_BLOCKS_H
#define OSPREY_SHA256_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

/// 1 when this CPU has the SHA extensions (SHA-NI, with SSSE3 and SSE4.1) that osprey_sha256_blocks uses.
int osprey_sha256_has_sha_extensions(void);

/// Compresses `blocks` 64-byte blocks at `data` into the SHA-256 state `state` (a..h, FIPS 180-4 word order) with the
/// SHA extensions; call it only when osprey_sha256_has_sha_extensions() is 1 (the Swift compressor is the fallback).
void osprey_sha256_blocks(uint32_t state[8], const uint8_t *data, size_t blocks);

/// FIPS 180-4's 64 round constants K (shared with the Swift compressor).
const uint32_t *osprey_sha256_round_constants(void);

#endif
