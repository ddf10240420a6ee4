/*
 * agent/sha256.h - SHA-256 (FIPS 180-4), for the agent's file transfers.
 *
 * Hand-written on purpose: the agent runs inside sandboxes built from any image, so it is a
 * static program with no dependency but libc, and libc has no SHA-256. The host-side client
 * uses the same code so both ends hash identically without linking a crypto library into
 * the core. Checked against the FIPS 180-4 vectors in tests/unit/test_agent_proto.c.
 */
#ifndef AKS_AGENT_SHA256_H
#define AKS_AGENT_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define AKS_SHA256_LEN 32

typedef struct aks_sha256 {
	uint32_t h[8];
	uint64_t bytes;
	uint8_t block[64];
	size_t fill;
} aks_sha256;

void aks__sha256_init(aks_sha256 *s);
void aks__sha256_update(aks_sha256 *s, const void *data, size_t len);
void aks__sha256_final(aks_sha256 *s, uint8_t out[AKS_SHA256_LEN]);
/* Lower-case hex of a digest into out (65 bytes with the NUL). */
void aks__sha256_hex(const uint8_t digest[AKS_SHA256_LEN], char out[2 * AKS_SHA256_LEN + 1]);

#endif /* AKS_AGENT_SHA256_H */
