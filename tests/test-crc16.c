/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests for common/crc16 (CRC-16/T10-DIF of many blocks).
 *
 * Every implementation of crc16_t10dif_blocks (isa-l per block, PCLMULQDQ
 * folding, its AVX-512 VPCLMULQDQ version, and the dispatching
 * crc16_t10dif_blocks) that this CPU can run must give, for every block,
 * what isa-l's crc16_t10dif gives: for random data, every length 16..4096
 * in steps of 16, the lengths of the protection intervals and their
 * extended blocks, lengths the folding code hands to isa-l, packed and
 * spaced blocks, odd strides, unaligned buffers, and any number of blocks.
 * It must also give the catalogue check value, touch no byte outside the
 * blocks and no entry of OUT past NBLOCKS, and keep the blocks apart.
 * The copying versions (crc16_t10dif_blocks_copy and its three
 * implementations) go through the same inputs: the same CRCs, a copy of
 * every block at the destination (packed blocks to spaced ones and back,
 * at odd addresses), and no destination byte written between or after
 * the blocks.
 */

#include <config.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <check.h>
#include <isa-l/crc.h>

#include "crc16.h"
#include "test-rng.h"

typedef void (*blocks_fn) (const void *, size_t, size_t, size_t,
                           uint16_t *);

/* One implementation under test. */
struct impl {
  const char *name;             /* for failure messages */
  blocks_fn fn;                 /* the function */
};

static const struct impl impls[] = {
  { "isal", crc16_t10dif_blocks_isal },
  { "clmul", crc16_t10dif_blocks_clmul },
  { "vpclmul", crc16_t10dif_blocks_vpclmul },
  { "crc16_t10dif_blocks", crc16_t10dif_blocks },
};
#define NR_IMPLS (sizeof impls / sizeof impls[0])

typedef void (*copy_fn) (void *, size_t, const void *, size_t, size_t,
                         size_t, uint16_t *);

/* One copying implementation under test. */
struct copy_impl {
  const char *name;             /* for failure messages */
  copy_fn fn;                   /* the function */
  blocks_fn plain;              /* its non-copying twin (same condition) */
};

static const struct copy_impl copy_impls[] = {
  { "copy_isal", crc16_t10dif_blocks_copy_isal, crc16_t10dif_blocks_isal },
  { "copy_clmul", crc16_t10dif_blocks_copy_clmul,
    crc16_t10dif_blocks_clmul },
  { "copy_vpclmul", crc16_t10dif_blocks_copy_vpclmul,
    crc16_t10dif_blocks_vpclmul },
  { "crc16_t10dif_blocks_copy", crc16_t10dif_blocks_copy,
    crc16_t10dif_blocks },
};
#define NR_COPY_IMPLS (sizeof copy_impls / sizeof copy_impls[0])

/* Whether implementation I can run on this machine. */
static int
impl_usable (size_t i)
{
  if (impls[i].fn == crc16_t10dif_blocks_clmul)
    return crc16_t10dif_have_clmul ();
  if (impls[i].fn == crc16_t10dif_blocks_vpclmul)
    return crc16_t10dif_have_vpclmul ();
  return 1;
}

/* Whether copying implementation I can run on this machine. */
static int
copy_impl_usable (size_t i)
{
  size_t j;

  for (j = 0; j < NR_IMPLS; j++)
    if (impls[j].fn == copy_impls[i].plain)
      return impl_usable (j);
  return 0;
}


/* OUT gets this many entries more than the call may write, preset to
 * SENTINEL, to see that nothing past NBLOCKS is written. */
#define OUT_SLACK 4
#define SENTINEL 0xa5a5
#define MAX_BLOCKS 17

/* The byte a destination holds where no copy may write. */
#define DST_FILL 0x5a

/* Run every usable copying implementation over NBLOCKS blocks of LEN bytes
 * at BUF, STRIDE apart, into a destination with blocks DSTRIDE apart at an
 * odd address, and compare each CRC with WANT, each copied block with its
 * source, and every other destination byte with DST_FILL. */
