/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests for common/crc64 (CRC-64/NVME).
 *
 * Every implementation (bitwise reference, slicing-by-8 table, PCLMULQDQ
 * folding, its AVX-512 VPCLMULQDQ version, and the dispatching crc64_nvme)
 * that this CPU can run must give the catalogue check
 * value, the test vectors of the NVMe NVM Command Set specification, and
 * the same result as the bitwise reference for every length 0..1024 at
 * every alignment 0..15, for random buffers, and for chained calls.
 */

#include <config.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "crc64.h"
#include "test-rng.h"

typedef uint64_t (*crc_fn) (uint64_t, const void *, size_t);

/* One implementation under test. */
struct impl {
  const char *name;             /* for failure messages */
  crc_fn fn;                    /* the function */
};

static const struct impl impls[] = {
  { "bitwise", crc64_nvme_bitwise },
  { "table", crc64_nvme_table },
  { "clmul", crc64_nvme_clmul },
  { "vpclmul", crc64_nvme_vpclmul },
  { "crc64_nvme", crc64_nvme },
};
#define NR_IMPLS (sizeof impls / sizeof impls[0])

/* Whether implementation I can run on this machine. */
static int
impl_usable (size_t i)
{
  if (impls[i].fn == crc64_nvme_clmul)
    return crc64_nvme_have_clmul ();
  if (impls[i].fn == crc64_nvme_vpclmul)
    return crc64_nvme_have_vpclmul ();
  return 1;
}


START_TEST (test_check_value)
{
  size_t i;

  for (i = 0; i < NR_IMPLS; i++) {
    if (!impl_usable (i))
      continue;
    ck_assert_msg (impls[i].fn (0, "123456789", 9) ==
                   UINT64_C (0xae8b14860a799888),
                   "%s: wrong check value", impls[i].name);
    /* Empty input: init and xorout cancel. */
    ck_assert_msg (impls[i].fn (0, "", 0) == 0, "%s: empty", impls[i].name);
    /* Zero bytes leave a running CRC unchanged. */
    ck_assert_msg (impls[i].fn (UINT64_C (0x0123456789abcdef), "", 0) ==
                   UINT64_C (0x0123456789abcdef),
                   "%s: empty continuation", impls[i].name);
  }
}
END_TEST

/* The 4 KiB test vectors of the NVMe NVM Command Set specification
 * (CRC-64 guard, section "64b CRC test cases"). */
START_TEST (test_nvme_vectors)
{
  static unsigned char buf[4096];
  static const char *const names[] = {
    "zeros", "ones", "incrementing", "decrementing"
  };
  static const uint64_t want[] = {
    UINT64_C (0x6482d367eb22b64e), UINT64_C (0xc0ddba7302eca3ac),
    UINT64_C (0x3e729f5f6750449c), UINT64_C (0x9a2df64b8e9e517e),
  };
  size_t v, i, j;

  for (v = 0; v < 4; v++) {
    for (j = 0; j < sizeof buf; j++) {
      switch (v) {
      case 0: buf[j] = 0x00; break;
      case 1: buf[j] = 0xff; break;
      case 2: buf[j] = (unsigned char) j; break;
      default: buf[j] = (unsigned char) (0xff - (j & 0xff)); break;
      }
    }
    for (i = 0; i < NR_IMPLS; i++) {
      if (!impl_usable (i))
        continue;
      ck_assert_msg (impls[i].fn (0, buf, sizeof buf) == want[v],
                     "%s: %s vector: got 0x%016llx", impls[i].name, names[v],
                     (unsigned long long) impls[i].fn (0, buf, sizeof buf));
    }
  }
}
END_TEST

/* Every length 0..1024 at every alignment 0..15, compared with bitwise. */
START_TEST (test_all_lengths)
{
  enum { MAXLEN = 1024, MAXOFF = 16 };
  static unsigned char buf[MAXLEN + MAXOFF];
  size_t len, off, i;
  uint64_t want, got;

  rng_seed (1);
  rng_fill (buf, sizeof buf);
  for (len = 0; len <= MAXLEN; len++) {
    for (off = 0; off < MAXOFF; off++) {
      want = crc64_nvme_bitwise (0, buf + off, len);
      for (i = 1; i < NR_IMPLS; i++) {
        if (!impl_usable (i))
          continue;
        got = impls[i].fn (0, buf + off, len);
        ck_assert_msg (got == want,
                       "%s: len %zu offset %zu: 0x%016llx != 0x%016llx",
                       impls[i].name, len, off, (unsigned long long) got,
                       (unsigned long long) want);
      }
    }
  }
}
END_TEST

