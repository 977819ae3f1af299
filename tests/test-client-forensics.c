/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests for libstabledif's forensics
 * (client/libstabledif-forensics.c): which byte ranges of a block changed
 * between checksum and transfer, merged into runs, and how a set of
 * changed blocks is described in an error message.
 */
#include <config.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "libstabledif-internal.h"

/* Diff BEFORE and AFTER and return the ranges (caller frees). */
static struct stabledif_byte_range *
diff (const uint8_t *before, const uint8_t *after, uint32_t len,
      long *n, uint32_t *changed)
{
  struct stabledif_byte_range *r = (void *) 1;

  *n = forensics_diff (before, after, len, &r, changed);
  ck_assert_int_ge (*n, 0);
  if (*n == 0)
    ck_assert_ptr_null (r);
  return r;
}

START_TEST (test_diff_identical)
{
  uint8_t a[512], b[512];
  uint32_t changed = 99;
  long n;

  memset (a, 0x33, sizeof a);
  memcpy (b, a, sizeof b);
  diff (a, b, sizeof a, &n, &changed);
  ck_assert_int_eq (n, 0);
  ck_assert_uint_eq (changed, 0);
  /* Zero length. */
  diff (a, b, 0, &n, &changed);
  ck_assert_int_eq (n, 0);
}
END_TEST

START_TEST (test_diff_edges)
{
  uint8_t a[512], b[512];
  struct stabledif_byte_range *r;
  uint32_t changed;
  long n;

  memset (a, 0, sizeof a);
  memcpy (b, a, sizeof b);
  b[0] = 1;
  b[511] = 1;
  r = diff (a, b, sizeof a, &n, &changed);
  ck_assert_int_eq (n, 2);
  ck_assert_uint_eq (r[0].offset, 0);
  ck_assert_uint_eq (r[0].length, 1);
  ck_assert_uint_eq (r[1].offset, 511);
  ck_assert_uint_eq (r[1].length, 1);
  ck_assert_uint_eq (changed, 2);
  free (r);

  /* The whole block. */
  memset (b, 0xff, sizeof b);
  r = diff (a, b, sizeof a, &n, &changed);
  ck_assert_int_eq (n, 1);
  ck_assert_uint_eq (r[0].offset, 0);
  ck_assert_uint_eq (r[0].length, 512);
  ck_assert_uint_eq (changed, 512);
  free (r);

  /* A length that is not a multiple of 8 (the fast path's stride). */
  memcpy (b, a, sizeof b);
  b[12] = 7;
  r = diff (a, b, 13, &n, &changed);
  ck_assert_int_eq (n, 1);
  ck_assert_uint_eq (r[0].offset, 12);
  ck_assert_uint_eq (r[0].length, 1);
  free (r);
}
END_TEST

START_TEST (test_diff_merging)
{
  uint8_t a[4096], b[4096];
  struct stabledif_byte_range *r;
  uint32_t changed;
  long n;

  memset (a, 0, sizeof a);
  memcpy (b, a, sizeof b);
  /* Adjacent changed bytes form one range, across an 8-byte boundary. */
  b[5] = b[6] = b[7] = b[8] = 1;
  /* One equal byte in between separates two ranges. */
  b[100] = 1;
  b[102] = 1;
  /* A 16-bit counter changing only its low byte still reports that
   * byte, not the counter. */
  a[200] = 0x12; a[201] = 0x34;
  b[200] = 0x12; b[201] = 0x35;
  r = diff (a, b, sizeof a, &n, &changed);
  ck_assert_int_eq (n, 4);
  ck_assert_uint_eq (r[0].offset, 5);
  ck_assert_uint_eq (r[0].length, 4);
  ck_assert_uint_eq (r[1].offset, 100);
  ck_assert_uint_eq (r[1].length, 1);
  ck_assert_uint_eq (r[2].offset, 102);
  ck_assert_uint_eq (r[2].length, 1);
  ck_assert_uint_eq (r[3].offset, 201);
  ck_assert_uint_eq (r[3].length, 1);
  ck_assert_uint_eq (changed, 7);
  free (r);
}
END_TEST

/* The byte-by-byte reference. */
static long
naive (const uint8_t *a, const uint8_t *b, uint32_t len,
       struct stabledif_byte_range *out)
{
  long n = 0;
  uint32_t i;

  for (i = 0; i < len; ++i) {
    if (a[i] == b[i])
      continue;
    if (n > 0 && out[n - 1].offset + out[n - 1].length == i)
      out[n - 1].length++;
    else {
      out[n].offset = i;
      out[n].length = 1;
      n++;
    }
  }
  return n;
}

