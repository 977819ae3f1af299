/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: unit tests for libstabledif handles without a server: the
 * settings and their defaults, what needs a connection, argument
 * checking, the size rule of stabledif_get_stats, connect failures,
 * settings refused while a connect runs, and that errors are per thread.
 * Uses only the public API (links the shared library).
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <check.h>

#include "stabledif.h"
#include "test-tmpdir.h"

/* The calling thread's error must be ERRNUM and mention WHAT. */
static void
expect_error (int errnum, const char *what)
{
  const char *msg = stabledif_get_error ();

  ck_assert_int_eq (stabledif_get_errno (), errnum);
  ck_assert_ptr_nonnull (msg);
  ck_assert_msg (strstr (msg, what) != NULL,
                 "error \"%s\" does not mention \"%s\"", msg, what);
}

START_TEST (test_defaults)
{
  struct stabledif_handle *h = stabledif_create ();

  ck_assert_ptr_nonnull (h);
  ck_assert_int_eq (stabledif_get_policy (h), STABLEDIF_POLICY_AUTO);
  ck_assert_int_eq (stabledif_get_unsafe (h), 0);
  ck_assert_int_eq (stabledif_get_race_delay_us (h), 0);
  ck_assert_int_eq (stabledif_get_forensics (h), 0);
  stabledif_close (h);
  stabledif_close (NULL);       /* allowed, like free */
}
END_TEST

START_TEST (test_settings)
{
  struct stabledif_handle *h = stabledif_create ();
  int p;

  for (p = STABLEDIF_POLICY_AUTO; p <= STABLEDIF_POLICY_NONE; ++p) {
    ck_assert_int_eq (stabledif_set_policy (h, p), 0);
    ck_assert_int_eq (stabledif_get_policy (h), p);
  }
  /* Before connect, none is accepted: the device is not known yet. */
  ck_assert_int_eq (stabledif_get_policy (h), STABLEDIF_POLICY_NONE);
  ck_assert_int_eq (stabledif_set_policy (h, 42), -1);
  expect_error (EINVAL, "stabledif_set_policy");
  ck_assert_int_eq (stabledif_get_policy (h), STABLEDIF_POLICY_NONE);

  ck_assert_int_eq (stabledif_set_unsafe (h, true), 0);
  ck_assert_int_eq (stabledif_get_unsafe (h), 1);
  ck_assert_int_eq (stabledif_set_race_delay_us (h, 250000), 0);
  ck_assert_int_eq (stabledif_get_race_delay_us (h), 250000);
  ck_assert_int_eq (stabledif_set_forensics (h, true), 0);
  ck_assert_int_eq (stabledif_get_forensics (h), 1);
  ck_assert_int_eq (stabledif_set_forensics_callback (h, NULL, NULL), 0);
  stabledif_close (h);
}
END_TEST