static void
check_copies (const unsigned char *buf, size_t stride, size_t len,
              size_t nblocks, size_t dstride, const uint16_t *want)
{
  const size_t skew = (uintptr_t) buf % 7;   /* destination misalignment */
  const size_t span = nblocks ? (nblocks - 1) * dstride + len : 0;
  const size_t size = skew + span + 64;
  unsigned char *dst = malloc (size), *d;
  uint16_t out[MAX_BLOCKS + OUT_SLACK];
  size_t i, b, k;

  ck_assert_ptr_nonnull (dst);
  for (i = 0; i < NR_COPY_IMPLS; i++) {
    if (!copy_impl_usable (i))
      continue;
    memset (dst, DST_FILL, size);
    for (b = 0; b < MAX_BLOCKS + OUT_SLACK; b++)
      out[b] = SENTINEL;
    d = dst + skew;
    copy_impls[i].fn (d, dstride, buf, stride, len, nblocks, out);
    for (b = 0; b < nblocks; b++) {
      ck_assert_msg (out[b] == want[b],
                     "%s: len %zu stride %zu dstride %zu nblocks %zu: "
                     "block %zu: 0x%04x, isa-l 0x%04x", copy_impls[i].name,
                     len, stride, dstride, nblocks, b, out[b], want[b]);
      ck_assert_msg (memcmp (d + b * dstride, buf + b * stride, len) == 0,
                     "%s: len %zu stride %zu dstride %zu nblocks %zu: "
                     "block %zu not copied", copy_impls[i].name, len,
                     stride, dstride, nblocks, b);
    }
    for (; b < MAX_BLOCKS + OUT_SLACK; b++)
      ck_assert_msg (out[b] == SENTINEL,
                     "%s: len %zu nblocks %zu: wrote out[%zu]",
                     copy_impls[i].name, len, nblocks, b);
    for (k = 0; k < size; k++) {
      size_t at = k - skew;
      int inside = k >= skew && at < span && at % dstride < len;

      if (!inside)
        ck_assert_msg (dst[k] == DST_FILL,
                       "%s: len %zu dstride %zu nblocks %zu: wrote byte "
                       "%zd outside the blocks", copy_impls[i].name, len,
                       dstride, nblocks, (ssize_t) k - (ssize_t) skew);
    }
  }
  free (dst);
}

/* Run every usable implementation over NBLOCKS blocks of LEN bytes at BUF,
 * STRIDE apart, and compare each CRC with isa-l's crc16_t10dif of that
 * block; then the copying ones, packed blocks into extended ones (8 bytes
 * between) and anything else into packed ones. */
static void
check_all (const unsigned char *buf, size_t stride, size_t len,
           size_t nblocks)
{
  uint16_t want[MAX_BLOCKS], out[MAX_BLOCKS + OUT_SLACK];
  size_t i, b;

  ck_assert_uint_le (nblocks, MAX_BLOCKS);
  for (b = 0; b < nblocks; b++)
    want[b] = crc16_t10dif (0, buf + b * stride, len);
  for (i = 0; i < NR_IMPLS; i++) {
    if (!impl_usable (i))
      continue;
    for (b = 0; b < MAX_BLOCKS + OUT_SLACK; b++)
      out[b] = SENTINEL;
    impls[i].fn (buf, stride, len, nblocks, out);
    for (b = 0; b < nblocks; b++)
      ck_assert_msg (out[b] == want[b],
                     "%s: len %zu stride %zu nblocks %zu offset %zu: "
                     "block %zu: 0x%04x, isa-l 0x%04x", impls[i].name, len,
                     stride, nblocks, (size_t) ((uintptr_t) buf % 64), b,
                     out[b], want[b]);
    for (; b < MAX_BLOCKS + OUT_SLACK; b++)
      ck_assert_msg (out[b] == SENTINEL,
                     "%s: len %zu nblocks %zu: wrote out[%zu]",
                     impls[i].name, len, nblocks, b);
  }
  check_copies (buf, stride, len, nblocks, stride == len ? len + 8 : len,
                want);
}

/* A random buffer big enough for MAX_BLOCKS blocks of MAXLEN + 32 bytes
 * at an offset up to 63.  Freed by the caller. */
static unsigned char *
random_buffer (size_t maxlen, uint64_t seed)
{
  size_t size = MAX_BLOCKS * (maxlen + 32) + 64;
  unsigned char *buf = malloc (size);

  ck_assert_ptr_nonnull (buf);
  rng_seed (seed);
  rng_fill (buf, size);
  return buf;
}

/* The catalogue check value, also through the folding code: zero bytes
 * in front do not change this CRC (init 0), so "123456789" padded in
 * front to 16, 64, 80 and 4096 bytes must still give 0xd0db. */
START_TEST (test_check_value)
{
  static unsigned char buf[4 * 4096];
  static const size_t lens[] = { 9, 16, 64, 80, 4096 };
  uint16_t out[4 + OUT_SLACK];
  size_t i, l, b;

  ck_assert_uint_eq (crc16_t10dif (0, (const unsigned char *) "123456789",
                                   9), 0xd0db);
  for (l = 0; l < sizeof lens / sizeof lens[0]; l++) {
    memset (buf, 0, sizeof buf);
    for (b = 0; b < 4; b++)
      memcpy (buf + b * lens[l] + lens[l] - 9, "123456789", 9);
    for (i = 0; i < NR_IMPLS; i++) {
      if (!impl_usable (i))
        continue;
      for (b = 0; b < 4; b++)       /* one, and a group of four */
        out[b] = 0;
      impls[i].fn (buf, lens[l], lens[l], 1, out);
      ck_assert_msg (out[0] == 0xd0db, "%s: len %zu, one block: 0x%04x",
                     impls[i].name, lens[l], out[0]);
      impls[i].fn (buf, lens[l], lens[l], 4, out);
      for (b = 0; b < 4; b++)
        ck_assert_msg (out[b] == 0xd0db, "%s: len %zu, block %zu of 4: "
                       "0x%04x", impls[i].name, lens[l], b, out[b]);
    }
  }
}
END_TEST

