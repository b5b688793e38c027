/* Calls two programs compiled ahead of time by `xlapy aot` (an MLP and a CNN): no Python,
 * no xlapy runtime, only mlp.o, cnn.o and libc/libm.
 *
 *   demo DIR [REPS]
 *
 * reads each argument from DIR/NAME.argK (raw row-major bytes, written by check.py), runs
 * the program once and writes DIR/NAME.out, then times REPS more calls and prints the
 * milliseconds of the fastest call. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cnn.h"
#include "mlp.h"

typedef int (*run_fn)(const void *const *, void *const *, void *);

static void *aligned(size_t align, size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, align, n ? n : align)) { perror("posix_memalign"); exit(1); }
    return p;
}

static void *load(const char *dir, const char *name, int k, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.arg%d", dir, name, k);
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    void *p = aligned(64, n);
    if (fread(p, 1, n, f) != n) { fprintf(stderr, "%s: short file\n", path); exit(1); }
    fclose(f);
    return p;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void run(const char *dir, const char *name, run_fn fn, int nargs, const size_t *bytes,
                size_t out_bytes, size_t scratch_bytes, size_t scratch_align, int reps) {
    const void *args[16];
    for (int k = 0; k < nargs; k++) args[k] = load(dir, name, k, bytes[k]);
    void *out = aligned(64, out_bytes);
    void *results[1] = {out};
    void *scratch = aligned(scratch_align, scratch_bytes);
    int rc = fn(args, results, scratch);
    if (rc) { fprintf(stderr, "%s_run failed: %d\n", name, rc); exit(1); }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.out", dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(out, 1, out_bytes, f);
    fclose(f);
    double best = 1e30;  /* the fastest call: the least disturbed by other processes */
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        fn(args, results, scratch);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    printf("%s: %.3f ms per call (best of %d)\n", name, best * 1e3, reps);
    for (int k = 0; k < nargs; k++) free((void *)args[k]);
    free(out);
    free(scratch);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s DIR [REPS]\n", argv[0]); return 2; }
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    const size_t mlp_bytes[] = {MLP_ARG0_BYTES, MLP_ARG1_BYTES, MLP_ARG2_BYTES, MLP_ARG3_BYTES,
                                MLP_ARG4_BYTES, MLP_ARG5_BYTES, MLP_ARG6_BYTES};
    const size_t cnn_bytes[] = {CNN_ARG0_BYTES, CNN_ARG1_BYTES, CNN_ARG2_BYTES, CNN_ARG3_BYTES,
                                CNN_ARG4_BYTES};
    run(argv[1], "mlp", mlp_run, MLP_NUM_ARGS, mlp_bytes, MLP_RESULT0_BYTES, MLP_SCRATCH_BYTES,
        MLP_SCRATCH_ALIGN, reps);
    run(argv[1], "cnn", cnn_run, CNN_NUM_ARGS, cnn_bytes, CNN_RESULT0_BYTES, CNN_SCRATCH_BYTES,
        CNN_SCRATCH_ALIGN, reps);
    return 0;
}