START_TEST (test_needs_connection)
{
  struct stabledif_handle *h = stabledif_create ();
  struct stabledif_stats st;
  char buf[512];

  ck_assert_int_eq (stabledif_get_size (h), -1);
  expect_error (ENOTCONN, "stabledif_get_size: not connected");
  ck_assert_ptr_null (stabledif_get_format (h));
  expect_error (ENOTCONN, "stabledif_get_format");
  ck_assert_ptr_null (stabledif_get_profile (h));
  ck_assert_int_eq (stabledif_get_interval (h), -1);
  ck_assert_int_eq (stabledif_get_type (h), -1);
  ck_assert_int_eq (stabledif_get_guard_bits (h), -1);
  ck_assert_int_eq (stabledif_get_tuple_size (h), -1);
  ck_assert_int_eq (stabledif_get_stable_writes (h), -1);
  ck_assert_int_eq (stabledif_get_effective_policy (h), -1);
  expect_error (ENOTCONN, "stabledif_get_effective_policy");
  ck_assert_int_eq (stabledif_pwrite (h, buf, 512, 0, 0), -1);
  expect_error (ENOTCONN, "stabledif_pwrite");
  ck_assert_int_eq (stabledif_pread (h, buf, 512, 0, NULL, 0), -1);
  expect_error (ENOTCONN, "stabledif_pread");
  ck_assert_int_eq (stabledif_aio_pwrite (h, buf, 512, 0, 0, NULL, NULL), -1);
  ck_assert_int_eq (stabledif_aio_pread (h, buf, 512, 0, NULL, 0, NULL,
                                         NULL), -1);
  ck_assert_int_eq (stabledif_flush (h, 0), -1);
  ck_assert_int_eq (stabledif_aio_flush (h, 0, NULL, NULL), -1);
  ck_assert_int_eq (stabledif_wait_all (h), -1);
  ck_assert_int_eq (stabledif_get_in_flight (h), -1);
  ck_assert_int_eq (stabledif_wait_stable (h, buf, sizeof buf), -1);
  expect_error (ENOTCONN, "stabledif_wait_stable");
  /* Counters need no connection. */
  ck_assert_int_eq (stabledif_get_stats (h, &st, sizeof st), 0);
  ck_assert_uint_eq (st.writes + st.reads + st.waits + st.wait_calls, 0);
  ck_assert_int_eq (stabledif_reset_stats (h), 0);
  stabledif_close (h);
}
END_TEST

START_TEST (test_null_handle)
{
  struct stabledif_stats st;

  ck_assert_int_eq (stabledif_set_policy (NULL, STABLEDIF_POLICY_WAIT), -1);
  expect_error (EINVAL, "handle is NULL");
  ck_assert_int_eq (stabledif_get_policy (NULL), -1);
  ck_assert_int_eq (stabledif_set_unsafe (NULL, true), -1);
  ck_assert_int_eq (stabledif_set_race_delay_us (NULL, 1), -1);
  ck_assert_int_eq (stabledif_set_forensics (NULL, true), -1);
  ck_assert_int_eq (stabledif_get_stats (NULL, &st, sizeof st), -1);
  ck_assert_int_eq (stabledif_connect_uri (NULL, "nbd://x"), -1);
  expect_error (EINVAL, "stabledif_connect_uri: handle is NULL");
  ck_assert_int_eq (stabledif_pwrite (NULL, &st, 512, 0, 0), -1);
  expect_error (EINVAL, "stabledif_pwrite: handle is NULL");
}
END_TEST

/* The guard byte the stats buffers below start out filled with. */
#define GUARD 0xa5

/* Bytes FROM to TO (excluded) of B are all V. */
static void
expect_bytes (const unsigned char *b, size_t from, size_t to,
              unsigned char v, const char *what)
{
  size_t i;

  for (i = from; i < to; i++)
    ck_assert_msg (b[i] == v, "%s: byte %zu is 0x%02x, expected 0x%02x",
                   what, i, b[i], v);
}

/* stabledif_get_stats writes exactly SIZE bytes (sizeof the caller's
 * struct): the counters that fit whole, zeros after them, and nothing
 * past SIZE; below the first counter it fails and writes nothing.  The
 * handle is fresh, so every counter the library writes is 0, which the
 * guard pattern tells apart from an untouched byte.
 */