/* Every multiple of 16 up to 4096, packed, extended (+8, +16) and at an
 * odd stride; 5 blocks (a group and a lone block) and 7 (a group and a
 * group of three). */
START_TEST (test_all_lengths)
{
  enum { MAXLEN = 4096 };
  unsigned char *buf = random_buffer (MAXLEN, 1);
  static const size_t pad[] = { 0, 8, 16, 5 };
  size_t len, s;

  for (len = 16; len <= MAXLEN; len += 16)
    for (s = 0; s < sizeof pad / sizeof pad[0]; s++) {
      check_all (buf + len % 61, len + pad[s], len, 5);
      check_all (buf + len % 59, len + pad[s], len, 7);
    }
  free (buf);
}
END_TEST

/* The lengths of the protection intervals (and of the extended blocks,
 * which a caller might pass by mistake: not multiples of 16) with every
 * block count of interest, several strides and unaligned buffers. */
START_TEST (test_intervals)
{
  static const size_t lens[] = { 16, 48, 64, 80, 512, 520, 4096, 4104 };
  static const size_t counts[] = { 0, 1, 2, 3, 4, 5, 7, 8, 17 };
  static const size_t pad[] = { 0, 8, 16, 1, 7, 24 };
  static const size_t offsets[] = { 0, 1, 3, 8, 13, 32 };
  unsigned char *buf = random_buffer (4104, 2);
  size_t l, c, s, o;

  for (l = 0; l < sizeof lens / sizeof lens[0]; l++)
    for (c = 0; c < sizeof counts / sizeof counts[0]; c++)
      for (s = 0; s < sizeof pad / sizeof pad[0]; s++)
        for (o = 0; o < sizeof offsets / sizeof offsets[0]; o++)
          check_all (buf + offsets[o], lens[l] + pad[s], lens[l], counts[c]);
  free (buf);
}
END_TEST

/* Lengths the folding code gives to isa-l (0, not multiples of 16), and
 * blocks of 64 KiB. */
START_TEST (test_other_lengths)
{
  static const size_t lens[] = { 0, 1, 2, 7, 8, 9, 15, 17, 31, 100, 511,
                                 513, 4095, 4097 };
  static const size_t counts[] = { 1, 2, 4, 5 };
  unsigned char *buf = random_buffer (65536, 3);
  size_t l, c;

  for (l = 0; l < sizeof lens / sizeof lens[0]; l++)
    for (c = 0; c < sizeof counts / sizeof counts[0]; c++) {
      check_all (buf + 1, lens[l], lens[l], counts[c]);
      check_all (buf + 2, lens[l] + 8, lens[l], counts[c]);
    }
  check_all (buf, 65536, 65536, 1);
  check_all (buf + 5, 65536 + 8, 65536, 5);
  check_all (buf + 16, 65536 + 16, 65536, 7);
  free (buf);
}
END_TEST

/* No blocks: nothing is read or written, so BUF and OUT may be NULL. */
START_TEST (test_no_blocks)
{
  size_t i;

  for (i = 0; i < NR_IMPLS; i++) {
    if (!impl_usable (i))
      continue;
    impls[i].fn (NULL, 512, 512, 0, NULL);
    impls[i].fn (NULL, 520, 512, 0, NULL);
    impls[i].fn (NULL, 0, 0, 0, NULL);
  }
  for (i = 0; i < NR_COPY_IMPLS; i++) {
    if (!copy_impl_usable (i))
      continue;
    copy_impls[i].fn (NULL, 520, NULL, 512, 512, 0, NULL);
    copy_impls[i].fn (NULL, 0, NULL, 0, 0, 0, NULL);
  }
}
END_TEST

/* A changed byte changes the CRC of its own block and of no other: the
 * blocks of a group must not mix. */
