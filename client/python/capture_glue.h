/*
 * The Python binding's capture handler: forwards libsfclient's capture
 * phases to a Python backend object (by default stagefrontier._capture's
 * torch.profiler backend, made on the first request) and marks stages as
 * profiler ranges while a capture runs. Exceptions never reach the loop.
 */
#ifndef SF_PY_CAPTURE_GLUE_H
#define SF_PY_CAPTURE_GLUE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>

#include <stagefrontier/client.h>

struct sfpy_capture {
    PyObject *factory; /* callable making the backend; NULL: no captures */
    PyObject *backend; /* made on the first request */
    bool capturing;    /* the hot path's one check */
};

/* option: True (the torch.profiler backend), False/None (no handler: requests
 * are answered "unsupported"), or a callable returning a backend object.
 * Returns 0, or -1 with a Python exception set. */
int sfpy_capture_install(sf_client *c, struct sfpy_capture *cap, PyObject *option);
/* While capturing: opens or closes the stage's profiler range. */
void sfpy_capture_stage(struct sfpy_capture *cap, const char *name, bool begin);
void sfpy_capture_clear(struct sfpy_capture *cap);

#endif