START_TEST (test_stats_size)
{
  /* A caller compiled against an older header with three counters. */
  struct old_stats {
    uint64_t writes;            /* the first three counters of today */
    uint64_t write_bytes;
    uint64_t write_errors;
  };
  /* The caller's struct, inside a larger guarded buffer. */
  union {
    struct old_stats old;       /* an older caller's struct */
    struct stabledif_stats cur; /* this header's struct */
    unsigned char b[sizeof (struct stabledif_stats) + 64]; /* with room */
  } u;
  const size_t cur = sizeof u.cur, all = sizeof u.b;
  struct stabledif_handle *h = stabledif_create ();
  const size_t sizes[] = {
    sizeof u.old,               /* an older caller */
    STABLEDIF_STATS_MIN_SIZE,   /* the first counter only */
    STABLEDIF_STATS_MIN_SIZE + 3, /* and part of the second: zeroed */
    cur,                        /* this header */
    cur + 16,                   /* a newer caller: two unknown counters */
    all,
  };
  size_t i;

  ck_assert_uint_eq (STABLEDIF_STATS_MIN_SIZE, sizeof (uint64_t));
  ck_assert_uint_eq (offsetof (struct stabledif_stats, write_errors),
                     offsetof (struct old_stats, write_errors));

  for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    memset (u.b, GUARD, all);
    ck_assert_int_eq (stabledif_get_stats (h, &u.cur, sizes[i]), 0);
    expect_bytes (u.b, 0, sizes[i], 0, "written");
    expect_bytes (u.b, sizes[i], all, GUARD, "past SIZE");
  }
  memset (u.b, GUARD, all);
  ck_assert_int_eq (stabledif_get_stats (h, (struct stabledif_stats *) &u.old,
                                         sizeof u.old), 0);
  ck_assert_uint_eq (u.old.writes + u.old.write_bytes + u.old.write_errors, 0);
  expect_bytes (u.b, sizeof u.old, all, GUARD, "past the older struct");

  /* Too small: EINVAL naming the size, and not one byte written. */
  for (i = 0; i < STABLEDIF_STATS_MIN_SIZE; i++) {
    char what[64];

    memset (u.b, GUARD, all);
    ck_assert_int_eq (stabledif_get_stats (h, &u.cur, i), -1);
    snprintf (what, sizeof what, "stabledif_get_stats: size %zu ", i);
    expect_error (EINVAL, what);
    expect_bytes (u.b, 0, all, GUARD, "refused");
  }
  stabledif_close (h);
}
END_TEST

START_TEST (test_connect_fails)
{
  struct stabledif_handle *h = stabledif_create ();
  const char *uri = "nbd+unix:///dif?socket=/nonexistent/stabledif.sock";

  ck_assert_int_eq (stabledif_connect_uri (h, NULL), -1);
  expect_error (EINVAL, "uri is NULL");
  ck_assert_int_eq (stabledif_connect_uri (h, uri), -1);
  ck_assert_int_ne (stabledif_get_errno (), 0);
  expect_error (stabledif_get_errno (), "stabledif_connect_uri: ");
  expect_error (stabledif_get_errno (), uri);
  /* A handle is good for one connect attempt, like libnbd's. */
  ck_assert_int_eq (stabledif_connect_uri (h, uri), -1);
  expect_error (EISCONN, "already connected");
  ck_assert_int_eq (stabledif_get_size (h), -1);
  stabledif_close (h);

  h = stabledif_create ();
  ck_assert_int_eq (stabledif_connect_uri (h, "not a uri"), -1);
  ck_assert_int_ne (stabledif_get_errno (), 0);
  stabledif_close (h);
}
END_TEST

/* What connect_thread does: connect H to URI, keep the result. */
struct connecting {
  struct stabledif_handle *h;   /* the handle */
  char uri[PATH_MAX + 64];      /* where */
  int r;                        /* stabledif_connect_uri's result */
};

static void *
connect_thread (void *arg)
{
  struct connecting *c = arg;

  c->r = stabledif_connect_uri (c->h, c->uri);
  return NULL;
}

/* While a connect runs in another thread (here: stuck in the handshake
 * with a server that never speaks), the policy and the unsafe flag it
 * resolves cannot change under it: EBUSY.  Before and after, they can. */
