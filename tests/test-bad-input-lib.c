/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the bad-input matrix of libstabledif.
 *
 *   test-bad-input-lib URI
 *
 * Run by test-bad-input.sh against a 1M T10-DIF-TYPE1-CRC disk at URI.
 * Every row of the tables below is one call with bad arguments and the
 * exact errno and stabledif_get_error() text it must give.  The calls of
 * the connected table must not reach the device: the block written
 * before them reads back unchanged and the handle counts no other
 * request.  Uses only the public API.
 */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "stabledif.h"

/* The URI of the disk (argv[1]). */
static const char *uri;

/* A source buffer and a destination buffer for the calls. */
static char src[2048], dst[2048];

/* The handle of the table being run (the calls below use it). */
static struct stabledif_handle *h;

/* A statistics buffer for stabledif_get_stats. */
static struct stabledif_stats st;

/* Completion callback that must never run: the calls fail at submit. */
static void
never (void *user_data, int error)
{
  ck_abort_msg ("a refused request completed (error %d)", error);
}

/* One bad call: a name, the call (returns its result as int64_t), the
 * errno and the exact message. */
struct bad_call {
  const char *name;             /* for failure messages */
  int64_t (*call) (void);       /* makes the call */
  int errnum;                   /* expected stabledif_get_errno () */
  const char *message;          /* expected stabledif_get_error () */
};

/* Run every row of TABLE: each must return -1 with its errno and
 * message. */
static void
run_table (const struct bad_call *table, size_t n)
{
  size_t i;

  for (i = 0; i < n; ++i) {
    const char *msg;
    int64_t r;

    errno = 0;
    r = table[i].call ();
    msg = stabledif_get_error ();
    ck_assert_msg (r == -1, "%s: returned %lld, want -1", table[i].name,
                   (long long) r);
    ck_assert_msg (stabledif_get_errno () == table[i].errnum,
                   "%s: errno %d (%s), want %d (%s)", table[i].name,
                   stabledif_get_errno (), strerror (stabledif_get_errno ()),
                   table[i].errnum, strerror (table[i].errnum));
    ck_assert_msg (errno == table[i].errnum, "%s: errno not set",
                   table[i].name);
    ck_assert_msg (msg != NULL && strcmp (msg, table[i].message) == 0,
                   "%s: message\n  \"%s\"\nwant\n  \"%s\"", table[i].name,
                   msg ? msg : "(null)", table[i].message);
  }
}

