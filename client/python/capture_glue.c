/*
 * The Python binding's capture handler (see capture_glue.h). Runs on the
 * training thread under the GIL, at step boundaries only: libsfclient calls
 * it from sf_step_begin/sf_step_end, which the binding calls with the GIL held.
 */
#include "capture_glue.h"

#include <errno.h>
#include <string.h>

/* The exception's text into out, cleared: a failure is reported, not raised. */
static int fail_with_exception(char *out, size_t cap)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *s = value != NULL ? PyObject_Str(value) : NULL;
    const char *text = s != NULL ? PyUnicode_AsUTF8(s) : NULL;
    const char *tname = type != NULL ? ((PyTypeObject *)type)->tp_name : "error";
    snprintf(out, cap, "%s: %s", tname, text != NULL ? text : "?");
    PyErr_Clear();
    Py_XDECREF(s);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return -EIO;
}

static int make_backend(struct sfpy_capture *cap, char *out, size_t out_cap)
{
    if (cap->backend != NULL)
        return 0;
    cap->backend = PyObject_CallNoArgs(cap->factory);
    return cap->backend != NULL ? 0 : fail_with_exception(out, out_cap);
}

static PyObject *request_dict(const sf_capture_request *req)
{
    return Py_BuildValue("{s:K, s:I, s:I, s:L, s:s, s:I, s:I, s:O}", "id",
                         (unsigned long long)req->id, "steps", req->steps, "kinds", req->kinds,
                         "first_step", (long long)req->first_step, "job_id",
                         req->job_id != NULL ? req->job_id : "", "rank", req->rank, "world_size",
                         req->world_size, "communication", req->communication ? Py_True : Py_False);
}

static int call_phase(struct sfpy_capture *cap, enum sf_capture_phase phase,
                      const sf_capture_request *req, char *out, size_t out_cap)
{
    PyObject *res = NULL;
    switch (phase) {
    case SF_CAPTURE_START: {
        PyObject *d = request_dict(req);
        if (d != NULL)
            res = PyObject_CallMethod(cap->backend, "start", "O", d);
        Py_XDECREF(d);
        break;
    }
    case SF_CAPTURE_STEP_BEGIN:
        res = PyObject_CallMethod(cap->backend, "step_begin", "L", (long long)req->step);
        break;
    case SF_CAPTURE_STEP_END:
        res = PyObject_CallMethod(cap->backend, "step_end", "L", (long long)req->step);
        break;
    case SF_CAPTURE_STOP:
        res = PyObject_CallMethod(cap->backend, "stop", NULL);
        break;
    }
    if (res == NULL)
        return fail_with_exception(out, out_cap);
    int r = 0;
    if (phase == SF_CAPTURE_STOP) {
        const char *path = PyUnicode_Check(res) ? PyUnicode_AsUTF8(res) : NULL;
        if (path == NULL) {
            PyErr_Clear();
            snprintf(out, out_cap, "capture backend's stop() returned no path");
            r = -EIO;
        } else {
            snprintf(out, out_cap, "%s", path);
        }
    }
    Py_DECREF(res);
    return r;
}

static int handler(void *arg, enum sf_capture_phase phase, const sf_capture_request *req, char *out,
                   size_t out_cap)
{
    struct sfpy_capture *cap = arg;
    if (_Py_IsFinalizing()) {
        cap->capturing = false;
        snprintf(out, out_cap, "the Python interpreter is exiting");
        return -ECANCELED;
    }
    /* Whatever the loop had raised stays raised; we never add to it. */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    int r = phase == SF_CAPTURE_START ? make_backend(cap, out, out_cap) : 0;
    if (r == 0)
        r = call_phase(cap, phase, req, out, out_cap);
    if (phase == SF_CAPTURE_START)
        cap->capturing = r == 0;
    else if (phase == SF_CAPTURE_STOP)
        cap->capturing = false;
    PyErr_Restore(type, value, tb);
    return r;
}

static PyObject *torch_factory(void)
{
    PyObject *mod = PyImport_ImportModule("stagefrontier._capture");
    if (mod == NULL)
        return NULL;
    PyObject *f = PyObject_GetAttrString(mod, "TorchCapture");
    Py_DECREF(mod);
    return f;
}

int sfpy_capture_install(sf_client *c, struct sfpy_capture *cap, PyObject *option)
{
    if (option == NULL || option == Py_True) {
        /* The module is imported now (cheap); torch only on the first request. */
        cap->factory = torch_factory();
        if (cap->factory == NULL)
            return -1;
    } else if (option == Py_False || option == Py_None) {
        return 0;
    } else if (PyCallable_Check(option)) {
        Py_INCREF(option);
        cap->factory = option;
    } else {
        PyErr_SetString(PyExc_TypeError, "capture must be True, False, None or a callable "
                                         "returning a capture backend");
        return -1;
    }
    if (sf_client_set_capture_handler(c, handler, cap) < 0) {
        Py_CLEAR(cap->factory);
        PyErr_SetString(PyExc_RuntimeError, "cannot install the capture handler");
        return -1;
    }
    return 0;
}

void sfpy_capture_stage(struct sfpy_capture *cap, const char *name, bool begin)
{
    if (name == NULL || cap->backend == NULL || _Py_IsFinalizing())
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *res =
        PyObject_CallMethod(cap->backend, begin ? "stage_begin" : "stage_end", "s", name);
    if (res == NULL)
        PyErr_Clear(); /* a range missing from the trace; the step goes on */
    Py_XDECREF(res);
    PyErr_Restore(type, value, tb);
}

void sfpy_capture_clear(struct sfpy_capture *cap)
{
    cap->capturing = false;
    Py_CLEAR(cap->backend);
    Py_CLEAR(cap->factory);
}
