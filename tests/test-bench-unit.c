/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests for stabledif-bench's latency histograms
 * (client/stabledif-bench-hist.c) and its command line
 * (client/stabledif-bench-options.c): bucket edges, quantiles, merging,
 * size parsing, defaults, and the errors a user gets for bad options.
 */
#include <config.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "stabledif-bench.h"

/* ---- histograms ---- */

START_TEST (test_bucket_edges)
{
  uint64_t v;
  unsigned i, prev = 0;

  /* Every value lies inside its bucket, buckets grow with the value, and
   * a bucket is at most 1/HIST_SUB of its values wide. */
  for (v = 0; v < 200000; v += (v < 4096 ? 1 : 97)) {
    i = hist_bucket_of (v);
    ck_assert_uint_lt (i, HIST_BUCKETS);
    ck_assert_uint_le (hist_bucket_low (i), v);
    ck_assert_uint_ge (hist_bucket_high (i), v);
    ck_assert_uint_ge (i, prev);
    prev = i;
    if (v >= HIST_SUB)
      ck_assert_uint_le ((hist_bucket_high (i) - hist_bucket_low (i) + 1)
                         * HIST_SUB, hist_bucket_low (i));
  }
  /* Buckets tile the line: each starts one after the previous ends. */
  for (i = 1; i < HIST_BUCKETS; i++)
    ck_assert_uint_eq (hist_bucket_low (i), hist_bucket_high (i - 1) + 1);
  /* Small values are exact, the top one is the last bucket. */
  ck_assert_uint_eq (hist_bucket_of (0), 0);
  ck_assert_uint_eq (hist_bucket_of (HIST_SUB - 1), HIST_SUB - 1);
  ck_assert_uint_eq (hist_bucket_of (UINT64_MAX), HIST_BUCKETS - 1);
  ck_assert_uint_eq (hist_bucket_high (HIST_BUCKETS - 1), UINT64_MAX);
  ck_assert_uint_eq (hist_bucket_of (UINT64_C (1) << 40),
                     hist_bucket_of ((UINT64_C (1) << 40) + 1));
}
END_TEST

START_TEST (test_empty)
{
  struct hist h;

  hist_init (&h);
  ck_assert_uint_eq (h.count, 0);
  ck_assert_uint_eq (hist_quantile (&h, 0.99), 0);
  ck_assert (hist_mean (&h) == 0.0);
}
END_TEST

START_TEST (test_quantiles)
{
  struct hist *h = malloc (sizeof *h);
  uint64_t q;
  unsigned i;

  ck_assert_ptr_nonnull (h);
  hist_init (h);
  /* 990 fast operations of 1 us, 10 slow of 50 ms. */
  for (i = 0; i < 990; i++)
    hist_add (h, 1000);
  for (i = 0; i < 10; i++)
    hist_add (h, 50000000);
  ck_assert_uint_eq (h->count, 1000);
  ck_assert_uint_eq (h->min, 1000);
  ck_assert_uint_eq (h->max, 50000000);
  ck_assert_uint_eq (h->sum, 990 * 1000 + 10 * UINT64_C (50000000));
  ck_assert (hist_mean (h) == (990.0 * 1000 + 10 * 50000000.0) / 1000);

  /* Rank 990 is still fast, rank 991 slow. */
  q = hist_quantile (h, 0.99);
  ck_assert_uint_ge (q, 1000);
  ck_assert_uint_le (q, 1000 + 1000 / HIST_SUB);
  q = hist_quantile (h, 0.991);
  ck_assert_uint_eq (q, 50000000);      /* bucket top, clipped to max */
  ck_assert_uint_eq (hist_quantile (h, 1.0), 50000000);
  ck_assert_uint_eq (hist_quantile (h, 0.0), 1000);
  free (h);
}
END_TEST

