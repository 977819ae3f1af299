/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of where the control socket may live (server/ctl-path.c) and of
 * ctl_bind refusing unsafe places: the default directory (made 0700,
 * refused when it is a link, not ours or open to others), the directory
 * rule for any socket path (no group/other write without the sticky bit,
 * up to /), and that bind itself never follows a symbolic link.  Each
 * test works in a private directory of its own; nothing waits. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <check.h>

#include "ctl.h"
#include "ctl-path.h"
#include "disk.h"
#include "pi.h"
#include "test-tmpdir.h"

static char last_error[2048];   /* the last error ctl_bind reported */

static void
test_error (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (last_error, sizeof last_error, fmt, ap);
  va_end (ap);
}

static char dir[256];           /* the test's private directory */
static char why[PATH_MAX + 256]; /* the reason of the last refusal */
static char *saved_xdg, *saved_tmpdir; /* the environment to restore */
static struct disk *d;          /* a small memory disk */

static void
setup (void)
{
  const char *t = getenv ("TMPDIR");
  struct disk_config cfg = {
    .size = 16 * 512,
    .format = pi_format_lookup ("T10-DIF-TYPE1-CRC"),
    .interval = 512,
    .error = test_error,
  };

  saved_xdg = getenv ("XDG_RUNTIME_DIR") ?
    strdup (getenv ("XDG_RUNTIME_DIR")) : NULL;
  saved_tmpdir = t ? strdup (t) : NULL;
  snprintf (dir, sizeof dir, "%s/test-ctl-path.XXXXXX",
            t && t[0] == '/' ? t : "/tmp");
  ck_assert_ptr_nonnull (mkdtemp (dir));
  d = disk_open (&cfg);
  ck_assert_msg (d != NULL, "%s", last_error);
  last_error[0] = why[0] = '\0';
}

static void
restore_env (const char *name, char *value)
{
  if (value)
    setenv (name, value, 1);
  else
    unsetenv (name);
  free (value);
}

static void
teardown (void)
{
  char cmd[PATH_MAX + 32];
  int r;

  disk_close (d);
  /* Directories a test made unwritable must not stop the removal. */
  snprintf (cmd, sizeof cmd, "chmod -R u+rwx '%s'; rm -rf '%s'", dir, dir);
  r = system (cmd);
  (void) r;
  restore_env ("XDG_RUNTIME_DIR", saved_xdg);
  restore_env ("TMPDIR", saved_tmpdir);
}

/* DIR/NAME into BUF. */
static void
in_dir (char *buf, const char *name)
{
  snprintf (buf, PATH_MAX, "%s/%s", dir, name);
}

/* mkdir DIR/NAME with exactly MODE (not reduced by the umask). */
static void
make_dir (char *buf, const char *name, mode_t mode)
{
  in_dir (buf, name);
  ck_assert_int_eq (mkdir (buf, 0700), 0);
  ck_assert_int_eq (chmod (buf, mode), 0);
}

/* A regular file DIR/NAME holding "keep". */
static void
make_file (char *buf, const char *name)
{
  int fd;

  in_dir (buf, name);
  fd = open (buf, O_CREAT | O_EXCL | O_WRONLY, 0644);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (write (fd, "keep", 4), 4);
  close (fd);
}

/* The mode bits of PATH (lstat). */
static unsigned
mode_of (const char *path)
{
  struct stat st;

  ck_assert_int_eq (lstat (path, &st), 0);
  return st.st_mode & 07777;
}

static void
assert_why (const char *needle)
{
  ck_assert_msg (strstr (why, needle) != NULL, "'%s' not in: %s", needle,
                 why);
}

static void
assert_error (const char *needle)
{
  ck_assert_msg (strstr (last_error, needle) != NULL, "'%s' not in: %s",
                 needle, last_error);
}

/* ---- names ---- */