/* Random buffers, lengths up to 64 KiB, alignments and starting CRCs. */
START_TEST (test_random)
{
  enum { MAXLEN = 65536 + 64 };
  unsigned char *buf = malloc (MAXLEN);
  size_t len, off, i;
  uint64_t init, want, got;
  int round;

  ck_assert_ptr_nonnull (buf);
  rng_seed (2);
  for (round = 0; round < 200; round++) {
    rng_fill (buf, MAXLEN);
    off = rng_next () % 64;
    len = rng_next () % (MAXLEN - off + 1);
    init = (round & 1) ? rng_next () : 0;
    want = crc64_nvme_bitwise (init, buf + off, len);
    for (i = 1; i < NR_IMPLS; i++) {
      if (!impl_usable (i))
        continue;
      got = impls[i].fn (init, buf + off, len);
      ck_assert_msg (got == want,
                     "%s: round %d len %zu offset %zu init 0x%016llx",
                     impls[i].name, round, len, off, (unsigned long long) init);
    }
  }
  free (buf);
}
END_TEST

/* crc(crc(0, a), b) is the CRC of a followed by b, at every split point,
 * in every implementation and when implementations are mixed. */
START_TEST (test_chained)
{
  enum { LEN = 700 };
  static unsigned char buf[LEN];
  size_t cut, cut2, i, j;
  uint64_t want, got;

  rng_seed (3);
  rng_fill (buf, sizeof buf);
  want = crc64_nvme_bitwise (0, buf, LEN);
  for (cut = 0; cut <= LEN; cut++) {
    for (i = 0; i < NR_IMPLS; i++) {
      if (!impl_usable (i))
        continue;
      for (j = 0; j < NR_IMPLS; j++) {
        if (!impl_usable (j))
          continue;
        got = impls[j].fn (impls[i].fn (0, buf, cut), buf + cut, LEN - cut);
        ck_assert_msg (got == want, "%s then %s: split at %zu",
                       impls[i].name, impls[j].name, cut);
      }
    }
  }

  /* Three pieces at random cuts. */
  for (i = 0; i < 500; i++) {
    cut = rng_next () % (LEN + 1);
    cut2 = cut + rng_next () % (LEN - cut + 1);
    for (j = 0; j < NR_IMPLS; j++) {
      if (!impl_usable (j))
        continue;
      got = impls[j].fn (impls[j].fn (impls[j].fn (0, buf, cut),
                                      buf + cut, cut2 - cut),
                         buf + cut2, LEN - cut2);
      ck_assert_msg (got == want, "%s: cuts %zu %zu", impls[j].name,
                     cut, cut2);
    }
  }
}
END_TEST

/* A single flipped bit anywhere in a 4 KiB block changes the CRC (a CRC
 * with a degree-64 polynomial detects every single-bit error). */
START_TEST (test_single_bit_errors)
{
  static unsigned char buf[4096];
  uint64_t good, got;
  size_t bit;

  rng_seed (4);
  rng_fill (buf, sizeof buf);
  good = crc64_nvme (0, buf, sizeof buf);
  for (bit = 0; bit < sizeof buf * 8; bit += 7) {
    buf[bit / 8] ^= (unsigned char) (1u << (bit % 8));
    got = crc64_nvme (0, buf, sizeof buf);
    buf[bit / 8] ^= (unsigned char) (1u << (bit % 8));
    ck_assert_msg (got != good, "bit %zu flip not detected", bit);
  }
}
END_TEST

/* crc64_nvme takes the fastest path the CPU has. */
START_TEST (test_dispatch)
{
  static unsigned char buf[4096];

  rng_seed (5);
  rng_fill (buf, sizeof buf);
  /* The wide version needs the narrow one (it ends with its code). */
  if (crc64_nvme_have_vpclmul ())
    ck_assert (crc64_nvme_have_clmul ());
  if (crc64_nvme_have_vpclmul ())
    ck_assert (crc64_nvme (0, buf, sizeof buf) ==
               crc64_nvme_vpclmul (0, buf, sizeof buf));
  if (crc64_nvme_have_clmul ())
    ck_assert (crc64_nvme (0, buf, sizeof buf) ==
               crc64_nvme_clmul (0, buf, sizeof buf));
  ck_assert (crc64_nvme (0, buf, sizeof buf) ==
             crc64_nvme_table (0, buf, sizeof buf));
}
END_TEST

static Suite *
crc64_suite (void)
{
  Suite *s = suite_create ("crc64");
  TCase *tc = tcase_create ("crc64");

  tcase_add_test (tc, test_check_value);
  tcase_add_test (tc, test_nvme_vectors);
  tcase_add_test (tc, test_all_lengths);
  tcase_add_test (tc, test_random);
  tcase_add_test (tc, test_chained);
  tcase_add_test (tc, test_single_bit_errors);
  tcase_add_test (tc, test_dispatch);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (crc64_suite ());
  int failed;

  /* Say which implementations this run covers. */
  printf ("crc64: pclmul %s, vpclmulqdq %s\n",
          crc64_nvme_have_clmul () ? "tested" : "not available (skipped)",
          crc64_nvme_have_vpclmul () ? "tested" : "not available (skipped)");

  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
