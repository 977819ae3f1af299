/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: where control sockets live, and whether a place is safe.
 *
 * Shared by the server (ctl.c creates the socket) and stabledif-ctl
 * (which looks for it), so both agree on the default location.  No
 * nbdkit, no disk: errors are written into the caller's buffer WHY
 * (WHYLEN bytes) as a phrase the caller prefixes with its context, and
 * errno is set.
 *
 * The default directory is $XDG_RUNTIME_DIR when it is set (an absolute
 * path), else the private directory ${TMPDIR:-/tmp}/stabledif-UID (mode
 * 0700, made on first use).  A socket is only ever made in a directory
 * that passes ctl_path_check_dir.
 */
#ifndef STABLEDIF_CTL_PATH_H
#define STABLEDIF_CTL_PATH_H

#include <stdbool.h>
#include <stddef.h>

/* The name of the private fallback directory: PREFIX UID, in $TMPDIR or
 * /tmp. */
#define CTL_PATH_PRIVATE_PREFIX "stabledif-"

/* The private fallback directory ${TMPDIR:-/tmp}/stabledif-UID (UID
 * the effective user; a TMPDIR that is not an absolute path is
 * ignored), into BUF (LEN bytes).  Looks only at the environment.
 * Returns -1 (errno ENAMETOOLONG) if it does not fit. */
int ctl_path_private_dir (char *buf, size_t len);

/* The directory default sockets go in (see above), into BUF (LEN bytes).
 * *IS_PRIVATE (if not NULL) says whether it is the private fallback
 * directory, which ctl_path_make_private must create or check before
 * use.  Looks only at the environment, never at the file system.
 * Returns -1 (errno ENAMETOOLONG) if it does not fit. */
int ctl_path_default_dir (char *buf, size_t len, bool *is_private);

/* Make the private directory DIR (mode 0700) if it does not exist, then
 * check it as ctl_path_check_private does.  Returns 0 if DIR is ready
 * for sockets, -1 otherwise. */
int ctl_path_make_private (const char *dir, char *why, size_t whylen);

/* Whether DIR is a usable private directory: a directory (not a
 * symbolic link) owned by the effective user, without any access for
 * group or others.  Returns 0 if so, -1 if not (errno ENOENT if it does
 * not exist, EPERM if it is not safe). */
int ctl_path_check_private (const char *dir, char *why, size_t whylen);

/* Whether DIR is safe to hold a control socket: it exists and, after
 * resolving symbolic links, it and every directory above it up to / is
 * owned by the effective user or root and is not writable by group or
 * others unless it has the sticky bit (so /tmp itself is acceptable,
 * a directory anyone may rename entries in is not).  Every symbolic
 * link on the way to DIR as written must be owned by the effective user
 * or root and sit in a directory that passes the same rule.  Otherwise
 * someone else could replace the socket with their own (or a link with
 * one to their own directory).  Returns 0 if safe, -1
 * if not (errno EPERM) or if DIR cannot be examined (errno from the
 * system). */
int ctl_path_check_dir (const char *dir, char *why, size_t whylen);

/* The directory part of PATH (everything before its last slash; "/" for
 * "/x", "." for a name without a slash), into BUF (LEN bytes).  Returns
 * -1 (errno ENAMETOOLONG) if it does not fit. */
int ctl_path_dirname (const char *path, char *buf, size_t len);

#endif /* STABLEDIF_CTL_PATH_H */
