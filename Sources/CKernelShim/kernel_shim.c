// The shim is header-only (static inline functions Swift inlines); SwiftPM needs one source file per C target.
#include "kernel_shim.h"
