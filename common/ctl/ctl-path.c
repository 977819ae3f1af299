/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: where control sockets live, and whether a place is safe
 * (see ctl-path.h).
 *
 * The rules follow what careful daemons do with their sockets: tmux and
 * OpenSSH's agent use a per-user directory of mode 0700 under /tmp that
 * they refuse if it is a symbolic link, not theirs or open to others;
 * OpenSSH's safe_path refuses files whose directories, up to /, someone
 * other than the user or root could write.
 */
#include <config.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl-path.h"

/* Copy DIR without its trailing slashes (but "/" stays "/") into BUF.
 * Returns -1 if it does not fit. */
static int
copy_dir (const char *dir, char *buf, size_t len)
{
  size_t n = strlen (dir);

  while (n > 1 && dir[n - 1] == '/')
    n--;
  if (n >= len) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy (buf, dir, n);
  buf[n] = '\0';
  return 0;
}

int
ctl_path_private_dir (char *buf, size_t len)
{
  const char *tmp = getenv ("TMPDIR");
  char base[PATH_MAX];
  int n;

  if (tmp == NULL || tmp[0] != '/')
    tmp = "/tmp";
  if (copy_dir (tmp, base, sizeof base) == -1)
    return -1;
  n = snprintf (buf, len, "%s%s" CTL_PATH_PRIVATE_PREFIX "%ld", base,
                strcmp (base, "/") == 0 ? "" : "/", (long) geteuid ());
  if (n < 0 || (size_t) n >= len) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return 0;
}

int
ctl_path_default_dir (char *buf, size_t len, bool *is_private)
{
  const char *xdg = getenv ("XDG_RUNTIME_DIR");

  if (xdg != NULL && xdg[0] == '/') {
    if (is_private)
      *is_private = false;
    return copy_dir (xdg, buf, len);
  }
  if (is_private)
    *is_private = true;
  return ctl_path_private_dir (buf, len);
}

int
ctl_path_check_private (const char *dir, char *why, size_t whylen)
{
  struct stat st;

  if (lstat (dir, &st) == -1) {
    int err = errno;
    snprintf (why, whylen, "%s: %s", dir, strerror (err));
    errno = err;
    return -1;
  }
  if (S_ISLNK (st.st_mode))
    snprintf (why, whylen, "%s is a symbolic link, not a directory of "
              "our own", dir);
  else if (!S_ISDIR (st.st_mode))
    snprintf (why, whylen, "%s exists and is not a directory", dir);
  else if (st.st_uid != geteuid ())
    snprintf (why, whylen, "%s is owned by uid %ld, not by us (uid %ld)",
              dir, (long) st.st_uid, (long) geteuid ());
  else if ((st.st_mode & 077) != 0)
    snprintf (why, whylen, "%s has mode %04o, wanted 0700 (no access "
              "for group or others)", dir, (unsigned) (st.st_mode & 07777));
  else
    return 0;
  errno = EPERM;
  return -1;
}

int
ctl_path_make_private (const char *dir, char *why, size_t whylen)
{
  /* mkdir does not follow a symbolic link at DIR: it fails with EEXIST
   * and the check below refuses the link. */
  if (mkdir (dir, 0700) == -1 && errno != EEXIST) {
    int err = errno;
    snprintf (why, whylen, "creating %s: %s", dir, strerror (err));
    errno = err;
    return -1;
  }
  return ctl_path_check_private (dir, why, whylen);
}

/* Who besides the owner may write a directory of mode MODE, in words,
 * or NULL if nobody. */
static const char *
other_writers (mode_t mode)
{
  if ((mode & S_IWGRP) && (mode & S_IWOTH))
    return "group and others";
  if (mode & S_IWGRP)
    return "group";
  if (mode & S_IWOTH)
    return "others";
  return NULL;
}

/* Whether DIR, with its symbolic links resolved, and every directory
 * above it is safe (ctl_path_check_dir's rule, on the resolved path). */
