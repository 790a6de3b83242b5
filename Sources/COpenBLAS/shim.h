#pragma once
#include <cblas.h>

/// Stops OpenBLAS's pthread worker pool (exported by libopenblas for its fork handling, not declared in its headers):
/// with one BLAS thread the workers are never used again, but they poll with sched_yield between calls.
int blas_thread_shutdown_(void);