START_TEST (test_diff_random)
{
  static uint8_t a[4096], b[4096];
  static struct stabledif_byte_range want[4096];
  uint32_t x = 12345, changed, sum;
  int round;

  for (round = 0; round < 200; ++round) {
    struct stabledif_byte_range *r;
    uint32_t len = 1 + (round * 37) % 4096;
    int k, nmut;
    long n, nw, i;

    for (k = 0; k < (int) sizeof a; ++k) {
      x = x * 1103515245 + 12345;
      a[k] = (uint8_t) (x >> 16);
    }
    memcpy (b, a, sizeof b);
    nmut = round % 50;
    for (k = 0; k < nmut; ++k) {
      uint32_t at, run;
      x = x * 1103515245 + 12345;
      at = (x >> 8) % len;
      run = 1 + (x >> 24) % 24;
      for (; run > 0 && at < len; --run, ++at)
        b[at] ^= (uint8_t) (1 + (run & 0x7f));
    }
    nw = naive (a, b, len, want);
    r = diff (a, b, len, &n, &changed);
    ck_assert_int_eq (n, nw);
    sum = 0;
    for (i = 0; i < n; ++i) {
      ck_assert_uint_eq (r[i].offset, want[i].offset);
      ck_assert_uint_eq (r[i].length, want[i].length);
      sum += r[i].length;
    }
    ck_assert_uint_eq (changed, sum);
    free (r);
  }
}
END_TEST

/* ---- messages ---- */

START_TEST (test_describe_one)
{
  struct stabledif_byte_range ranges[] = { { 100, 2 } };
  struct stabledif_block_report b = {
    .lba = 17, .guard_submit = 0x1234, .guard_sent = 0xabcd,
    .bytes_changed = 2, .nranges = 1, .ranges = ranges,
  };
  char buf[512];

  forensics_describe (&b, 1, true, buf, sizeof buf);
  ck_assert_str_eq (buf, "LBA 17: guard check: bytes 100-101 (2 bytes) "
                    "changed between checksum and transfer (guard 0x1234 "
                    "at submit, 0xabcd "
                    "sent)");

  ranges[0].length = 1;
  b.bytes_changed = 1;
  forensics_describe (&b, 1, true, buf, sizeof buf);
  ck_assert_ptr_nonnull (strstr (buf, "LBA 17: guard check: byte 100 "
                                 "(1 byte) changed"));
}
END_TEST

START_TEST (test_describe_no_bytes)
{
  struct stabledif_block_report b = {
    .lba = 4096, .guard_submit = 1, .guard_sent = 2,
  };
  char buf[512];

  forensics_describe (&b, 1, false, buf, sizeof buf);
  ck_assert_ptr_nonnull (strstr (buf, "LBA 4096: guard check: data "
                                 "changed between "
                                 "checksum and transfer"));
  ck_assert_ptr_nonnull (strstr (buf, "enable forensics"));
  /* With forensics on but no ranges recorded (out of memory): no hint. */
  forensics_describe (&b, 1, true, buf, sizeof buf);
  ck_assert_ptr_null (strstr (buf, "enable forensics"));
}
END_TEST

START_TEST (test_describe_many)
{
  struct stabledif_byte_range ranges[6];
  struct stabledif_block_report b[6];
  char buf[2048], small[16];
  size_t i;

  for (i = 0; i < 6; ++i) {
    ranges[i].offset = (uint32_t) (i * 10);
    ranges[i].length = 2;
  }
  for (i = 0; i < 6; ++i) {
    b[i] = (struct stabledif_block_report) {
      .lba = 100 + i, .guard_submit = i, .guard_sent = i + 1,
      .bytes_changed = 12, .nranges = 6, .ranges = ranges,
    };
  }
  forensics_describe (b, 6, true, buf, sizeof buf);
  ck_assert_ptr_nonnull (strstr (buf, "LBA 100: guard check: bytes 0-1, "
                                 "10-11, "
                                 "20-21, "
                                 "30-31 and 2 more ranges (12 bytes)"));
  ck_assert_ptr_nonnull (strstr (buf, "LBA 103:"));
  ck_assert_ptr_null (strstr (buf, "LBA 104:"));
  ck_assert_ptr_nonnull (strstr (buf, "; and 2 more blocks"));

  /* A buffer too small: cut, but terminated. */
  forensics_describe (b, 6, true, small, sizeof small);
  ck_assert_uint_eq (strlen (small), sizeof small - 1);
  ck_assert (strncmp (small, "LBA 100: guard check: ", sizeof small - 1)
             == 0);
}
END_TEST

static Suite *
forensics_suite (void)
{
  Suite *s = suite_create ("client-forensics");
  TCase *tc = tcase_create ("forensics");

  tcase_add_test (tc, test_diff_identical);
  tcase_add_test (tc, test_diff_edges);
  tcase_add_test (tc, test_diff_merging);
  tcase_add_test (tc, test_diff_random);
  tcase_add_test (tc, test_describe_one);
  tcase_add_test (tc, test_describe_no_bytes);
  tcase_add_test (tc, test_describe_many);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (forensics_suite ());
  int failed;

  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