#define ROW(call, errnum, message) \
  { #call, call, errnum, message }

/* ---- NULL handle ---- */

static int64_t n_connect (void) { return stabledif_connect_uri (NULL, uri); }
static int64_t n_pwrite (void)
{ return stabledif_pwrite (NULL, src, 512, 0, 0); }
static int64_t n_pread (void)
{ return stabledif_pread (NULL, dst, 512, 0, NULL, 0); }
static int64_t n_flush (void) { return stabledif_flush (NULL, 0); }
static int64_t n_aio_pwrite (void)
{ return stabledif_aio_pwrite (NULL, src, 512, 0, 0, never, NULL); }
static int64_t n_wait_all (void) { return stabledif_wait_all (NULL); }
static int64_t n_wait_stable (void)
{ return stabledif_wait_stable (NULL, src, 512); }
static int64_t n_get_size (void) { return stabledif_get_size (NULL); }
static int64_t n_set_policy (void)
{ return stabledif_set_policy (NULL, STABLEDIF_POLICY_WAIT); }
static int64_t n_set_unsafe (void) { return stabledif_set_unsafe (NULL, 1); }
static int64_t n_set_forensics (void)
{ return stabledif_set_forensics (NULL, 1); }
static int64_t n_get_stats (void)
{ return stabledif_get_stats (NULL, &st, sizeof st); }
static int64_t n_reset_stats (void) { return stabledif_reset_stats (NULL); }

static const struct bad_call null_handle[] = {
  ROW (n_connect, EINVAL, "stabledif_connect_uri: handle is NULL"),
  ROW (n_pwrite, EINVAL, "stabledif_pwrite: handle is NULL"),
  ROW (n_pread, EINVAL, "stabledif_pread: handle is NULL"),
  ROW (n_flush, EINVAL, "stabledif_flush: handle is NULL"),
  ROW (n_aio_pwrite, EINVAL, "stabledif_aio_pwrite: handle is NULL"),
  ROW (n_wait_all, EINVAL, "stabledif_wait_all: handle is NULL"),
  ROW (n_wait_stable, EINVAL, "stabledif_wait_stable: handle is NULL"),
  ROW (n_get_size, EINVAL, "stabledif_get_size: handle is NULL"),
  ROW (n_set_policy, EINVAL, "stabledif_set_policy: handle is NULL"),
  ROW (n_set_unsafe, EINVAL, "stabledif_set_unsafe: handle is NULL"),
  ROW (n_set_forensics, EINVAL, "stabledif_set_forensics: handle is NULL"),
  ROW (n_get_stats, EINVAL, "stabledif_get_stats: handle is NULL"),
  ROW (n_reset_stats, EINVAL, "stabledif_reset_stats: handle is NULL"),
};

START_TEST (test_null_handle)
{
  run_table (null_handle, sizeof null_handle / sizeof null_handle[0]);
}
END_TEST

/* ---- a handle that is not connected, and bad settings ---- */

#define NOT_CONNECTED(fn) \
  fn ": not connected (call stabledif_connect_uri first)"

static int64_t u_pwrite (void) { return stabledif_pwrite (h, src, 512, 0, 0); }
static int64_t u_pread (void)
{ return stabledif_pread (h, dst, 512, 0, NULL, 0); }
static int64_t u_flush (void) { return stabledif_flush (h, 0); }
static int64_t u_aio_pwrite (void)
{ return stabledif_aio_pwrite (h, src, 512, 0, 0, never, NULL); }
static int64_t u_aio_pread (void)
{ return stabledif_aio_pread (h, dst, 512, 0, NULL, 0, never, NULL); }
static int64_t u_aio_flush (void)
{ return stabledif_aio_flush (h, 0, never, NULL); }
static int64_t u_wait_all (void) { return stabledif_wait_all (h); }
static int64_t u_wait_stable (void)
{ return stabledif_wait_stable (h, src, 512); }
static int64_t u_get_size (void) { return stabledif_get_size (h); }
static int64_t u_get_interval (void) { return stabledif_get_interval (h); }
static int64_t u_get_type (void) { return stabledif_get_type (h); }
static int64_t u_get_profile (void)
{ return stabledif_get_profile (h) == NULL ? -1 : 0; }
static int64_t u_policy_42 (void) { return stabledif_set_policy (h, 42); }
static int64_t u_policy_neg (void)
{ return stabledif_set_policy (h, (enum stabledif_policy) -1); }
static int64_t u_policy_null (void)
{ return stabledif_policy_from_name (NULL); }
static int64_t u_policy_bogus (void)
{ return stabledif_policy_from_name ("Wait"); }
static int64_t u_stats_null (void)
{ return stabledif_get_stats (h, NULL, sizeof st); }
static int64_t u_stats_small (void) { return stabledif_get_stats (h, &st, 7); }
static int64_t u_uri_null (void) { return stabledif_connect_uri (h, NULL); }

static const struct bad_call unconnected[] = {
  ROW (u_pwrite, ENOTCONN, NOT_CONNECTED ("stabledif_pwrite")),
  ROW (u_pread, ENOTCONN, NOT_CONNECTED ("stabledif_pread")),
  ROW (u_flush, ENOTCONN, NOT_CONNECTED ("stabledif_flush")),
  ROW (u_aio_pwrite, ENOTCONN, NOT_CONNECTED ("stabledif_aio_pwrite")),
  ROW (u_aio_pread, ENOTCONN, NOT_CONNECTED ("stabledif_aio_pread")),
  ROW (u_aio_flush, ENOTCONN, NOT_CONNECTED ("stabledif_aio_flush")),
  ROW (u_wait_all, ENOTCONN, NOT_CONNECTED ("stabledif_wait_all")),
  ROW (u_wait_stable, ENOTCONN, NOT_CONNECTED ("stabledif_wait_stable")),
  ROW (u_get_size, ENOTCONN, NOT_CONNECTED ("stabledif_get_size")),
  ROW (u_get_interval, ENOTCONN, NOT_CONNECTED ("stabledif_get_interval")),
  ROW (u_get_type, ENOTCONN, NOT_CONNECTED ("stabledif_get_type")),
  ROW (u_get_profile, ENOTCONN, NOT_CONNECTED ("stabledif_get_profile")),
  ROW (u_policy_42, EINVAL, "stabledif_set_policy: invalid policy 42"),
  ROW (u_policy_neg, EINVAL, "stabledif_set_policy: invalid policy -1"),
  ROW (u_policy_null, EINVAL, "stabledif_policy_from_name: name is NULL"),
  ROW (u_policy_bogus, EINVAL, "stabledif_policy_from_name: unknown policy "
       "\"Wait\" (expected auto, wait, wait-sent, snapshot or none)"),
  ROW (u_stats_null, EINVAL, "stabledif_get_stats: stats is NULL"),
  ROW (u_stats_small, EINVAL, "stabledif_get_stats: size 7 is smaller than "
       "the first counter (8 bytes)"),
  ROW (u_uri_null, EINVAL, "stabledif_connect_uri: uri is NULL"),
};

START_TEST (test_unconnected)
{
  h = stabledif_create ();
  ck_assert_ptr_nonnull (h);
  run_table (unconnected, sizeof unconnected / sizeof unconnected[0]);
  /* The bad settings changed nothing. */
  ck_assert_int_eq (stabledif_get_policy (h), STABLEDIF_POLICY_AUTO);
  ck_assert_ptr_null (stabledif_policy_name ((enum stabledif_policy) 42));
  stabledif_close (h);
}
END_TEST

/* ---- bad URIs: the libnbd reason follows a fixed prefix ---- */

/* connect_uri (new handle, U) must fail with ERRNUM, a message starting
 * with PREFIX and containing REASON; a second connect on that handle is
 * refused (the handle is spent). */
static void
bad_uri (const char *u, int errnum, const char *prefix, const char *reason)
{
  struct stabledif_handle *hu = stabledif_create ();
  const char *msg;

  ck_assert_int_eq (stabledif_connect_uri (hu, u), -1);
  msg = stabledif_get_error ();
  ck_assert_msg (stabledif_get_errno () == errnum, "%s: errno %d, want %d "
                 "(%s)", u, stabledif_get_errno (), errnum, msg);
  ck_assert_msg (strncmp (msg, prefix, strlen (prefix)) == 0 &&
                 strstr (msg, reason) != NULL,
                 "%s: message \"%s\" lacks \"%s\"...\"%s\"", u, msg, prefix,
                 reason);
  ck_assert_int_eq (stabledif_connect_uri (hu, uri), -1);
  ck_assert_int_eq (stabledif_get_errno (), EISCONN);
  ck_assert_str_eq (stabledif_get_error (), "stabledif_connect_uri: the "
                    "handle is already connected (or a connect was "
                    "attempted; use a new handle)");
  stabledif_close (hu);
}

START_TEST (test_bad_uri)
{
  bad_uri ("not a uri", EINVAL, "stabledif_connect_uri: not a uri: ",
           "unable to parse URI");
  bad_uri ("http://localhost/", EINVAL,
           "stabledif_connect_uri: http://localhost/: ", "unknown NBD URI "
           "scheme");
  bad_uri ("nbd+unix:///dif?socket=/nonexistent/stabledif.sock", ENOENT,
           "stabledif_connect_uri: nbd+unix:///dif?socket=/nonexistent/"
           "stabledif.sock: ", "connect: No such file or directory");
  bad_uri ("", EINVAL, "stabledif_connect_uri: : ", "");
}
END_TEST

/* ---- a connected handle: bad requests never reach the device ---- */

static int64_t c_buf_null (void)
{ return stabledif_pwrite (h, NULL, 512, 512, 0); }
static int64_t c_count_0 (void) { return stabledif_pwrite (h, src, 0, 512, 0); }
static int64_t c_count_odd (void)
{ return stabledif_pwrite (h, src, 100, 512, 0); }
static int64_t c_offset_odd (void)
{ return stabledif_pwrite (h, src, 512, 1, 0); }
static int64_t c_at_end (void)
{ return stabledif_pwrite (h, src, 512, 1048576, 0); }
static int64_t c_past_end (void)
{ return stabledif_pwrite (h, src, 1024, 1048064, 0); }
static int64_t c_wraps (void)
{ return stabledif_pwrite (h, src, 512, UINT64_MAX - 511, 0); }
static int64_t c_flags (void)
{ return stabledif_pwrite (h, src, 512, 512, 0x80); }
static int64_t c_first_buf (void)
{ return stabledif_pwrite (h, NULL, 0, 1, 0x80); }
static int64_t c_range_before_flags (void)
{ return stabledif_pwrite (h, src, 100, 512, 0x80); }
static int64_t c_fua_and_unknown (void)
{
  return stabledif_pwrite (h, src, 512, 512, STABLEDIF_CMD_FLAG_FUA | 0x80);
}
static int64_t c_aio_count (void)
{ return stabledif_aio_pwrite (h, src, 511, 512, 0, never, NULL); }
static int64_t c_r_buf_null (void)
{ return stabledif_pread (h, NULL, 512, 512, NULL, 0); }
static int64_t c_r_count_0 (void)
{ return stabledif_pread (h, dst, 0, 512, NULL, 0); }
static int64_t c_r_offset_odd (void)
{ return stabledif_pread (h, dst, 512, 513, NULL, 0); }
static int64_t c_r_past_end (void)
{ return stabledif_pread (h, dst, 1024, 1048064, NULL, 0); }
static int64_t c_r_flags (void)
{ return stabledif_pread (h, dst, 512, 512, NULL, 1); }
static int64_t c_aio_r_end (void)
{ return stabledif_aio_pread (h, dst, 512, 1048576, NULL, 0, never, NULL); }
static int64_t c_aio_r_fua (void)
{
  return stabledif_aio_pread (h, dst, 512, 512, NULL, STABLEDIF_CMD_FLAG_FUA,
                              never, NULL);
}
static int64_t c_flush_flags (void) { return stabledif_flush (h, 1); }
static int64_t c_aio_flush_flags (void)
{ return stabledif_aio_flush (h, 2, never, NULL); }
static int64_t c_stable_null (void)
{ return stabledif_wait_stable (h, NULL, 1); }
static int64_t c_policy_none (void)
{ return stabledif_set_policy (h, STABLEDIF_POLICY_NONE); }
static int64_t c_reconnect (void) { return stabledif_connect_uri (h, uri); }

static const struct bad_call connected[] = {
  ROW (c_buf_null, EINVAL, "stabledif_pwrite: buf is NULL"),
  ROW (c_count_0, EINVAL, "stabledif_pwrite: count is 0 (it must be a "
       "non-zero multiple of the protection interval 512)"),
  ROW (c_count_odd, EINVAL, "stabledif_pwrite: count 100 is not a multiple "
       "of the protection interval 512"),
  ROW (c_offset_odd, EINVAL, "stabledif_pwrite: offset 1 is not a multiple "
       "of the protection interval 512"),
  ROW (c_at_end, EINVAL, "stabledif_pwrite: offset 1048576 count 512 goes "
       "beyond the end of the device (1048576 bytes)"),
  ROW (c_past_end, EINVAL, "stabledif_pwrite: offset 1048064 count 1024 "
       "goes beyond the end of the device (1048576 bytes)"),
  ROW (c_wraps, EINVAL, "stabledif_pwrite: offset 18446744073709551104 "
       "count 512 goes beyond the end of the device (1048576 bytes)"),
  ROW (c_flags, EINVAL, "stabledif_pwrite: unknown flags 0x80"),
  /* Several bad arguments: the first in the order handle, buffer,
   * range, flags is named. */
  ROW (c_first_buf, EINVAL, "stabledif_pwrite: buf is NULL"),
  ROW (c_range_before_flags, EINVAL, "stabledif_pwrite: count 100 is not a "
       "multiple of the protection interval 512"),
  ROW (c_fua_and_unknown, EINVAL, "stabledif_pwrite: unknown flags 0x81"),
  ROW (c_aio_count, EINVAL, "stabledif_aio_pwrite: count 511 is not a "
       "multiple of the protection interval 512"),
  ROW (c_r_buf_null, EINVAL, "stabledif_pread: buf is NULL"),
  ROW (c_r_count_0, EINVAL, "stabledif_pread: count is 0 (it must be a "
       "non-zero multiple of the protection interval 512)"),
  ROW (c_r_offset_odd, EINVAL, "stabledif_pread: offset 513 is not a "
       "multiple of the protection interval 512"),
  ROW (c_r_past_end, EINVAL, "stabledif_pread: offset 1048064 count 1024 "
       "goes beyond the end of the device (1048576 bytes)"),
  ROW (c_r_flags, EINVAL, "stabledif_pread: unknown flags 0x1"),
  ROW (c_aio_r_end, EINVAL, "stabledif_aio_pread: offset 1048576 count 512 "
       "goes beyond the end of the device (1048576 bytes)"),
  ROW (c_aio_r_fua, EINVAL, "stabledif_aio_pread: unknown flags 0x1"),
  ROW (c_flush_flags, EINVAL, "stabledif_flush: unknown flags 0x1"),
  ROW (c_aio_flush_flags, EINVAL, "stabledif_aio_flush: unknown flags 0x2"),
  ROW (c_stable_null, EINVAL, "stabledif_wait_stable: addr is NULL"),
  ROW (c_policy_none, EPERM, "stabledif_set_policy: policy none on a "
       "device with stable_writes=1 lets the data change after its guard "
       "was computed, and the device will reject such writes; it is only "
       "allowed after stabledif_set_unsafe (h, true)"),
  ROW (c_reconnect, EISCONN, "stabledif_connect_uri: the handle is already "
       "connected (or a connect was attempted; use a new handle)"),
};

START_TEST (test_connected)
{
  size_t i;

  for (i = 0; i < sizeof src; ++i)
    src[i] = (char) (i * 7 + 3);
  h = stabledif_create ();
  ck_assert_ptr_nonnull (h);
  ck_assert_int_eq (stabledif_connect_uri (h, uri), 0);
  ck_assert_int_eq (stabledif_get_size (h), 1048576);
  ck_assert_int_eq (stabledif_get_interval (h), 512);
  /* Something to keep: LBA 1-2. */
  ck_assert_int_eq (stabledif_pwrite (h, src, 1024, 512, 0), 0);

  run_table (connected, sizeof connected / sizeof connected[0]);

  /* Nothing was sent, nothing changed: one write so far, no reads, the
   * policy as it was, the blocks as written, and the handle works. */
  ck_assert_int_eq (stabledif_get_in_flight (h), 0);
  ck_assert_int_eq (stabledif_get_stats (h, &st, sizeof st), 0);
  ck_assert_uint_eq (st.writes, 1);
  ck_assert_uint_eq (st.write_errors, 0);
  ck_assert_uint_eq (st.reads, 0);
  ck_assert_int_eq (stabledif_get_policy (h), STABLEDIF_POLICY_AUTO);
  ck_assert_int_eq (stabledif_get_effective_policy (h),
                    STABLEDIF_POLICY_WAIT);
  memset (dst, 0, sizeof dst);
  ck_assert_int_eq (stabledif_pread (h, dst, 1536, 0, NULL, 0), 0);
  for (i = 0; i < 512; ++i)
    ck_assert_int_eq (dst[i], 0);
  ck_assert_int_eq (memcmp (dst + 512, src, 1024), 0);
  ck_assert_int_eq (stabledif_wait_all (h), 0);
  stabledif_close (h);
}
END_TEST

int
main (int argc, char *argv[])
{
  Suite *s = suite_create ("bad-input-lib");
  TCase *tc = tcase_create ("bad-input-lib");
  SRunner *sr;
  int failed;

  if (argc != 2) {
    fprintf (stderr, "usage: test-bad-input-lib URI\n");
    return EXIT_FAILURE;
  }
  uri = argv[1];
  tcase_add_test (tc, test_null_handle);
  tcase_add_test (tc, test_unconnected);
  tcase_add_test (tc, test_bad_uri);
  tcase_add_test (tc, test_connected);
  suite_add_tcase (s, tc);
  sr = srunner_create (s);
  srunner_run_all (sr, CK_NORMAL);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