START_TEST (test_dirname)
{
  char buf[64];

  ck_assert_int_eq (ctl_path_dirname ("/a/b/c.sock", buf, sizeof buf), 0);
  ck_assert_str_eq (buf, "/a/b");
  ck_assert_int_eq (ctl_path_dirname ("/c.sock", buf, sizeof buf), 0);
  ck_assert_str_eq (buf, "/");
  ck_assert_int_eq (ctl_path_dirname ("c.sock", buf, sizeof buf), 0);
  ck_assert_str_eq (buf, ".");
  ck_assert_int_eq (ctl_path_dirname ("/abc/x", buf, 5), 0);
  ck_assert_str_eq (buf, "/abc");
  ck_assert_int_eq (ctl_path_dirname ("/abcd/x", buf, 5), -1);
  ck_assert_int_eq (errno, ENAMETOOLONG);
}
END_TEST

START_TEST (test_default_dir)
{
  char buf[PATH_MAX], want[PATH_MAX];
  bool priv = true;

  setenv ("XDG_RUNTIME_DIR", "/run/user/1000/", 1);
  setenv ("TMPDIR", "/var/tmp", 1);
  ck_assert_int_eq (ctl_path_default_dir (buf, sizeof buf, &priv), 0);
  ck_assert_str_eq (buf, "/run/user/1000");
  ck_assert (!priv);

  /* Not set, empty or relative: the private directory in $TMPDIR. */
  snprintf (want, sizeof want, "/var/tmp/stabledif-%ld", (long) geteuid ());
  unsetenv ("XDG_RUNTIME_DIR");
  ck_assert_int_eq (ctl_path_default_dir (buf, sizeof buf, &priv), 0);
  ck_assert_str_eq (buf, want);
  ck_assert (priv);
  setenv ("XDG_RUNTIME_DIR", "", 1);
  ck_assert_int_eq (ctl_path_default_dir (buf, sizeof buf, NULL), 0);
  ck_assert_str_eq (buf, want);
  setenv ("XDG_RUNTIME_DIR", "run/user", 1);
  ck_assert_int_eq (ctl_path_default_dir (buf, sizeof buf, NULL), 0);
  ck_assert_str_eq (buf, want);
  ck_assert_int_eq (ctl_path_private_dir (buf, sizeof buf), 0);
  ck_assert_str_eq (buf, want);

  /* ... and /tmp when TMPDIR is not usable. */
  snprintf (want, sizeof want, "/tmp/stabledif-%ld", (long) geteuid ());
  setenv ("TMPDIR", "relative", 1);
  ck_assert_int_eq (ctl_path_private_dir (buf, sizeof buf), 0);
  ck_assert_str_eq (buf, want);
  unsetenv ("TMPDIR");
  ck_assert_int_eq (ctl_path_private_dir (buf, sizeof buf), 0);
  ck_assert_str_eq (buf, want);
  ck_assert_int_eq (ctl_path_private_dir (buf, strlen (want)), -1);
  ck_assert_int_eq (errno, ENAMETOOLONG);
  setenv ("TMPDIR", "/", 1);
  snprintf (want, sizeof want, "/stabledif-%ld", (long) geteuid ());
  ck_assert_int_eq (ctl_path_private_dir (buf, sizeof buf), 0);
  ck_assert_str_eq (buf, want);
}
END_TEST

/* ---- the private directory ---- */

START_TEST (test_private_created_0700)
{
  char p[PATH_MAX];
  mode_t old = umask (0);       /* the most permissive umask */

  in_dir (p, "priv");
  ck_assert_int_eq (ctl_path_make_private (p, why, sizeof why), 0);
  umask (old);
  ck_assert_uint_eq (mode_of (p), 0700);
  /* Again: an existing good one is used as it is. */
  ck_assert_int_eq (ctl_path_make_private (p, why, sizeof why), 0);
  ck_assert_int_eq (ctl_path_check_private (p, why, sizeof why), 0);
}
END_TEST

