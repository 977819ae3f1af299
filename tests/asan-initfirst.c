/* asan-initfirst: a preload shim for sanitizer test runs only.
 *
 * nbdkit is not instrumented, so tests preload libasan into it.  Some
 * library constructors (p11-kit's, pulled in by gnutls) call newlocale()
 * before the preloaded ASan runtime has initialised; ASan's lazy
 * initialisation on its first malloc then calls dlerror() -> dcgettext()
 * under glibc's locale lock, and nbdkit can hang at exit.  Linked with
 * -z initfirst, this constructor runs before every other one and makes
 * ASan initialise at a safe moment.  Built without sanitizer flags.
 */
#include <stdlib.h>

static void __attribute__ ((constructor))
asan_initfirst (void)
{
  free (malloc (1));
}
