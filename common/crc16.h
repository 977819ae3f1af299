/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: CRC-16/T10-DIF of many equal-sized blocks at once.
 *
 * CRC-16/T10-DIF (polynomial 0x8bb7, init 0, not reflected, no xorout;
 * check value of ASCII "123456789": 0xd0db) is the guard of the T10-DIF
 * formats.  isa-l's crc16_t10dif computes it well over a long buffer, but
 * a guard covers one protection interval (512 or 4096 bytes) and at 512
 * bytes its per-call set-up and final reduction cost about as much as the
 * folding.  crc16_t10dif_blocks computes the CRCs of many blocks in one
 * call: several blocks are folded side by side in one loop and their final
 * reductions are done together.  Carry-less-multiply code (PCLMULQDQ, and
 * AVX-512 VPCLMULQDQ) is chosen at run time; isa-l is the fallback.
 * No I/O, no state beyond constants.
 *
 * crc16_t10dif_blocks_copy does the same while copying the blocks: the
 * 16 or 64 bytes loaded for the CRC are stored to the destination too, so
 * one pass over the source gives both the copy and the guards of exactly
 * the bytes copied (what the DIX layer needs when it snapshots a buffer,
 * joins data into extended blocks or splits them).
 *
 * Use it on data in cache (a buffer just received, copied or read from
 * the store): there it is about 1.4x isa-l per block at 512 bytes.  On
 * data that comes from memory it is slower than isa-l per block (about
 * 8 against 20 GB/s on the development machine; bench-crc --bytes 64M
 * shows it), even with its loads in address order or prefetched, so the
 * client computes the guards of a caller's buffer with isa-l.
 */
#ifndef STABLEDIF_CRC16_H
#define STABLEDIF_CRC16_H

#include <stddef.h>
#include <stdint.h>

/* The CRCs of NBLOCKS blocks of LEN bytes: OUT[i] = crc16_t10dif(0, BUF +
 * i * STRIDE, LEN) for i < NBLOCKS (OUT holds NBLOCKS entries; with
 * NBLOCKS 0 nothing is read or written).  STRIDE >= LEN: the blocks may be
 * packed (STRIDE = LEN) or have something between them, such as the tuple
 * of the extended layout (STRIDE = LEN + 8).  Any LEN works; the fast code
 * takes multiples of 16 (others go to isa-l block by block).  No
 * alignment is needed. */
void crc16_t10dif_blocks (const void *buf, size_t stride, size_t len,
                          size_t nblocks, uint16_t *out);

/* Copy NBLOCKS blocks of LEN bytes from SRC + i * SSTRIDE to DST + i *
 * DSTRIDE and set OUT[i] to the CRC of the bytes copied, which is
 * crc16_t10dif(0, DST + i * DSTRIDE, LEN) afterwards even if the source
 * was changing meanwhile.  Strides and alignment as crc16_t10dif_blocks
 * (DSTRIDE >= LEN too); the destination blocks must not overlap the
 * source blocks; bytes between destination blocks are not written. */
void crc16_t10dif_blocks_copy (void *dst, size_t dstride, const void *src,
                               size_t sstride, size_t len, size_t nblocks,
                               uint16_t *out);

/* The implementations behind crc16_t10dif_blocks, exposed for tests and
 * benchmarks; each gives the same result for every input.
 * crc16_t10dif_blocks_isal calls isa-l's crc16_t10dif once per block (the
 * reference, and the fallback); crc16_t10dif_blocks_clmul uses PCLMULQDQ
 * and must only be called when crc16_t10dif_have_clmul() is true;
 * crc16_t10dif_blocks_vpclmul uses AVX-512 VPCLMULQDQ and must only be
 * called when crc16_t10dif_have_vpclmul() is true.  crc16_t10dif_blocks
 * uses the widest one the CPU has.  The _copy_ functions are the same
 * three behind crc16_t10dif_blocks_copy, with the same conditions
 * (crc16_t10dif_blocks_copy_isal copies each block with memcpy and then
 * calls isa-l over the copy). */
void crc16_t10dif_blocks_isal (const void *buf, size_t stride, size_t len,
                               size_t nblocks, uint16_t *out);
void crc16_t10dif_blocks_clmul (const void *buf, size_t stride, size_t len,
                                size_t nblocks, uint16_t *out);
int crc16_t10dif_have_clmul (void);
void crc16_t10dif_blocks_vpclmul (const void *buf, size_t stride,
                                  size_t len, size_t nblocks, uint16_t *out);
int crc16_t10dif_have_vpclmul (void);
void crc16_t10dif_blocks_copy_isal (void *dst, size_t dstride,
                                    const void *src, size_t sstride,
                                    size_t len, size_t nblocks,
                                    uint16_t *out);
void crc16_t10dif_blocks_copy_clmul (void *dst, size_t dstride,
                                     const void *src, size_t sstride,
                                     size_t len, size_t nblocks,
                                     uint16_t *out);
void crc16_t10dif_blocks_copy_vpclmul (void *dst, size_t dstride,
                                       const void *src, size_t sstride,
                                       size_t len, size_t nblocks,
                                       uint16_t *out);

#endif /* STABLEDIF_CRC16_H */