START_TEST (test_private_refused)
{
  char p[PATH_MAX], good[PATH_MAX], link[PATH_MAX];

  /* Open to others, or to the group only: refused, left as it is. */
  make_dir (p, "open", 0755);
  ck_assert_int_eq (ctl_path_make_private (p, why, sizeof why), -1);
  ck_assert_int_eq (errno, EPERM);
  assert_why ("mode 0755");
  ck_assert_uint_eq (mode_of (p), 0755);
  make_dir (p, "group", 0750);
  ck_assert_int_eq (ctl_path_make_private (p, why, sizeof why), -1);
  assert_why ("mode 0750");

  /* A symbolic link, even to a good directory: refused, not followed. */
  make_dir (good, "good", 0700);
  in_dir (link, "link");
  ck_assert_int_eq (symlink (good, link), 0);
  ck_assert_int_eq (ctl_path_make_private (link, why, sizeof why), -1);
  assert_why ("symbolic link");
  ck_assert_int_eq (ctl_path_check_private (link, why, sizeof why), -1);

  /* A dangling link: mkdir does not create its target. */
  in_dir (link, "dangling");
  in_dir (good, "target");
  ck_assert_int_eq (symlink (good, link), 0);
  ck_assert_int_eq (ctl_path_make_private (link, why, sizeof why), -1);
  assert_why ("symbolic link");
  ck_assert_int_eq (access (good, F_OK), -1);

  /* A file. */
  make_file (p, "file");
  ck_assert_int_eq (ctl_path_make_private (p, why, sizeof why), -1);
  assert_why ("not a directory");

  /* Missing: check says ENOENT (stabledif-ctl then does not look). */
  in_dir (p, "missing");
  ck_assert_int_eq (ctl_path_check_private (p, why, sizeof why), -1);
  ck_assert_int_eq (errno, ENOENT);
  ck_assert_int_eq (access (p, F_OK), -1);
}
END_TEST

START_TEST (test_private_other_owner)
{
  char p[PATH_MAX];

  if (geteuid () != 0)
    return;                     /* only root can give a directory away */
  make_dir (p, "theirs", 0700);
  ck_assert_int_eq (chown (p, 65534, 65534), 0);
  ck_assert_int_eq (ctl_path_make_private (p, why, sizeof why), -1);
  ck_assert_int_eq (errno, EPERM);
  assert_why ("owned by uid 65534");
}
END_TEST

/* ---- the directory rule ---- */

START_TEST (test_dir_rule)
{
  char p[PATH_MAX], q[PATH_MAX], link[PATH_MAX];

  ck_assert_int_eq (ctl_path_check_dir (dir, why, sizeof why), 0);
  make_dir (p, "readable", 0755);
  ck_assert_int_eq (ctl_path_check_dir (p, why, sizeof why), 0);
  make_dir (p, "sticky", 01777);           /* like /tmp */
  ck_assert_int_eq (ctl_path_check_dir (p, why, sizeof why), 0);

  make_dir (p, "world", 0777);
  ck_assert_int_eq (ctl_path_check_dir (p, why, sizeof why), -1);
  ck_assert_int_eq (errno, EPERM);
  assert_why ("writable by group and others without the sticky bit "
              "(mode 0777)");
  make_dir (p, "group", 0770);
  ck_assert_int_eq (ctl_path_check_dir (p, why, sizeof why), -1);
  assert_why ("writable by group without");
  make_dir (p, "others", 0703);
  ck_assert_int_eq (ctl_path_check_dir (p, why, sizeof why), -1);
  assert_why ("writable by others without");

  /* A safe directory inside an unsafe one: the parent is named. */
  make_dir (p, "outer", 0777);
  in_dir (q, "outer/inner");
  ck_assert_int_eq (mkdir (q, 0700), 0);
  ck_assert_int_eq (ctl_path_check_dir (q, why, sizeof why), -1);
  assert_why ("outer is writable by group and others");

  /* A link is judged by where it leads. */
  in_dir (link, "to-world");
  in_dir (p, "world");
  ck_assert_int_eq (symlink (p, link), 0);
  ck_assert_int_eq (ctl_path_check_dir (link, why, sizeof why), -1);
  assert_why ("world is writable");
  in_dir (link, "to-readable");
  in_dir (p, "readable");
  ck_assert_int_eq (symlink (p, link), 0);
  ck_assert_int_eq (ctl_path_check_dir (link, why, sizeof why), 0);
  /* ... and by where it sits: a link to a safe directory, in a
   * directory its group may write, could be pointed elsewhere. */
  in_dir (link, "group/to-readable");
  in_dir (p, "readable");
  ck_assert_int_eq (symlink (p, link), 0);
  ck_assert_int_eq (ctl_path_check_dir (link, why, sizeof why), -1);
  ck_assert_int_eq (errno, EPERM);
  assert_why ("group/to-readable is a symbolic link in a directory that "
              "is not safe: ");
  assert_why ("group is writable by group without the sticky bit");
  /* Also when the socket's directory is below the link. */
  in_dir (q, "group/to-readable/.");
  ck_assert_int_eq (ctl_path_check_dir (q, why, sizeof why), -1);
  assert_why ("group/to-readable is a symbolic link");
  if (geteuid () == 0) {                /* a link someone else owns */
    in_dir (link, "to-readable");
    ck_assert_int_eq (lchown (link, 65534, 65534), 0);
    ck_assert_int_eq (ctl_path_check_dir (link, why, sizeof why), -1);
    assert_why ("to-readable is a symbolic link owned by uid 65534");
  }

  /* Not there, not a directory. */
  in_dir (p, "missing");
  ck_assert_int_eq (ctl_path_check_dir (p, why, sizeof why), -1);
  ck_assert_int_eq (errno, ENOENT);
  assert_why ("No such file");
  make_file (p, "file");
  ck_assert_int_eq (ctl_path_check_dir (p, why, sizeof why), -1);
  ck_assert_int_eq (errno, ENOTDIR);
}
END_TEST

