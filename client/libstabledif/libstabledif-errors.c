/* SPDX-License-Identifier: BSD-3-Clause */
/* libstabledif: per-thread errors, the libnbd way.
 *
 * Every failing public function sets the calling thread's message and
 * errno once, with context (function, parameter, LBA, check), and
 * returns -1 or NULL.  Success leaves the last error in place.
 */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "libstabledif-internal.h"

/* The calling thread's last error. */
static __thread char error_msg[ERROR_MAX];   /* message, "" if none */
static __thread int error_errno;             /* errno, 0 if none */

void
error_set_str (int errnum, const char *msg)
{
  snprintf (error_msg, sizeof error_msg, "%s", msg);
  error_errno = errnum;
  errno = errnum;
}

void
error_set (int errnum, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (error_msg, sizeof error_msg, fmt, ap);
  va_end (ap);
  error_errno = errnum;
  errno = errnum;
}

/* The message of the calling thread's last error, or NULL if none. */
const char *
stabledif_get_error (void)
{
  return error_msg[0] ? error_msg : NULL;
}

/* The errno of the calling thread's last error, or 0 if none. */
int
stabledif_get_errno (void)
{
  return error_errno;
}
