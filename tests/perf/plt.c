// SPDX-License-Identifier: MIT
// Samples inside libc's own PLT: argz_next() calls strlen through libc's
// .plt slot of an R_X86_64_IRELATIVE entry (no symbol), which perf 6.1
// names "@plt". Called through a volatile pointer so that <argz.h>'s inline
// version (with optimisation on) is not used instead.
#include <argz.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  const long loops = argc > 1 ? atol(argv[1]) : 1000;
  char* argz = NULL;
  size_t len = 0;
  if (argz_create_sep("a:b:c:d:e:f:g:h", ':', &argz, &len) != 0) return 2;
  char* (*volatile next)(const char*, size_t, const char*) = argz_next;
  unsigned long n = 0;
  for (long i = 0; i < loops * 1000; ++i)
    for (char* e = NULL; (e = next(argz, len, e));) n += (unsigned char)*e;
  free(argz);
  return (int)(n & 1);
}