START_TEST (test_dir_other_owner)
{
  char p[PATH_MAX];

  if (geteuid () != 0)
    return;                     /* only root can give a directory away */
  make_dir (p, "theirs", 0755);
  ck_assert_int_eq (chown (p, 65534, 65534), 0);
  ck_assert_int_eq (ctl_path_check_dir (p, why, sizeof why), -1);
  ck_assert_int_eq (errno, EPERM);
  assert_why ("owned by uid 65534, neither us");
}
END_TEST

/* ---- ctl_bind ---- */

START_TEST (test_bind_refuses_unsafe_dir)
{
  char p[PATH_MAX], sock[PATH_MAX];
  struct ctl *c;

  make_dir (p, "world", 0777);
  in_dir (sock, "world/ctl.sock");
  ck_assert_ptr_null (ctl_bind (d, sock));
  assert_error ("ctl=");
  assert_error ("world/ctl.sock: unsafe directory");
  assert_error ("mode 0777");
  ck_assert_int_eq (access (sock, F_OK), -1);

  in_dir (sock, "missing/ctl.sock");
  ck_assert_ptr_null (ctl_bind (d, sock));
  assert_error ("missing/ctl.sock: directory");
  assert_error ("No such file");

  /* The sticky world-writable directory (/tmp-like) is accepted. */
  make_dir (p, "sticky", 01777);
  in_dir (sock, "sticky/ctl.sock");
  c = ctl_bind (d, sock);
  ck_assert_msg (c != NULL, "%s", last_error);
  ctl_stop (c);
  ck_assert_int_eq (access (sock, F_OK), -1);   /* removed by ctl_stop */
}
END_TEST

