#ifndef CCHRONICLE_SYSTEM_SHIM_H
#define CCHRONICLE_SYSTEM_SHIM_H
#if defined(__linux__)
#include <sys/prctl.h>
/// Marks the process undumpable: no core file (whatever core_pattern says), no ptrace attach
/// by other processes of the same user. prctl is variadic, so Swift cannot call it directly.
static inline int chronicle_make_undumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }
#else
static inline int chronicle_make_undumpable(void) { return 0; }
#endif
#endif
