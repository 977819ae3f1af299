/* SPDX-License-Identifier: BSD-3-Clause */
/* asan-nbdkit-shim: preloaded into nbdkit, after libasan, in sanitizer
 * test runs only.  Built without sanitizer flags.
 *
 * nbdkit itself is not instrumented, so the tests preload libasan into it
 * for our instrumented plugin.  With glibc 2.36 and GCC 12's libasan, the
 * ASan runtime initialises lazily inside the first constructor that
 * allocates (p11-kit's, pulled in by gnutls); that initialisation leaves
 * glibc's setlocale lock held for reading.  Nothing in nbdkit needs the
 * lock at run time, but p11-kit's destructor calls freelocale(), which
 * takes it for writing, so every nbdkit exit that follows a strerror()
 * hangs for ever.
 *
 * The fix here: make freelocale() a no-op.  The only caller is that
 * destructor at process exit, where freeing a locale object is moot.
 */
#include <locale.h>

void
freelocale (locale_t locale)
{
  (void) locale;
}