START_TEST (test_merge)
{
  struct hist *a = malloc (sizeof *a), *b = malloc (sizeof *b);
  unsigned i;

  ck_assert (a && b);
  hist_init (a);
  hist_init (b);
  for (i = 1; i <= 100; i++)
    hist_add (a, i * 1000);
  for (i = 101; i <= 200; i++)
    hist_add (b, i * 1000);
  hist_merge (a, b);
  ck_assert_uint_eq (a->count, 200);
  ck_assert_uint_eq (a->min, 1000);
  ck_assert_uint_eq (a->max, 200000);
  /* The median lies within a bucket's width of 100 us. */
  ck_assert_uint_ge (hist_quantile (a, 0.5), 100000);
  ck_assert_uint_le (hist_quantile (a, 0.5), 100000 + 100000 / HIST_SUB);
  /* Merging an empty histogram changes nothing. */
  hist_init (b);
  hist_merge (a, b);
  ck_assert_uint_eq (a->count, 200);
  ck_assert_uint_eq (a->min, 1000);
  free (a);
  free (b);
}
END_TEST

/* ---- options ---- */

START_TEST (test_parse_size)
{
  uint64_t v;

  ck_assert_int_eq (options_parse_size ("4096", &v), 0);
  ck_assert_uint_eq (v, 4096);
  ck_assert_int_eq (options_parse_size ("8M", &v), 0);
  ck_assert_uint_eq (v, 8u << 20);
  ck_assert_int_eq (options_parse_size ("4k", &v), 0);
  ck_assert_uint_eq (v, 4096);
  ck_assert_int_eq (options_parse_size ("2GiB", &v), 0);
  ck_assert_uint_eq (v, UINT64_C (2) << 30);
  ck_assert_int_eq (options_parse_size ("512B", &v), 0);
  ck_assert_uint_eq (v, 512);
  ck_assert_int_eq (options_parse_size ("", &v), -1);
  ck_assert_int_eq (options_parse_size ("-1", &v), -1);
  ck_assert_int_eq (options_parse_size ("4X", &v), -1);
  ck_assert_int_eq (options_parse_size ("M", &v), -1);
  ck_assert_int_eq (options_parse_size ("99999999999T", &v), -1);
}
END_TEST

/* Parse the NULL-terminated words into *O; returns options_parse's. */
static int
parse (struct bench_options *o, const char *first, ...)
{
  char *argv[32];
  int argc = 0;
  const char *w;
  va_list ap;

  argv[argc++] = (char *) "stabledif-bench";
  va_start (ap, first);
  for (w = first; w != NULL && argc < 31; w = va_arg (ap, const char *))
    argv[argc++] = (char *) w;
  va_end (ap);
  argv[argc] = NULL;
  return options_parse (argc, argv, o);
}

START_TEST (test_defaults)
{
  struct bench_options o;

  ck_assert_int_eq (parse (&o, NULL), 0);
  ck_assert_uint_eq (o.threads, 4);
  ck_assert_uint_eq (o.page_size, 4096);
  ck_assert_uint_eq (o.working_set, 16u << 20);
  ck_assert_uint_eq (o.flush_interval_ms, 100);
  ck_assert_uint_eq (o.connections, 1);
  ck_assert_ptr_null (o.uri);
  ck_assert_ptr_null (o.ctl);
  ck_assert_str_eq (o.format, "T10-DIF-TYPE1-CRC");
  /* all: auto first, none last. */
  ck_assert_uint_eq (o.npolicies, 5);
  ck_assert_int_eq (o.policies[0], STABLEDIF_POLICY_AUTO);
  ck_assert_int_eq (o.policies[1], STABLEDIF_POLICY_WAIT);
  ck_assert_int_eq (o.policies[2], STABLEDIF_POLICY_WAIT_SENT);
  ck_assert_int_eq (o.policies[3], STABLEDIF_POLICY_SNAPSHOT);
  ck_assert_int_eq (o.policies[4], STABLEDIF_POLICY_NONE);
}
END_TEST