START_TEST (test_bind_default)
{
  char priv[512], want[1024];
  struct ctl *c;
  struct stat st;

  /* Without XDG_RUNTIME_DIR: the private directory in $TMPDIR, made
   * 0700, holding stabledif-PID.sock of mode 0600. */
  unsetenv ("XDG_RUNTIME_DIR");
  setenv ("TMPDIR", dir, 1);
  snprintf (priv, sizeof priv, "%s/stabledif-%ld", dir, (long) geteuid ());
  snprintf (want, sizeof want, "%s/stabledif-%ld.sock", priv,
            (long) getpid ());
  c = ctl_bind (d, NULL);
  ck_assert_msg (c != NULL, "%s", last_error);
  ck_assert_str_eq (ctl_socket_path (c), want);
  ck_assert_uint_eq (mode_of (priv), 0700);
  ck_assert_int_eq (lstat (want, &st), 0);
  ck_assert (S_ISSOCK (st.st_mode));
  ck_assert_uint_eq (st.st_mode & 07777, 0600);
  ctl_stop (c);
  ck_assert_int_eq (access (want, F_OK), -1);
  ck_assert_int_eq (access (priv, F_OK), 0);    /* the directory stays */

  /* A private directory others can enter: refused, nothing made. */
  ck_assert_int_eq (chmod (priv, 0755), 0);
  ck_assert_ptr_null (ctl_bind (d, NULL));
  assert_error ("default control socket directory");
  assert_error ("mode 0755");
  assert_error ("ctl=PATH");
  ck_assert_uint_eq (mode_of (priv), 0755);
  ck_assert_int_eq (access (want, F_OK), -1);

  /* With XDG_RUNTIME_DIR: directly in it. */
  setenv ("XDG_RUNTIME_DIR", dir, 1);
  snprintf (want, sizeof want, "%s/stabledif-%ld.sock", dir,
            (long) getpid ());
  c = ctl_bind (d, NULL);
  ck_assert_msg (c != NULL, "%s", last_error);
  ck_assert_str_eq (ctl_socket_path (c), want);
  ctl_stop (c);
}
END_TEST

START_TEST (test_bind_never_follows_links)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  char link[PATH_MAX], target[PATH_MAX];
  struct stat st;
  int fd;

  /* What ctl_bind relies on if a link appears at the path after its
   * checks: bind(2) fails with EADDRINUSE on a dangling symbolic link
   * instead of creating the socket where the link points. */
  in_dir (link, "link");
  in_dir (target, "target.sock");
  ck_assert_int_eq (symlink (target, link), 0);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ck_assert_int_ge (fd, 0);
  strcpy (addr.sun_path, link);
  ck_assert_int_eq (bind (fd, (struct sockaddr *) &addr, sizeof addr), -1);
  ck_assert_int_eq (errno, EADDRINUSE);
  close (fd);
  ck_assert_int_eq (access (target, F_OK), -1);

  /* And ctl_bind says so without touching either. */
  ck_assert_ptr_null (ctl_bind (d, link));
  assert_error ("not a socket");
  ck_assert_int_eq (access (target, F_OK), -1);
  ck_assert_int_eq (lstat (link, &st), 0);
  ck_assert (S_ISLNK (st.st_mode));
}
END_TEST

START_TEST (test_bind_other_users_socket)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  char sock[PATH_MAX];
  struct stat st;
  int fd;

  if (geteuid () != 0)
    return;                     /* only root can give a socket away */
  /* A stale socket, but someone else's: not removed. */
  in_dir (sock, "theirs.sock");
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  strcpy (addr.sun_path, sock);
  ck_assert_int_eq (bind (fd, (struct sockaddr *) &addr, sizeof addr), 0);
  close (fd);
  ck_assert_int_eq (chown (sock, 65534, 65534), 0);
  ck_assert_ptr_null (ctl_bind (d, sock));
  assert_error ("owned by another user");
  ck_assert_int_eq (lstat (sock, &st), 0);
  ck_assert_uint_eq (st.st_uid, 65534);
}
END_TEST

static Suite *
ctl_path_suite (void)
{
  Suite *s = suite_create ("ctl-path");
  TCase *tc = tcase_create ("paths");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, test_dirname);
  tcase_add_test (tc, test_default_dir);
  tcase_add_test (tc, test_private_created_0700);
  tcase_add_test (tc, test_private_refused);
  tcase_add_test (tc, test_private_other_owner);
  tcase_add_test (tc, test_dir_rule);
  tcase_add_test (tc, test_dir_other_owner);
  tcase_add_test (tc, test_bind_refuses_unsafe_dir);
  tcase_add_test (tc, test_bind_default);
  tcase_add_test (tc, test_bind_never_follows_links);
  tcase_add_test (tc, test_bind_other_users_socket);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (ctl_path_suite ());
  int failed;

  test_tmpdir_enter ("test-ctl-path");
  srunner_run_all (sr, CK_NORMAL);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  test_tmpdir_leave ();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