START_TEST (test_settings_during_connect)
{
  struct connecting c = { .r = 0 };
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  const char *dir = getenv ("TMPDIR");
  pthread_t t;
  int lfd, cfd, r = 0, i;

  ck_assert_ptr_nonnull (dir);
  ck_assert_int_lt (snprintf (sun.sun_path, sizeof sun.sun_path,
                              "%s/mute.sock", dir), sizeof sun.sun_path);
  lfd = socket (AF_UNIX, SOCK_STREAM, 0);
  ck_assert_int_ge (lfd, 0);
  ck_assert_int_eq (bind (lfd, (struct sockaddr *) &sun, sizeof sun), 0);
  ck_assert_int_eq (listen (lfd, 1), 0);

  c.h = stabledif_create ();
  ck_assert_int_eq (stabledif_set_policy (c.h, STABLEDIF_POLICY_WAIT), 0);
  snprintf (c.uri, sizeof c.uri, "nbd+unix:///dif?socket=%s", sun.sun_path);
  ck_assert_int_eq (pthread_create (&t, NULL, connect_thread, &c), 0);
  /* Bounded: the connect starts within milliseconds. */
  for (i = 0; i < 1000; i++) {
    r = stabledif_set_policy (c.h, STABLEDIF_POLICY_WAIT);
    if (r == -1)
      break;
    usleep (5000);
  }
  ck_assert_int_eq (r, -1);
  expect_error (EBUSY, "stabledif_set_policy: a connect is in progress");
  ck_assert_int_eq (stabledif_set_unsafe (c.h, true), -1);
  expect_error (EBUSY, "stabledif_set_unsafe: a connect is in progress");
  ck_assert_int_eq (stabledif_get_unsafe (c.h), 0);
  ck_assert_int_eq (stabledif_get_policy (c.h), STABLEDIF_POLICY_WAIT);

  /* The server hangs up: the connect fails, and settings work again. */
  cfd = accept (lfd, NULL, NULL);
  ck_assert_int_ge (cfd, 0);
  close (cfd);
  ck_assert_int_eq (pthread_join (t, NULL), 0);
  ck_assert_int_eq (c.r, -1);
  ck_assert_int_eq (stabledif_set_policy (c.h, STABLEDIF_POLICY_SNAPSHOT), 0);
  ck_assert_int_eq (stabledif_set_unsafe (c.h, true), 0);
  stabledif_close (c.h);
  close (lfd);
}
END_TEST

/* Errors are per thread: another thread's failure does not show here,
 * and ours does not show there. */
static void *
other_thread (void *arg)
{
  const char **seen = arg;

  seen[0] = stabledif_get_error ();         /* nothing yet */
  stabledif_set_policy (NULL, STABLEDIF_POLICY_WAIT);
  seen[1] = stabledif_get_error () ? "set" : NULL;
  return NULL;
}

START_TEST (test_errors_per_thread)
{
  const char *seen[2] = { "unset", "unset" };
  pthread_t t;

  ck_assert_int_eq (stabledif_policy_from_name ("bogus"), -1);
  expect_error (EINVAL, "\"bogus\"");
  ck_assert_int_eq (pthread_create (&t, NULL, other_thread, seen), 0);
  ck_assert_int_eq (pthread_join (t, NULL), 0);
  ck_assert_ptr_null (seen[0]);
  ck_assert_str_eq (seen[1], "set");
  /* Ours is unchanged by the other thread's failure. */
  expect_error (EINVAL, "\"bogus\"");
}
END_TEST

static Suite *
handle_suite (void)
{
  Suite *s = suite_create ("client-handle");
  TCase *tc = tcase_create ("handle");

  tcase_add_test (tc, test_defaults);
  tcase_add_test (tc, test_settings);
  tcase_add_test (tc, test_needs_connection);
  tcase_add_test (tc, test_null_handle);
  tcase_add_test (tc, test_stats_size);
  tcase_add_test (tc, test_connect_fails);
  tcase_add_test (tc, test_settings_during_connect);
  tcase_add_test (tc, test_errors_per_thread);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (handle_suite ());
  int failed;

  test_tmpdir_enter ("test-client-handle");
  srunner_run_all (sr, CK_ENV);
  test_tmpdir_leave ();
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