START_TEST (test_options)
{
  struct bench_options o;

  ck_assert_int_eq (parse (&o, "-t", "2", "--working-set", "1M",
                           "--duration", "0.5", "--flush-interval", "20",
                           "--page-size", "8k", "--write-size", "0",
                           "--race-delay-us", "300", "--think-us", "0",
                           "--connections", "16",
                           "-p", "snapshot,wait_sent,none",
                           "--json", "--svg", "x.svg", "-s", "/c.sock",
                           "nbd+unix:///dif?socket=/s", NULL), 0);
  ck_assert_uint_eq (o.threads, 2);
  ck_assert_uint_eq (o.working_set, 1u << 20);
  ck_assert (o.duration == 0.5);
  ck_assert_uint_eq (o.flush_interval_ms, 20);
  ck_assert_uint_eq (o.page_size, 8192);
  ck_assert_uint_eq (o.write_size, 8192);       /* 0: the whole page */
  ck_assert_uint_eq (o.race_delay_us, 300);
  ck_assert_uint_eq (o.think_us, 0);
  ck_assert_uint_eq (o.connections, STABLEDIF_MAX_CONNECTIONS);
  ck_assert_uint_eq (o.npolicies, 3);
  ck_assert_int_eq (o.policies[0], STABLEDIF_POLICY_SNAPSHOT);
  ck_assert_int_eq (o.policies[1], STABLEDIF_POLICY_WAIT_SENT);
  ck_assert_int_eq (o.policies[2], STABLEDIF_POLICY_NONE);
  ck_assert (o.json);
  ck_assert_str_eq (o.svg, "x.svg");
  ck_assert_str_eq (o.ctl, "/c.sock");
  ck_assert_str_eq (o.uri, "nbd+unix:///dif?socket=/s");
}
END_TEST

START_TEST (test_bad_options)
{
  struct bench_options o;

  /* Each is refused (-1: exit status 2). */
  ck_assert_int_eq (parse (&o, "-t", "0", NULL), -1);
  ck_assert_int_eq (parse (&o, "-t", "many", NULL), -1);
  ck_assert_int_eq (parse (&o, "--duration", "0", NULL), -1);
  ck_assert_int_eq (parse (&o, "--duration", "1e9", NULL), -1);
  ck_assert_int_eq (parse (&o, "--duration", "nan", NULL), -1);
  ck_assert_int_eq (parse (&o, "--page-size", "1000", NULL), -1);
  ck_assert_int_eq (parse (&o, "--page-size", "256", NULL), -1);
  ck_assert_int_eq (parse (&o, "--working-set", "6000", NULL), -1);
  ck_assert_int_eq (parse (&o, "--write-size", "8k", NULL), -1);
  ck_assert_int_eq (parse (&o, "--flush-interval", "0", NULL), -1);
  ck_assert_int_eq (parse (&o, "-p", "fast", NULL), -1);
  ck_assert_int_eq (parse (&o, "-p", ",", NULL), -1);
  ck_assert_int_eq (parse (&o, "-p", "all,all", NULL), -1);   /* 10 > 8 */
  ck_assert_int_eq (parse (&o, "--interval", "1024", NULL), -1);
  ck_assert_int_eq (parse (&o, "--connections", "0", NULL), -1);
  ck_assert_int_eq (parse (&o, "--connections", "17", NULL), -1);
  ck_assert_int_eq (parse (&o, "--connections", "two", NULL), -1);
  ck_assert_int_eq (parse (&o, "--bogus", NULL), -1);
  ck_assert_int_eq (parse (&o, "-t", NULL), -1);
  ck_assert_int_eq (parse (&o, "uri1", "uri2", NULL), -1);
  /* Options of our own device do not go with a URI, --ctl needs one. */
  ck_assert_int_eq (parse (&o, "--format", "none", "nbd://x", NULL), -1);
  ck_assert_int_eq (parse (&o, "--ctl", "/c.sock", NULL), -1);
  ck_assert_int_eq (parse (&o, "--size", "1M", "--working-set", "2M",
                           NULL), -1);
}
END_TEST

static Suite *
bench_suite (void)
{
  Suite *s = suite_create ("stabledif-bench");
  TCase *tc = tcase_create ("hist");

  tcase_add_test (tc, test_bucket_edges);
  tcase_add_test (tc, test_empty);
  tcase_add_test (tc, test_quantiles);
  tcase_add_test (tc, test_merge);
  suite_add_tcase (s, tc);
  tc = tcase_create ("options");
  tcase_add_test (tc, test_parse_size);
  tcase_add_test (tc, test_defaults);
  tcase_add_test (tc, test_options);
  tcase_add_test (tc, test_bad_options);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (bench_suite ());
  int failed;

  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
