/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: CRC-64/NVME (see crc64.h for the contract).
 *
 * Four implementations that must agree bit for bit (tests/test-crc64.c):
 *  - crc64_nvme_bitwise: one bit at a time, the reference;
 *  - crc64_nvme_table:   slicing-by-8 with the tables of crc64-table.h,
 *                        portable, used when the CPU has no PCLMULQDQ;
 *  - crc64_nvme_clmul:   PCLMULQDQ folding, 8 lanes of 16 bytes (128 bytes
 *                        per iteration), then a Barrett reduction;
 *  - crc64_nvme_vpclmul: the same folding, 16 lanes in four 512-bit
 *                        registers (AVX-512 VPCLMULQDQ, 256 bytes per
 *                        iteration), ending with the code of the previous.
 * crc64_nvme picks one at run time, or uses isa-l's crc64_rocksoft_refl when
 * configure found it (isa-l >= 2.31).
 *
 * Notation used by the folding code.  The message is a polynomial over
 * GF(2) whose first bit (bit 0 of the first byte, as the CRC is reflected)
 * has the highest degree.  The CRC is M(x) * x^64 mod P(x) with
 * P(x) = x^64 + 0xad93d23594c93659 (bit i of the constant is x^i).  The
 * init value is applied by XORing the inverted running CRC into the first
 * eight message bytes; xorout by inverting the result.
 *
 * A 128-bit SSE register loaded from 16 message bytes holds a polynomial of
 * degree < 128 with bit k of the register the coefficient of x^(127-k): the
 * low quadword H holds x^127..x^64, the high quadword L holds x^63..x^0.
 * A 64-bit "reflected" constant has bit j for x^(63-j).  The carry-less
 * product of two reflected quadwords has bit k for x^(126-k), i.e. read as
 * a 128-bit register it is the true product times x.  Hence every constant
 * below is x^(n-1) mod P instead of x^n mod P.
 *
 * Folding a register A forward by F bits (so that it can be XORed into the
 * register F bits later in the message):
 *     A * x^F = H * x^(64+F) + L * x^F
 *             = clmul(H, x^(64+F-1) mod P) ^ clmul(L, x^(F-1) mod P)  (mod P)
 * The main loop folds each of 8 lanes by F = 1024 bits; the lanes are then
 * folded into the last one by F = 896, 768, ..., 128; whole 16-byte blocks
 * that remain are folded in by F = 128.  (The 512-bit variant folds 16
 * lanes by F = 2048, then registers by 1536, 1024, 512, then lanes by 384,
 * 256, 128.)
 *
 * Reduction of the last register A to the 64-bit CRC, A * x^64 mod P:
 *     B = H * x^128 + L * x^64 = clmul(H, x^127 mod P) ^ (L as low quadword)
 * then B (degree < 128, B = Bh * x^64 + Bl) mod P by Barrett, exact for
 * polynomials: with mu = floor(x^128 / P) = x^64 + mu',
 *     q = floor(Bh * mu / x^64) = Bh ^ floor(Bh * mu' / x^64)
 *     B mod P = Bl ^ (q * P mod x^64)
 * The shifts by one in the code undo the "times x" of the reflected product.
 * Bytes after the last whole 16-byte block (at most 15) go through the table.
 *
 * The constants were computed with this Python 3 generator (rev64 reverses
 * the 64 bits, turning "bit i is x^i" into the reflected form):
 *
 *   P = (1 << 64) | 0xad93d23594c93659
 *   def xpow_mod(n):                  # x^n mod P
 *       r = 1
 *       for _ in range(n):
 *           r <<= 1
 *           if r >> 64: r ^= P
 *       return r
 *   def rev64(v): return int('{:064b}'.format(v)[::-1], 2)
 *   def polydiv(a, b):                # quotient of a / b
 *       q = 0
 *       while a.bit_length() >= b.bit_length():
 *           s = a.bit_length() - b.bit_length()
 *           q |= 1 << s; a ^= b << s
 *       return q
 *   for n in (2111, 2047, 1599, 1535, 1087, 1023, 959, 895, ..., 191, 127):
 *       print(hex(rev64(xpow_mod(n))))
 *   print(hex(rev64(polydiv(1 << 128, P) ^ (1 << 64))))        # mu'
 *   print(hex(rev64(P ^ (1 << 64))))                          # P'
 */

#include <config.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "crc64.h"
#include "crc64-table.h"

#ifdef HAVE_CRC64_ROCKSOFT_REFL
#include <isa-l/crc64.h>
#endif

#if defined(__x86_64__)
#define CRC64_HAVE_X86 1
#include <immintrin.h>
#else
#define CRC64_HAVE_X86 0
#endif

/* The polynomial, reflected (bit-reversed 0xad93d23594c93659). */
#define CRC64_NVME_POLY_REFL UINT64_C(0x9a6c9329ac4bc9b5)

/* Below this many bytes the folding code is not worth its set-up; it needs
 * at least 128 (one load of all 8 lanes). */
#define CRC64_CLMUL_MIN 128

uint64_t
crc64_nvme_bitwise (uint64_t crc, const void *buf, size_t len)
{
  const unsigned char *p = buf;
  int k;

  crc = ~crc;
  while (len-- > 0) {
    crc ^= *p++;
    for (k = 0; k < 8; k++)
      crc = (crc >> 1) ^ (CRC64_NVME_POLY_REFL & (0 - (crc & 1)));
  }
  return ~crc;
}

/* Eight bytes at P as a little-endian integer, any alignment. */
static inline uint64_t
load_le64 (const unsigned char *p)
{
  uint64_t v;

  memcpy (&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64 (v);
#endif
  return v;
}

/* Advance the raw (already inverted) CRC register C over LEN bytes at P,
 * eight bytes per step (slicing-by-8). */
static uint64_t
table_update (uint64_t c, const unsigned char *p, size_t len)
{
  while (len >= 8) {
    c ^= load_le64 (p);
    c = crc64_nvme_tab[7][c & 0xff] ^
        crc64_nvme_tab[6][(c >> 8) & 0xff] ^
        crc64_nvme_tab[5][(c >> 16) & 0xff] ^
        crc64_nvme_tab[4][(c >> 24) & 0xff] ^
        crc64_nvme_tab[3][(c >> 32) & 0xff] ^
        crc64_nvme_tab[2][(c >> 40) & 0xff] ^
        crc64_nvme_tab[1][(c >> 48) & 0xff] ^
        crc64_nvme_tab[0][c >> 56];
    p += 8;
    len -= 8;
  }
  while (len-- > 0)
    c = crc64_nvme_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  return c;
}

uint64_t
crc64_nvme_table (uint64_t crc, const void *buf, size_t len)
{
  return ~table_update (~crc, buf, len);
}

#if CRC64_HAVE_X86

/* Fold constants, reflected: K(n) = x^(n-1) mod P (see the top comment). */
#define K_1087 UINT64_C(0xa1ca681e733f9c40) /* 8 lanes, F = 1024: H */
#define K_1023 UINT64_C(0x5f852fb61e8d92dc) /*                    L */
#define K_959  UINT64_C(0xd083dd594d96319d) /* lane 0 -> 7, F = 896 */
#define K_895  UINT64_C(0x946588403d4adcbc)
#define K_831  UINT64_C(0x3c255f5ebc414423) /* lane 1 -> 7, F = 768 */
#define K_767  UINT64_C(0x34f5a24e22d66e90)
#define K_703  UINT64_C(0x7b0ab10dd0f809fe) /* lane 2 -> 7, F = 640 */
#define K_639  UINT64_C(0x03363823e6e791e5)
#define K_575  UINT64_C(0x0c32cdb31e18a84a) /* lane 3 -> 7, F = 512 */
#define K_511  UINT64_C(0x62242240ace5045a)
#define K_447  UINT64_C(0xbdd7ac0ee1a4a0f0) /* lane 4 -> 7, F = 384 */
#define K_383  UINT64_C(0xa3ffdc1fe8e82a8b)
#define K_319  UINT64_C(0xb0bc2e589204f500) /* lane 5 -> 7, F = 256 */
#define K_255  UINT64_C(0xe1e0bb9d45d7a44c)
#define K_191  UINT64_C(0xeadc41fd2ba3d420) /* lane 6 -> 7, F = 128 */
#define K_127  UINT64_C(0x21e9761e252621ac) /* also the final H * x^128 */
#define MU_REFL UINT64_C(0x13f67d194d77cfbb) /* mu' = floor(x^128/P) - x^64 */
/* Extra constants of the 512-bit variant. */
#define K_2111 UINT64_C(0x37ccd3e14069cabc) /* 16 lanes, F = 2048: H */
#define K_2047 UINT64_C(0xa043808c0f782663) /*                     L */
#define K_1599 UINT64_C(0x758ee09da263e275) /* zmm 0 -> 3, F = 1536 */
#define K_1535 UINT64_C(0x6d2d13de8038b4ca)

#define CRC64_CLMUL_TARGET __attribute__ ((target ("pclmul,sse4.1")))

/* A folded forward: K holds the constant for the low quadword (H) in its
 * low quadword and the one for the high quadword (L) in its high one. */
CRC64_CLMUL_TARGET static inline __m128i
fold (__m128i a, __m128i k)
{
  return _mm_xor_si128 (_mm_clmulepi64_si128 (a, k, 0x00),
                        _mm_clmulepi64_si128 (a, k, 0x11));
}

/* The pair of constants for a fold by F bits: (H: x^(64+F-1), L: x^(F-1)). */
CRC64_CLMUL_TARGET static inline __m128i
fold_constants (uint64_t kh, uint64_t kl)
{
  return _mm_set_epi64x ((long long) kl, (long long) kh);
}

CRC64_CLMUL_TARGET static inline __m128i
load128 (const unsigned char *p)
{
  return _mm_loadu_si128 ((const __m128i *) p);
}

/* The end of every folding variant: fold the whole 16-byte blocks left at
 * P into X (by F = 128 each), reduce X to the CRC register, and run the
 * last LEN % 16 bytes through the table.  Returns the final CRC. */
CRC64_CLMUL_TARGET static uint64_t
clmul_finish (__m128i x, const unsigned char *p, size_t len)
{
  uint64_t bh, bl, q, slo, shi;
  __m128i k, t;

  k = fold_constants (K_191, K_127);
  while (len >= 16) {
    x = _mm_xor_si128 (fold (x, k), load128 (p));
    p += 16;
    len -= 16;
  }

  /* B = H * x^128 + L * x^64, degree < 128. */
  t = _mm_clmulepi64_si128 (x, _mm_cvtsi64_si128 ((long long) K_127), 0x00);
  t = _mm_xor_si128 (t, _mm_srli_si128 (x, 8));
  bh = (uint64_t) _mm_cvtsi128_si64 (t);
  bl = (uint64_t) _mm_extract_epi64 (t, 1);

  /* Barrett: q = Bh ^ floor(Bh * mu' / x^64); B mod P = Bl ^ (q * P' mod x^64). */
  t = _mm_clmulepi64_si128 (_mm_cvtsi64_si128 ((long long) bh),
                            _mm_cvtsi64_si128 ((long long) MU_REFL), 0x00);
  q = bh ^ ((uint64_t) _mm_cvtsi128_si64 (t) << 1);
  t = _mm_clmulepi64_si128 (_mm_cvtsi64_si128 ((long long) q),
                            _mm_cvtsi64_si128 ((long long) CRC64_NVME_POLY_REFL),
                            0x00);
  slo = (uint64_t) _mm_cvtsi128_si64 (t);
  shi = (uint64_t) _mm_extract_epi64 (t, 1);

  /* The register after the folded bytes; the tail (< 16 bytes) by table. */
  return ~table_update (bl ^ ((shi << 1) | (slo >> 63)), p, len);
}

CRC64_CLMUL_TARGET uint64_t
crc64_nvme_clmul (uint64_t crc, const void *buf, size_t len)
{
  const unsigned char *p = buf;
  __m128i x0, x1, x2, x3, x4, x5, x6, x7, k;

  if (len < CRC64_CLMUL_MIN)
    return ~table_update (~crc, p, len);

  /* The first 128 bytes, with the init value folded into the first 8. */
  x0 = _mm_xor_si128 (load128 (p), _mm_cvtsi64_si128 ((long long) ~crc));
  x1 = load128 (p + 16);
  x2 = load128 (p + 32);
  x3 = load128 (p + 48);
  x4 = load128 (p + 64);
  x5 = load128 (p + 80);
  x6 = load128 (p + 96);
  x7 = load128 (p + 112);
  p += 128;
  len -= 128;

  /* Main loop: every lane moves forward 1024 bits and takes in 16 bytes. */
  k = fold_constants (K_1087, K_1023);
  while (len >= 128) {
    x0 = _mm_xor_si128 (fold (x0, k), load128 (p));
    x1 = _mm_xor_si128 (fold (x1, k), load128 (p + 16));
    x2 = _mm_xor_si128 (fold (x2, k), load128 (p + 32));
    x3 = _mm_xor_si128 (fold (x3, k), load128 (p + 48));
    x4 = _mm_xor_si128 (fold (x4, k), load128 (p + 64));
    x5 = _mm_xor_si128 (fold (x5, k), load128 (p + 80));
    x6 = _mm_xor_si128 (fold (x6, k), load128 (p + 96));
    x7 = _mm_xor_si128 (fold (x7, k), load128 (p + 112));
    p += 128;
    len -= 128;
  }

  /* Fold lanes 0..6 into lane 7, each by its own distance. */
  x7 = _mm_xor_si128 (x7, fold (x0, fold_constants (K_959, K_895)));
  x7 = _mm_xor_si128 (x7, fold (x1, fold_constants (K_831, K_767)));
  x7 = _mm_xor_si128 (x7, fold (x2, fold_constants (K_703, K_639)));
  x7 = _mm_xor_si128 (x7, fold (x3, fold_constants (K_575, K_511)));
  x7 = _mm_xor_si128 (x7, fold (x4, fold_constants (K_447, K_383)));
  x7 = _mm_xor_si128 (x7, fold (x5, fold_constants (K_319, K_255)));
  x7 = _mm_xor_si128 (x7, fold (x6, fold_constants (K_191, K_127)));

  return clmul_finish (x7, p, len);
}

int
crc64_nvme_have_clmul (void)
{
  return __builtin_cpu_supports ("pclmul") && __builtin_cpu_supports ("sse4.1");
}

/* The 512-bit variant: the same folding with four 512-bit registers, i.e.
 * 16 lanes of 128 bits (256 bytes per iteration), using VPCLMULQDQ, which
 * multiplies the four 128-bit lanes of a register at once, and a
 * three-way XOR (VPTERNLOGQ 0x96) to add the two products and the data. */
#define CRC64_VPCLMUL_TARGET \
  __attribute__ ((target ("avx512f,vpclmulqdq,pclmul,sse4.1")))

/* Fold every 128-bit lane of A by the per-lane constants K, add NEXT. */
CRC64_VPCLMUL_TARGET static inline __m512i
fold512 (__m512i a, __m512i k, __m512i next)
{
  return _mm512_ternarylogic_epi64 (_mm512_clmulepi64_epi128 (a, k, 0x00),
                                    _mm512_clmulepi64_epi128 (a, k, 0x11),
                                    next, 0x96);
}

/* The same fold constants in all four lanes. */
CRC64_VPCLMUL_TARGET static inline __m512i
fold_constants512 (uint64_t kh, uint64_t kl)
{
  return _mm512_set_epi64 ((long long) kl, (long long) kh,
                           (long long) kl, (long long) kh,
                           (long long) kl, (long long) kh,
                           (long long) kl, (long long) kh);
}

CRC64_VPCLMUL_TARGET uint64_t
crc64_nvme_vpclmul (uint64_t crc, const void *buf, size_t len)
{
  const unsigned char *p = buf;
  __m512i z0, z1, z2, z3, k;
  __m128i x;

  if (len < 256)
    return crc64_nvme_clmul (crc, p, len);

  /* The first 256 bytes, with the init value folded into the first 8. */
  z0 = _mm512_xor_si512 (_mm512_loadu_si512 (p),
                         _mm512_set_epi64 (0, 0, 0, 0, 0, 0, 0,
                                           (long long) ~crc));
  z1 = _mm512_loadu_si512 (p + 64);
  z2 = _mm512_loadu_si512 (p + 128);
  z3 = _mm512_loadu_si512 (p + 192);
  p += 256;
  len -= 256;

  /* Main loop: every 128-bit lane moves forward 2048 bits. */
  k = fold_constants512 (K_2111, K_2047);
  while (len >= 256) {
    z0 = fold512 (z0, k, _mm512_loadu_si512 (p));
    z1 = fold512 (z1, k, _mm512_loadu_si512 (p + 64));
    z2 = fold512 (z2, k, _mm512_loadu_si512 (p + 128));
    z3 = fold512 (z3, k, _mm512_loadu_si512 (p + 192));
    p += 256;
    len -= 256;
  }

  /* Registers 0..2 into register 3 (by 1536, 1024 and 512 bits), then
   * whole 64-byte blocks into it. */
  z3 = fold512 (z2, fold_constants512 (K_575, K_511), z3);
  z3 = fold512 (z1, fold_constants512 (K_1087, K_1023), z3);
  z3 = fold512 (z0, fold_constants512 (K_1599, K_1535), z3);
  k = fold_constants512 (K_575, K_511);
  while (len >= 64) {
    z3 = fold512 (z3, k, _mm512_loadu_si512 (p));
    p += 64;
    len -= 64;
  }

  /* Lanes 0..2 of register 3 into its lane 3 (by 384, 256, 128 bits): the
   * constants of lane 3 are zero, and lane 3 itself is added as is. */
  k = _mm512_set_epi64 (0, 0, (long long) K_127, (long long) K_191,
                        (long long) K_255, (long long) K_319,
                        (long long) K_383, (long long) K_447);
  z0 = fold512 (z3, k, _mm512_maskz_mov_epi64 (0xc0, z3));
  x = _mm_xor_si128 (_mm_xor_si128 (_mm512_castsi512_si128 (z0),
                                    _mm512_extracti32x4_epi32 (z0, 1)),
                     _mm_xor_si128 (_mm512_extracti32x4_epi32 (z0, 2),
                                    _mm512_extracti32x4_epi32 (z0, 3)));
  return clmul_finish (x, p, len);
}

int
crc64_nvme_have_vpclmul (void)
{
  return crc64_nvme_have_clmul () && __builtin_cpu_supports ("avx512f") &&
    __builtin_cpu_supports ("vpclmulqdq");
}

#else /* !CRC64_HAVE_X86 */

/* No PCLMULQDQ on this architecture: crc64_nvme_have_clmul() and
 * crc64_nvme_have_vpclmul() are false, and crc64_nvme_clmul and
 * crc64_nvme_vpclmul, which must not be called then, compute by table. */
uint64_t
crc64_nvme_clmul (uint64_t crc, const void *buf, size_t len)
{
  return crc64_nvme_table (crc, buf, len);
}

int
crc64_nvme_have_clmul (void)
{
  return 0;
}

uint64_t
crc64_nvme_vpclmul (uint64_t crc, const void *buf, size_t len)
{
  return crc64_nvme_table (crc, buf, len);
}

int
crc64_nvme_have_vpclmul (void)
{
  return 0;
}

#endif /* !CRC64_HAVE_X86 */

uint64_t
crc64_nvme (uint64_t crc, const void *buf, size_t len)
{
#ifdef HAVE_CRC64_ROCKSOFT_REFL
  return crc64_rocksoft_refl (crc, buf, len);
#else
  if (crc64_nvme_have_vpclmul ())
    return crc64_nvme_vpclmul (crc, buf, len);
  if (crc64_nvme_have_clmul ())
    return crc64_nvme_clmul (crc, buf, len);
  return crc64_nvme_table (crc, buf, len);
#endif
}
