#ifndef CGATELMDB_SHIM_H
#define CGATELMDB_SHIM_H
#include <lmdb.h>
#endif
