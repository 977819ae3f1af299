/* TEMPORARY placeholder until the file backend lands (issue 5 helper
 * replaces this whole file). */
#include <config.h>
#include <errno.h>
#include "store.h"
struct store *
store_file_open (const struct store_geometry *g, const char *path,
                 server_error_fn error)
{
  error ("file=%s: file storage is not available yet", path);
  errno = ENOTSUP;
  return NULL;
}