START_TEST (test_blocks_apart)
{
  enum { LEN = 512, STRIDE = 520, N = 8 };
  static unsigned char buf[N * STRIDE];
  uint16_t before[N], after[N];
  size_t i, b, k, pos;

  rng_seed (4);
  rng_fill (buf, sizeof buf);
  for (i = 0; i < NR_IMPLS; i++) {
    if (!impl_usable (i))
      continue;
    impls[i].fn (buf, STRIDE, LEN, N, before);
    for (k = 0; k < 200; k++) {
      pos = rng_next () % sizeof buf;
      buf[pos] ^= (unsigned char) (1u << (k % 8));
      impls[i].fn (buf, STRIDE, LEN, N, after);
      buf[pos] ^= (unsigned char) (1u << (k % 8));
      for (b = 0; b < N; b++) {
        /* A CRC of degree 16 detects every single-bit error. */
        int inside = pos >= b * STRIDE && pos < b * STRIDE + LEN;
        ck_assert_msg (inside ? after[b] != before[b] : after[b] == before[b],
                       "%s: flip at %zu: block %zu %s", impls[i].name, pos,
                       b, inside ? "unchanged" : "changed");
      }
    }
  }
}
END_TEST

/* Nothing outside the blocks is read: the blocks are put right after and
 * right before an inaccessible page, so any stray read faults. */
START_TEST (test_reads_only_blocks)
{
  static const size_t lens[] = { 16, 32, 48, 64, 80, 512, 4096 };
  static const size_t pad[] = { 0, 8, 16 };
  const size_t page = (size_t) sysconf (_SC_PAGESIZE);
  const size_t area = 16 * 4104 + 2 * page;
  size_t mapped = ((area + page - 1) / page + 2) * page, l, s, c, span;
  unsigned char *map, *lo, *hi;

  map = mmap (NULL, mapped, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne (map, MAP_FAILED);
  lo = map + page;                      /* first accessible byte */
  hi = map + mapped - page;             /* first inaccessible byte after */
  rng_seed (5);
  rng_fill (lo, (size_t) (hi - lo));
  ck_assert_int_eq (mprotect (map, page, PROT_NONE), 0);
  ck_assert_int_eq (mprotect (hi, page, PROT_NONE), 0);

  for (l = 0; l < sizeof lens / sizeof lens[0]; l++)
    for (s = 0; s < sizeof pad / sizeof pad[0]; s++)
      for (c = 1; c <= 9; c += 4) {   /* 1, 5 and 9 blocks */
        span = (c - 1) * (lens[l] + pad[s]) + lens[l];
        check_all (lo, lens[l] + pad[s], lens[l], c);
        check_all (hi - span, lens[l] + pad[s], lens[l], c);
      }
  ck_assert_int_eq (munmap (map, mapped), 0);
}
END_TEST

/* crc16_t10dif_blocks and crc16_t10dif_blocks_copy take the widest path
 * the CPU has. */
START_TEST (test_dispatch)
{
  enum { LEN = 512, N = 8 };
  static unsigned char buf[N * LEN], copy[N * (LEN + 8)];
  uint16_t got[N], want[N];

  rng_seed (6);
  rng_fill (buf, sizeof buf);
  /* The wide version needs what the narrow one needs. */
  if (crc16_t10dif_have_vpclmul ())
    ck_assert (crc16_t10dif_have_clmul ());
  crc16_t10dif_blocks (buf, LEN, LEN, N, got);
  if (crc16_t10dif_have_vpclmul ())
    crc16_t10dif_blocks_vpclmul (buf, LEN, LEN, N, want);
  else if (crc16_t10dif_have_clmul ())
    crc16_t10dif_blocks_clmul (buf, LEN, LEN, N, want);
  else
    crc16_t10dif_blocks_isal (buf, LEN, LEN, N, want);
  ck_assert_mem_eq (got, want, sizeof got);
  crc16_t10dif_blocks_copy (copy, LEN + 8, buf, LEN, LEN, N, got);
  ck_assert_mem_eq (got, want, sizeof got);
  ck_assert_mem_eq (copy + 3 * (LEN + 8), buf + 3 * LEN, LEN);
}
END_TEST

static Suite *
crc16_suite (void)
{
  Suite *s = suite_create ("crc16");
  TCase *tc = tcase_create ("crc16");

  /* Under valgrind (CK_FORK=no, memcheck) the sweeps take a while. */
  tcase_set_timeout (tc, 600);
  tcase_add_test (tc, test_check_value);
  tcase_add_test (tc, test_all_lengths);
  tcase_add_test (tc, test_intervals);
  tcase_add_test (tc, test_other_lengths);
  tcase_add_test (tc, test_no_blocks);
  tcase_add_test (tc, test_blocks_apart);
  tcase_add_test (tc, test_reads_only_blocks);
  tcase_add_test (tc, test_dispatch);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (crc16_suite ());
  int failed;

  /* Say which implementations this run covers. */
  printf ("crc16: pclmul %s, vpclmulqdq %s\n",
          crc16_t10dif_have_clmul () ? "tested" : "not available (skipped)",
          crc16_t10dif_have_vpclmul () ? "tested" :
          "not available (skipped)");

  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
