/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: what the unit tests of the file store share
 * (test-store-file.c, test-store-file-log.c): the capture of the
 * store's errors, a private directory per test holding the store's
 * files, and raw access to those files behind the store's back.
 *
 * A runner using store_dir_make as a fixture also calls
 * test_tmpdir_enter (test-tmpdir.h), so that $TMPDIR is its own
 * directory and a test that stops half-way leaves nothing behind.
 *
 * raw_write writes with STORE_FILE_RAW_PWRITE, pwrite unless the test
 * defines it before including this header: a test that wraps pwrite
 * (-Wl,--wrap) names __real_pwrite there, so that what it writes itself
 * stays out of what it records of the store. */
#ifndef STABLEDIF_TEST_STORE_FILE_UTIL_H
#define STABLEDIF_TEST_STORE_FILE_UTIL_H

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include <check.h>

#ifndef STORE_FILE_RAW_PWRITE
#define STORE_FILE_RAW_PWRITE pwrite
#endif

/* ---- error capture: the store reports each failure exactly once ---- */

static char last_error[2048];   /* the most recent error message */
static int nerrors;             /* errors reported since reset_errors */

/* The store's error callback: keeps the message, counts it. */
static void
capture_error (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (last_error, sizeof last_error, fmt, ap);
  va_end (ap);
  nerrors++;
}

/* Forget the errors reported so far. */
static void
reset_errors (void)
{
  last_error[0] = '\0';
  nerrors = 0;
}

/* ---- a private directory per test ---- */

static char dir[256];           /* this test's directory */
static char path[300];          /* DIR/disk: the store's PATH */
static char pi_path[310];       /* DIR/disk.pi */
static char log_path[310];      /* DIR/disk.log: the dirty-region log */

/* Make a new directory NAME.XXXXXX under $TMPDIR (default /tmp), set the
 * paths above in it (no file is made) and forget earlier errors.  Fails
 * the test if the directory cannot be made. */
static void
store_dir_make (const char *name)
{
  const char *t = getenv ("TMPDIR");

  snprintf (dir, sizeof dir, "%s/%s.XXXXXX", t && *t ? t : "/tmp", name);
  ck_assert_ptr_nonnull (mkdtemp (dir));
  snprintf (path, sizeof path, "%s/disk", dir);
  snprintf (pi_path, sizeof pi_path, "%s/disk.pi", dir);
  snprintf (log_path, sizeof log_path, "%s/disk.log", dir);
  reset_errors ();
}

/* Remove the directory of store_dir_make and all in it; says so on
 * stderr if it cannot (the test's result stands). */
static void
store_dir_remove (void)
{
  char cmd[400];

  snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system (cmd) != 0)
    fprintf (stderr, "could not remove %s\n", dir);
}

/* ---- the files, behind the store's back ---- */

/* Read LEN raw bytes of file P at OFF; all must be there. */
static void
raw_read (const char *p, void *buf, size_t len, off_t off)
{
  int fd = open (p, O_RDONLY);

  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (pread (fd, buf, len, off), (ssize_t) len);
  close (fd);
}

/* Write LEN raw bytes into the existing file P at OFF. */
static void
raw_write (const char *p, const void *buf, size_t len, off_t off)
{
  int fd = open (p, O_WRONLY);

  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (STORE_FILE_RAW_PWRITE (fd, buf, len, off),
                    (ssize_t) len);
  close (fd);
}

#endif /* STABLEDIF_TEST_STORE_FILE_UTIL_H */