static int
check_resolved (const char *dir, char *why, size_t whylen)
{
  char *real = realpath (dir, NULL);
  uid_t me = geteuid ();
  int err;

  if (real == NULL) {
    err = errno;
    snprintf (why, whylen, "%s: %s", dir, strerror (err));
    errno = err;
    return -1;
  }

  /* Walk from the directory itself up to /.  REAL has no symbolic
   * links, "." or ".." components and no trailing slash. */
  for (;;) {
    struct stat st;
    const char *who;
    char *slash;

    if (lstat (real, &st) == -1) {
      err = errno;
      snprintf (why, whylen, "%s: %s", real, strerror (err));
      goto refuse;
    }
    if (!S_ISDIR (st.st_mode)) {
      snprintf (why, whylen, "%s is not a directory", real);
      err = ENOTDIR;
      goto refuse;
    }
    if (st.st_uid != me && st.st_uid != 0) {
      snprintf (why, whylen, "%s is owned by uid %ld, neither us "
                "(uid %ld) nor root, so its owner could replace the "
                "socket", real, (long) st.st_uid, (long) me);
      err = EPERM;
      goto refuse;
    }
    who = other_writers (st.st_mode);
    if (who != NULL && !(st.st_mode & S_ISVTX)) {
      snprintf (why, whylen, "%s is writable by %s without the sticky "
                "bit (mode %04o), so they could replace the socket",
                real, who, (unsigned) (st.st_mode & 07777));
      err = EPERM;
      goto refuse;
    }

    if (strcmp (real, "/") == 0)
      break;
    slash = strrchr (real, '/');
    if (slash == real)
      slash[1] = '\0';          /* "/x" -> "/" */
    else
      *slash = '\0';
  }
  free (real);
  return 0;

 refuse:
  free (real);
  errno = err;
  return -1;
}

/* Every symbolic link on the way to DIR as written: whoever may write
 * the directory that holds it, or owns it, could point it elsewhere, so
 * that directory must be safe and the link ours or root's. */
static int
check_links (const char *dir, char *why, size_t whylen)
{
  char buf[PATH_MAX], parent[PATH_MAX], inner[512];
  const size_t n = strlen (dir);
  uid_t me = geteuid ();
  size_t i;

  if (n >= sizeof buf) {
    snprintf (why, whylen, "%.64s...: %s", dir, strerror (ENAMETOOLONG));
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy (buf, dir, n + 1);
  /* Each prefix ending before a slash, and the whole: a/b/c -> a, a/b,
   * a/b/c. */
  for (i = 1; i <= n; i++) {
    struct stat st;
    char saved;

    if ((i < n && buf[i] != '/') || buf[i - 1] == '/')
      continue;
    saved = buf[i];
    buf[i] = '\0';
    if (lstat (buf, &st) == 0 && S_ISLNK (st.st_mode)) {
      if (st.st_uid != me && st.st_uid != 0) {
        snprintf (why, whylen, "%s is a symbolic link owned by uid %ld, "
                  "neither us (uid %ld) nor root, so its owner could point "
                  "it elsewhere", buf, (long) st.st_uid, (long) me);
        errno = EPERM;
        return -1;
      }
      int r = ctl_path_dirname (buf, parent, sizeof parent);

      if (r == -1) {
        int err = errno;
        snprintf (inner, sizeof inner, "%s", strerror (err));
        errno = err;
      }
      else
        r = check_resolved (parent, inner, sizeof inner);
      if (r == -1) {
        int err = errno;
        snprintf (why, whylen, "%s is a symbolic link in a directory that "
                  "is not safe: %s", buf, inner);
        errno = err;
        return -1;
      }
    }
    buf[i] = saved;
  }
  return 0;
}

int
ctl_path_check_dir (const char *dir, char *why, size_t whylen)
{
  if (check_links (dir, why, whylen) == -1)
    return -1;
  return check_resolved (dir, why, whylen);
}

int
ctl_path_dirname (const char *path, char *buf, size_t len)
{
  const char *slash = strrchr (path, '/');
  size_t n;

  if (slash == NULL) {
    path = ".";
    n = 1;
  }
  else if (slash == path)
    n = 1;                      /* "/x" -> "/" */
  else
    n = slash - path;
  if (n >= len) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy (buf, path, n);
  buf[n] = '\0';
  return 0;
}
