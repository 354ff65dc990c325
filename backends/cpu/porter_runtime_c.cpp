// porter_runtime_c.cpp -- C-linkage entry points of porter's CPU runtime (porter's own file).
//
// A program's C files (compiled by gcc, seeing porter_runtime_c.h or no header at all) call the
// runtime's plain functions as they would call libcudart's.  Each symbol below is the C name (asm
// label) of a wrapper around the C++ runtime of porter_runtime.h; linked into a program only when it
// has C units.  The functions are porter_runtime_c.h's PORTER_C_API list.
#include "porter_runtime.h"

#define PORTER_C(ret, name, params, args)                 \
    extern "C" ret porter_c_##name params __asm__(#name); \
    extern "C" ret porter_c_##name params { return ::name args; }

PORTER_C_API(PORTER_C)
