/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: CRC-16/T10-DIF of many equal-sized blocks (see crc16.h).
 *
 * Three implementations that must agree bit for bit (tests/test-crc16.c):
 *  - crc16_t10dif_blocks_isal:    isa-l's crc16_t10dif once per block, the
 *                                 reference and the fallback;
 *  - crc16_t10dif_blocks_clmul:   PCLMULQDQ folding of a group of four
 *                                 blocks side by side, one 128-bit
 *                                 register each;
 *  - crc16_t10dif_blocks_vpclmul: AVX-512 VPCLMULQDQ folding of a group of
 *                                 four blocks side by side, one 512-bit
 *                                 register each, the four final Barrett
 *                                 reductions done in one 512-bit register.
 * crc16_t10dif_blocks picks the widest one the CPU has at run time.
 * crc16_t10dif_blocks_copy and its three versions are the same code with
 * a store of every load (a NULL destination in the plain versions, a
 * constant after inlining, leaves no trace of the copy there).  The
 * two folding versions take lengths that are a multiple of 16 and give
 * other lengths, and a lone last block, to isa-l.
 *
 * Why: a single isa-l call over 512 bytes spends about as long setting up
 * and reducing as folding.  Here the blocks of a group share the loop and
 * the constants, and (512-bit version) the lane folds and the reduction
 * are merged; the four independent dependency chains keep the multiplier
 * busy where one block alone would wait for the latency of each fold.
 * Then the number of carry-less multiplications is what counts: the
 * 512-bit version needs two per 64 bytes (the last 64 bytes of a block
 * included) plus two per group for the reductions, close to the least
 * possible.  (Measured on a Zen 4 EPYC, bench/bench-crc: 512-byte blocks
 * about 1.4x, 4096-byte blocks about 1.2x isa-l called per block; two 512-
 * bit registers per block, for more chains, were no faster.)
 *
 * Notation.  The message is a polynomial over GF(2); the CRC is not
 * reflected, so the first bit of the message (bit 7 of the first byte) has
 * the highest degree.  The CRC is M(x) * x^16 mod P(x) with
 * P(x) = x^16 + 0x8bb7 (bit i of a constant is x^i); init 0 and no xorout
 * mean that leading zero bytes do not change the CRC, which the 512-bit
 * version uses to handle lengths that are not a multiple of 64.
 *
 * Bit order.  A 16-byte load puts the first message byte in the lowest
 * byte of the register, but that byte holds the highest degrees.  So every
 * 16 bytes are byte-reversed (PSHUFB) after loading; then register bit k is
 * simply the coefficient of x^k: the high quadword H holds x^127..x^64 and
 * the low quadword L holds x^63..x^0 (within a byte the bits are already
 * in degree order, MSB first).  In this order the carry-less product of two
 * quadwords is the true product (bit k for x^k, degree < 127) -- unlike the
 * reflected CRC-64 of crc64.c, no constant is off by one.
 *
 * Folding a register A forward by F bits (so that it can be XORed into the
 * register F bits later in the message):
 *     A * x^F = H * x^(64+F) + L * x^F
 *             = clmul(H, x^(64+F) mod P) ^ clmul(L, x^F mod P)   (mod P)
 * The constants have degree < 16, so the products have degree < 79 and fit
 * the register.  One 128-bit register per block moves by F = 128 for each
 * 16 bytes; one 512-bit register per block (four 16-byte lanes, the first
 * in lane 0) moves by F = 512 for each 64 bytes.
 *
 * Reduction of the last 128-bit register A to the CRC, A * x^16 mod P:
 *     T = H * x^80 + L * x^16 = clmul(H, x^80 mod P) ^ clmul(L, x^16 mod P)
 * (degree < 79, i.e. a fold by F = 16), then T mod P by Barrett, exact for
 * polynomials of degree < 80: with mu = floor(x^80 / P) = x^64 + mu',
 *     Th = floor(T / x^16)                       (64 bits)
 *     q  = floor(Th * mu / x^64) = Th ^ floor(Th * mu' / x^64)
 *     T mod P = (T ^ q * P) mod x^16 = (T ^ q * 0x8bb7) mod x^16
 * since q * x^16 has no bits below x^16.  The 512-bit version gets T of a
 * block in one step from its last register: lane j (j = 0..3) is folded by
 * F = 384 - 128 * j + 16 (to the end of the block, and the x^16), and the
 * four lanes are XORed; the T of four blocks then share one register for
 * Barrett.
 *
 * The constants were computed with this Python 3 generator:
 *
 *   P = (1 << 16) | 0x8bb7
 *   def xpow_mod(n):                  # x^n mod P
 *       r = 1
 *       for _ in range(n):
 *           r <<= 1
 *           if r >> 16: r ^= P
 *       return r
 *   def polydiv(a, b):                # quotient of a / b
 *       q = 0
 *       while a.bit_length() >= b.bit_length():
 *           s = a.bit_length() - b.bit_length()
 *           q |= 1 << s; a ^= b << s
 *       return q
 *   for n in (576, 512, 464, 400, 336, 272, 208, 144, 192, 128, 80, 16):
 *       print(n, hex(xpow_mod(n)))
 *   print(hex(polydiv(1 << 80, P) ^ (1 << 64)))              # mu'
 */

#include <config.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <isa-l/crc.h>

#include "crc16.h"

#if defined(__x86_64__)
#define CRC16_HAVE_X86 1
#include <immintrin.h>
#else
#define CRC16_HAVE_X86 0
#endif

/* How many blocks are folded side by side.  The last two or three blocks
 * of a call are folded as a smaller group, but a lone block goes to isa-l:
 * its single-buffer code keeps 8 or 16 lanes in flight, where a group of
 * one would wait for the latency of every fold (measured: at 4096 bytes
 * isa-l is a third faster than a group of one; from two blocks on the
 * group is faster). */
#define CRC16_GROUP 4

/* Before every loop over the blocks of a group: unroll it, so that the
 * per-block registers stay in registers instead of an array in memory. */
#define CRC16_EACH_BLOCK _Pragma ("GCC unroll 4")

void
crc16_t10dif_blocks_isal (const void *buf, size_t stride, size_t len,
                          size_t nblocks, uint16_t *out)
{
  const unsigned char *p = buf;
  size_t i;

  for (i = 0; i < nblocks; i++, p += stride)
    out[i] = crc16_t10dif (0, p, len);
}

void
crc16_t10dif_blocks_copy_isal (void *dst, size_t dstride, const void *src,
                               size_t sstride, size_t len, size_t nblocks,
                               uint16_t *out)
{
  unsigned char *d = dst;
  const unsigned char *s = src;
  size_t i;

  /* The CRC of the copy, not of SRC, which may be changing meanwhile (a
   * caller's buffer under policy snapshot): the copy is what the guard
   * must describe, and it is in cache right after memcpy. */
  for (i = 0; i < nblocks; i++, d += dstride, s += sstride) {
    memcpy (d, s, len);
    out[i] = crc16_t10dif (0, d, len);
  }
}

#if CRC16_HAVE_X86

/* Fold constants: K_n = x^n mod P (see the top comment). */
#define K_576 UINT64_C(0xdd31)  /* 512-bit loop, F = 512: H */
#define K_512 UINT64_C(0x1069)  /*                       L */
#define K_464 UINT64_C(0x044c)  /* 512-bit end, lane 0: F = 384 + 16 */
#define K_400 UINT64_C(0xa497)
#define K_336 UINT64_C(0xad18)  /*              lane 1: F = 256 + 16 */
#define K_272 UINT64_C(0xe7b5)
#define K_208 UINT64_C(0x6ee3)  /*              lane 2: F = 128 + 16 */
#define K_144 UINT64_C(0x06df)
#define K_192 UINT64_C(0x1faa)  /* 128-bit loop, F = 128 */
#define K_128 UINT64_C(0xa010)
#define K_80  UINT64_C(0x2d56)  /* A * x^16 (F = 16; lane 3 of the 512-bit */
#define K_16  UINT64_C(0x8bb7)  /* end): H, L; K_16 is also P - x^16 */
#define MU    UINT64_C(0xf65a57f81d33a48a) /* mu' = floor(x^80/P) - x^64 */

/* The body of the entry points, with GROUP the group function of their
 * width: whole groups, then the last two or three blocks as a smaller
 * group, a lone last block to isa-l (see CRC16_GROUP); lengths the
 * folding code does not take go to isa-l.  D is the destination of the
 * copy, or NULL for no copy (a constant in the entry points that do not
 * copy, so that their group code has no trace of it).  (A macro, not a
 * function taking GROUP, so that each group function is inlined with a
 * constant block count under its own target attribute.) */
#define CRC16_BY_GROUPS(group, d, dstride, s, sstride)                  \
  do {                                                                  \
    unsigned char *d_ = (d);                                            \
    const unsigned char *s_ = (s);                                      \
                                                                        \
    if (len == 0 || len % 16 != 0) {                                    \
      if (d_)                                                           \
        crc16_t10dif_blocks_copy_isal (d_, (dstride), s_, (sstride),    \
                                       len, nblocks, out);              \
      else                                                              \
        crc16_t10dif_blocks_isal (s_, (sstride), len, nblocks, out);    \
      return;                                                           \
    }                                                                   \
    for (; nblocks >= CRC16_GROUP; nblocks -= CRC16_GROUP) {            \
      group (d_, (dstride), s_, (sstride), len, CRC16_GROUP, out);      \
      if (d_)                                                           \
        d_ += CRC16_GROUP * (dstride);                                  \
      s_ += CRC16_GROUP * (sstride);                                    \
      out += CRC16_GROUP;                                               \
    }                                                                   \
    switch (nblocks) {                                                  \
    case 3: group (d_, (dstride), s_, (sstride), len, 3, out); break;   \
    case 2: group (d_, (dstride), s_, (sstride), len, 2, out); break;   \
    case 1:                                                             \
      if (d_)                                                           \
        crc16_t10dif_blocks_copy_isal (d_, 0, s_, 0, len, 1, out);      \
      else                                                              \
        out[0] = crc16_t10dif (0, s_, len);                             \
      break;                                                            \
    default: break;                                                     \
    }                                                                   \
  } while (0)

#define CRC16_CLMUL_TARGET __attribute__ ((target ("pclmul,ssse3,sse4.1")))

/* A folded forward: K holds the constant for the high quadword (H) in its
 * high quadword and the one for the low quadword (L) in its low one. */
CRC16_CLMUL_TARGET static inline __m128i
fold (__m128i a, __m128i k)
{
  return _mm_xor_si128 (_mm_clmulepi64_si128 (a, k, 0x00),
                        _mm_clmulepi64_si128 (a, k, 0x11));
}

/* The pair of constants for a fold by F bits: (H: x^(64+F), L: x^F). */
CRC16_CLMUL_TARGET static inline __m128i
fold_constants (uint64_t kh, uint64_t kl)
{
  return _mm_set_epi64x ((long long) kh, (long long) kl);
}

/* 16 message bytes at P as a polynomial (bit k for x^k): byte-reversed.
 * With D not NULL, the 16 bytes loaded are also stored at D: the copy and
 * the CRC then have the same bytes even if P changes meanwhile. */
CRC16_CLMUL_TARGET static inline __m128i
load_msg (const unsigned char *p, unsigned char *d)
{
  const __m128i rev = _mm_set_epi8 (0, 1, 2, 3, 4, 5, 6, 7,
                                    8, 9, 10, 11, 12, 13, 14, 15);
  const __m128i raw = _mm_loadu_si128 ((const __m128i *) p);

  if (d)
    _mm_storeu_si128 ((__m128i *) d, raw);
  return _mm_shuffle_epi8 (raw, rev);
}

/* The CRC of a message whose folded remainder is A: A * x^16 mod P, by a
 * fold by 16 bits and Barrett (see the top comment). */
CRC16_CLMUL_TARGET static inline uint16_t
clmul_reduce (__m128i a)
{
  __m128i t, th, q;

  t = fold (a, fold_constants (K_80, K_16));
  th = _mm_srli_si128 (t, 2);
  q = _mm_clmulepi64_si128 (th, _mm_cvtsi64_si128 ((long long) MU), 0x00);
  q = _mm_xor_si128 (_mm_srli_si128 (q, 8), th);
  t = _mm_xor_si128 (t, _mm_clmulepi64_si128 (q, _mm_cvtsi64_si128
                                              ((long long) K_16), 0x00));
  return (uint16_t) _mm_cvtsi128_si32 (t);
}

/* The address of byte OFF of block B of a copy at D (NULL: no copy). */
#define CRC16_DST(d, dstride, b, off) \
  ((d) ? (d) + (b) * (dstride) + (off) : NULL)

/* The CRCs of NB (2..CRC16_GROUP, a constant after inlining) blocks at P,
 * P + STRIDE, ...  of LEN bytes (a multiple of 16, at least 16), one
 * 128-bit register per block, all moving through the same loop; with D
 * not NULL every block is also copied to D, D + DSTRIDE, ... */
CRC16_CLMUL_TARGET static inline __attribute__ ((always_inline)) void
clmul_group (unsigned char *d, size_t dstride,
             const unsigned char *p, size_t stride, size_t len, size_t nb,
             uint16_t *out)
{
  __m128i x[CRC16_GROUP], k;
  size_t b, off;

  CRC16_EACH_BLOCK
  for (b = 0; b < nb; b++)
    x[b] = load_msg (p + b * stride, CRC16_DST (d, dstride, b, 0));
  k = fold_constants (K_192, K_128);
  for (off = 16; off < len; off += 16)
    CRC16_EACH_BLOCK
    for (b = 0; b < nb; b++)
      x[b] = _mm_xor_si128 (fold (x[b], k),
                            load_msg (p + b * stride + off,
                                      CRC16_DST (d, dstride, b, off)));
  CRC16_EACH_BLOCK
  for (b = 0; b < nb; b++)
    out[b] = clmul_reduce (x[b]);
}

CRC16_CLMUL_TARGET void
crc16_t10dif_blocks_clmul (const void *buf, size_t stride, size_t len,
                           size_t nblocks, uint16_t *out)
{
  CRC16_BY_GROUPS (clmul_group, NULL, 0, buf, stride);
}

CRC16_CLMUL_TARGET void
crc16_t10dif_blocks_copy_clmul (void *dst, size_t dstride, const void *src,
                                size_t sstride, size_t len, size_t nblocks,
                                uint16_t *out)
{
  CRC16_BY_GROUPS (clmul_group, dst, dstride, src, sstride);
}

int
crc16_t10dif_have_clmul (void)
{
  return __builtin_cpu_supports ("pclmul") &&
    __builtin_cpu_supports ("ssse3") && __builtin_cpu_supports ("sse4.1");
}

/* The 512-bit variant.  VPCLMULQDQ multiplies the four 128-bit lanes of a
 * register at once; a three-way XOR (VPTERNLOGQ 0x96) adds the two
 * products and the data; VPSHUFB byte-reverses every lane (AVX512BW). */
#define CRC16_VPCLMUL_TARGET \
  __attribute__ ((target ("avx512f,avx512bw,vpclmulqdq,pclmul,ssse3,sse4.1")))

/* Fold every 128-bit lane of A by the per-lane constants K, add NEXT. */
CRC16_VPCLMUL_TARGET static inline __m512i
fold512 (__m512i a, __m512i k, __m512i next)
{
  return _mm512_ternarylogic_epi64 (_mm512_clmulepi64_epi128 (a, k, 0x00),
                                    _mm512_clmulepi64_epi128 (a, k, 0x11),
                                    next, 0x96);
}

/* The same fold constants in all four lanes. */
CRC16_VPCLMUL_TARGET static inline __m512i
fold_constants512 (uint64_t kh, uint64_t kl)
{
  return _mm512_set_epi64 ((long long) kh, (long long) kl,
                           (long long) kh, (long long) kl,
                           (long long) kh, (long long) kl,
                           (long long) kh, (long long) kl);
}

/* 64 bytes at P, stored at D too unless D is NULL (see load_msg). */
CRC16_VPCLMUL_TARGET static inline __m512i
load512 (const unsigned char *p, unsigned char *d)
{
  const __m512i raw = _mm512_loadu_si512 (p);

  if (d)
    _mm512_storeu_si512 (d, raw);
  return raw;
}

/* Byte-reverse every 16-byte lane (see "Bit order"). */
CRC16_VPCLMUL_TARGET static inline __m512i
rev512 (__m512i z)
{
  const __m512i rev = _mm512_broadcast_i32x4
    (_mm_set_epi8 (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));

  return _mm512_shuffle_epi8 (z, rev);
}

/* The CRCs of NB (2..CRC16_GROUP, a constant after inlining) blocks at P,
 * P + STRIDE, ...  of LEN bytes (a multiple of 16, at least 16), one
 * 512-bit register per block.  A LEN that is not a multiple of 64 starts
 * with zeros: the first LEN % 64 bytes go to the last lanes of the first
 * register (an expanding load, which reads only those bytes), the lanes
 * before them are zero -- leading zeros do not change the CRC.  With D
 * not NULL every block is also copied to D, D + DSTRIDE, ...  (the head
 * by a compressing store of the same lanes). */
CRC16_VPCLMUL_TARGET static inline __attribute__ ((always_inline)) void
vpclmul_group (unsigned char *d, size_t dstride,
               const unsigned char *p, size_t stride, size_t len, size_t nb,
               uint16_t *out)
{
  const size_t head = len % 64;
  __m512i z[CRC16_GROUP], k, x01, x23, t, th, q;
  uint16_t w[8];
  size_t b, off;

  if (head != 0) {
    const __mmask8 m = (__mmask8) (0xff00u >> (head / 8));

    CRC16_EACH_BLOCK
    for (b = 0; b < nb; b++) {
      z[b] = _mm512_maskz_expandloadu_epi64 (m, p + b * stride);
      if (d)
        _mm512_mask_compressstoreu_epi64 (d + b * dstride, m, z[b]);
      z[b] = rev512 (z[b]);
    }
    off = head;
  }
  else {
    CRC16_EACH_BLOCK
    for (b = 0; b < nb; b++)
      z[b] = rev512 (load512 (p + b * stride, CRC16_DST (d, dstride, b, 0)));
    off = 64;
  }

  /* Main loop: every lane of every block moves forward 512 bits. */
  k = fold_constants512 (K_576, K_512);
  for (; off < len; off += 64)
    CRC16_EACH_BLOCK
    for (b = 0; b < nb; b++)
      z[b] = fold512 (z[b], k,
                      rev512 (load512 (p + b * stride + off,
                                       CRC16_DST (d, dstride, b, off))));

  /* Each lane j of each register forward by 384 - 128 * j bits (to the
   * end of the block) and then by 16 more (the x^16 of the reduction) in
   * one fold: the sum of the four lanes is T of the top comment. */
  k = _mm512_set_epi64 ((long long) K_80, (long long) K_16,
                        (long long) K_208, (long long) K_144,
                        (long long) K_336, (long long) K_272,
                        (long long) K_464, (long long) K_400);
  CRC16_EACH_BLOCK
  for (b = 0; b < nb; b++)
    z[b] = _mm512_xor_si512 (_mm512_clmulepi64_epi128 (z[b], k, 0x00),
                             _mm512_clmulepi64_epi128 (z[b], k, 0x11));
  CRC16_EACH_BLOCK
  for (; b < CRC16_GROUP; b++)
    z[b] = _mm512_setzero_si512 ();

  /* XOR the lanes of each register, block b's sum into lane b of T:
   * x01 = (z0.0^z0.2, z0.1^z0.3, z1.0^z1.2, z1.1^z1.3), likewise x23,
   * T = (x01.0^x01.1, x01.2^x01.3, x23.0^x23.1, x23.2^x23.3). */
  x01 = _mm512_xor_si512 (_mm512_shuffle_i64x2 (z[0], z[1], 0x44),
                          _mm512_shuffle_i64x2 (z[0], z[1], 0xee));
  x23 = _mm512_xor_si512 (_mm512_shuffle_i64x2 (z[2], z[3], 0x44),
                          _mm512_shuffle_i64x2 (z[2], z[3], 0xee));
  t = _mm512_xor_si512 (_mm512_shuffle_i64x2 (x01, x23, 0x88),
                        _mm512_shuffle_i64x2 (x01, x23, 0xdd));

  /* The four Barrett reductions at once, as in clmul_reduce. */
  th = _mm512_bsrli_epi128 (t, 2);
  q = _mm512_clmulepi64_epi128 (th, _mm512_set1_epi64 ((long long) MU),
                                0x00);
  q = _mm512_xor_si512 (_mm512_bsrli_epi128 (q, 8), th);
  t = _mm512_xor_si512 (t, _mm512_clmulepi64_epi128
                        (q, _mm512_set1_epi64 ((long long) K_16), 0x00));

  /* The low 16 bits of every lane: words 0, 2, 4, 6 of the quadwords
   * truncated to words. */
  _mm_storeu_si128 ((__m128i *) w, _mm512_cvtepi64_epi16 (t));
  CRC16_EACH_BLOCK
  for (b = 0; b < nb; b++)
    out[b] = w[2 * b];
}

CRC16_VPCLMUL_TARGET void
crc16_t10dif_blocks_vpclmul (const void *buf, size_t stride, size_t len,
                             size_t nblocks, uint16_t *out)
{
  CRC16_BY_GROUPS (vpclmul_group, NULL, 0, buf, stride);
}

CRC16_VPCLMUL_TARGET void
crc16_t10dif_blocks_copy_vpclmul (void *dst, size_t dstride,
                                  const void *src, size_t sstride,
                                  size_t len, size_t nblocks, uint16_t *out)
{
  CRC16_BY_GROUPS (vpclmul_group, dst, dstride, src, sstride);
}

int
crc16_t10dif_have_vpclmul (void)
{
  return crc16_t10dif_have_clmul () && __builtin_cpu_supports ("avx512f") &&
    __builtin_cpu_supports ("avx512bw") &&
    __builtin_cpu_supports ("vpclmulqdq");
}

#else /* !CRC16_HAVE_X86 */

/* No PCLMULQDQ on this architecture: crc16_t10dif_have_clmul() and
 * crc16_t10dif_have_vpclmul() are false, and the four functions, which
 * must not be called then, call the isa-l versions. */
void
crc16_t10dif_blocks_clmul (const void *buf, size_t stride, size_t len,
                           size_t nblocks, uint16_t *out)
{
  crc16_t10dif_blocks_isal (buf, stride, len, nblocks, out);
}

int
crc16_t10dif_have_clmul (void)
{
  return 0;
}

void
crc16_t10dif_blocks_copy_clmul (void *dst, size_t dstride, const void *src,
                                size_t sstride, size_t len, size_t nblocks,
                                uint16_t *out)
{
  crc16_t10dif_blocks_copy_isal (dst, dstride, src, sstride, len, nblocks,
                                 out);
}

void
crc16_t10dif_blocks_copy_vpclmul (void *dst, size_t dstride,
                                  const void *src, size_t sstride,
                                  size_t len, size_t nblocks, uint16_t *out)
{
  crc16_t10dif_blocks_copy_isal (dst, dstride, src, sstride, len, nblocks,
                                 out);
}

void
crc16_t10dif_blocks_vpclmul (const void *buf, size_t stride, size_t len,
                             size_t nblocks, uint16_t *out)
{
  crc16_t10dif_blocks_isal (buf, stride, len, nblocks, out);
}

int
crc16_t10dif_have_vpclmul (void)
{
  return 0;
}

#endif /* !CRC16_HAVE_X86 */

void
crc16_t10dif_blocks (const void *buf, size_t stride, size_t len,
                     size_t nblocks, uint16_t *out)
{
  if (crc16_t10dif_have_vpclmul ())
    crc16_t10dif_blocks_vpclmul (buf, stride, len, nblocks, out);
  else if (crc16_t10dif_have_clmul ())
    crc16_t10dif_blocks_clmul (buf, stride, len, nblocks, out);
  else
    crc16_t10dif_blocks_isal (buf, stride, len, nblocks, out);
}

void
crc16_t10dif_blocks_copy (void *dst, size_t dstride, const void *src,
                          size_t sstride, size_t len, size_t nblocks,
                          uint16_t *out)
{
  if (crc16_t10dif_have_vpclmul ())
    crc16_t10dif_blocks_copy_vpclmul (dst, dstride, src, sstride, len,
                                      nblocks, out);
  else if (crc16_t10dif_have_clmul ())
    crc16_t10dif_blocks_copy_clmul (dst, dstride, src, sstride, len,
                                    nblocks, out);
  else
    crc16_t10dif_blocks_copy_isal (dst, dstride, src, sstride, len,
                                   nblocks, out);
}
