/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: CRC-64/NVME, the guard of the EXT-DIF (CRC64) formats.
 *
 * Polynomial 0xad93d23594c93659, reflected, init and xorout all ones;
 * check value (ASCII "123456789") 0xae8b14860a799888.  isa-l 2.30 does not
 * have it (isa-l >= 2.31 calls it crc64_rocksoft_refl and is used when
 * configure finds it), so this file provides a carry-less-multiply
 * (PCLMULQDQ) folding implementation and its AVX-512 VPCLMULQDQ version,
 * chosen at run time when the CPU has them, with a portable table-driven
 * fallback.  No I/O, no state beyond constant tables.
 */
#ifndef STABLEDIF_CRC64_H
#define STABLEDIF_CRC64_H

#include <stddef.h>
#include <stdint.h>

/* CRC-64/NVME of LEN bytes at BUF, continuing from CRC (pass 0 to start;
 * the init/xorout inversions are applied inside, as isa-l does, so
 * crc64_nvme(crc64_nvme(0, a, n), b, m) is the CRC of a followed by b). */
uint64_t crc64_nvme (uint64_t crc, const void *buf, size_t len);

/* The implementations behind crc64_nvme, exposed for tests and benchmarks.
 * crc64_nvme_bitwise is the one-bit-at-a-time reference; crc64_nvme_table
 * is the portable fallback; crc64_nvme_clmul uses PCLMULQDQ and must only
 * be called when crc64_nvme_have_clmul() is true; crc64_nvme_vpclmul is its
 * 512-bit version (AVX-512 VPCLMULQDQ) and must only be called when
 * crc64_nvme_have_vpclmul() is true.  crc64_nvme uses the widest one the
 * CPU has. */
uint64_t crc64_nvme_bitwise (uint64_t crc, const void *buf, size_t len);
uint64_t crc64_nvme_table (uint64_t crc, const void *buf, size_t len);
uint64_t crc64_nvme_clmul (uint64_t crc, const void *buf, size_t len);
int crc64_nvme_have_clmul (void);
uint64_t crc64_nvme_vpclmul (uint64_t crc, const void *buf, size_t len);
int crc64_nvme_have_vpclmul (void);

#endif /* STABLEDIF_CRC64_H */
