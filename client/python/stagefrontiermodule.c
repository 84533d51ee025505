/*
 * The `stagefrontier._stagefrontier` extension, re-exported by the package
 * `stagefrontier` (client/python/stagefrontier/): Recorder with step/stage/probe context
 * managers and a data-loader wrapper, all in C so a `with rec.stage(...)`
 * costs a dict lookup and two library calls. Owns no timing logic of its
 * own: every duration comes from libsfclient. Calls run under the GIL, which
 * is what makes one client per Recorder safe across Python threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <stagefrontier/client.h>
#include <stagefrontier/limits.h>

#include "capture_glue.h"

#define STAGE_CACHE_MAX 256

static const char *const default_stages[6] = {
    "data.next_wait",     "model.fwd_loss_cpu_wall", "model.backward_cpu_wall",
    "callbacks.cpu_wall", "optim.step_cpu_wall",     "step.other_cpu_wall",
};

/* ---- Handle: the client and the step bookkeeping, shared by contexts ---- */

/* Contexts hold the Handle, never the Recorder, so no reference cycle forms
 * through the Recorder's stage cache. */
typedef struct {
    PyObject_HEAD sf_client *c;
    bool any_step;
    int64_t last_step;
    int64_t pending_wait_ns; /* next() time waiting for its consuming step */
    struct sfpy_capture cap; /* the capture handler's state (capture_glue.c) */
} Handle;

static void handle_dealloc(Handle *h)
{
    sf_client_close(h->c); /* may end a running capture through cap */
    h->c = NULL;
    sfpy_capture_clear(&h->cap);
    Py_TYPE(h)->tp_free((PyObject *)h);
}

static PyTypeObject HandleType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stagefrontier._Handle",
    .tp_basicsize = sizeof(Handle),
    .tp_dealloc = (destructor)handle_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- warnings, once per process ---- */

/* A training script that misuses the API learns it once per process, through
 * Python's warnings, instead of only from a counter nobody reads: the first
 * call the client refuses, or the first violation seen at a step's end.
 * Returns -1 when the warning was turned into an exception. */
static bool warned_misuse;

static int warn_refused(int r, const char *call)
{
    if (r >= 0 || warned_misuse)
        return 0;
    warned_misuse = true;
    return PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                            "stagefrontier: %s was refused (%s), a contract violation "
                            "(docs/CLIENT.md); later ones are only counted in "
                            "Recorder.stats()['violations']",
                            call, strerror(-r));
}

static int warn_violations(Handle *h)
{
    sf_client_stats st;
    if (warned_misuse || h->c == NULL || sf_client_get_stats(h->c, &st) < 0 || st.violations == 0)
        return 0;
    warned_misuse = true;
    return PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                            "stagefrontier: contract violations by step %lld (stages out of "
                            "order, unmatched or re-entered; docs/CLIENT.md); later ones are "
                            "only counted in Recorder.stats()['violations']",
                            (long long)h->last_step);
}

/* ---- StageContext ---- */

typedef struct {
    PyObject_HEAD Handle *h;
    int id; /* -1: unknown name, counted as a violation */
} StageContext;

static void stagectx_dealloc(StageContext *s)
{
    Py_XDECREF(s->h);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *stagectx_enter(StageContext *s, PyObject *unused)
{
    (void)unused;
    /* During a capture the stage is a profiler range around its timing. */
    if (s->h->cap.capturing && s->h->c != NULL)
        sfpy_capture_stage(&s->h->cap, sf_stage_name(s->h->c, s->id), true);
    if (s->h->c != NULL && warn_refused(sf_stage_begin(s->h->c, s->id), "stage begin") < 0)
        return NULL;
    Py_INCREF(s);
    return (PyObject *)s;
}

static PyObject *stagectx_exit(StageContext *s, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    (void)nargs;
    /* An unknown name was counted once, at enter. */
    int r = s->h->c != NULL && s->id >= 0 ? sf_stage_end(s->h->c, s->id) : 0;
    if (s->h->cap.capturing && s->h->c != NULL)
        sfpy_capture_stage(&s->h->cap, sf_stage_name(s->h->c, s->id), false);
    if (warn_refused(r, "stage end") < 0)
        return NULL;
    Py_RETURN_FALSE;
}

static PyMethodDef stagectx_methods[] = {
    {"__enter__", (PyCFunction)stagectx_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))stagectx_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject StageContextType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stagefrontier.StageContext",
    .tp_basicsize = sizeof(StageContext),
    .tp_dealloc = (destructor)stagectx_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = stagectx_methods,
};

/* ---- StepContext ---- */

typedef struct {
    PyObject_HEAD Handle *h;
    bool explicit_step;
    int64_t step;
} StepContext;

static void stepctx_dealloc(StepContext *s)
{
    Py_XDECREF(s->h);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *stepctx_enter(StepContext *s, PyObject *unused)
{
    (void)unused;
    Handle *h = s->h;
    int64_t step = s->explicit_step ? s->step : h->any_step ? h->last_step + 1 : 0;
    if (h->c != NULL) {
        /* The batch this step consumes was fetched before it began. */
        if (h->pending_wait_ns > 0 &&
            warn_refused(sf_charge_data_wait(h->c, step, h->pending_wait_ns), "data wait") < 0)
            return NULL;
        if (warn_refused(sf_step_begin(h->c, step), "step begin") < 0)
            return NULL;
    }
    h->pending_wait_ns = 0;
    h->last_step = step;
    h->any_step = true;
    Py_INCREF(s);
    return (PyObject *)s;
}

static PyObject *stepctx_exit(StepContext *s, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    (void)nargs;
    if (s->h->c != NULL &&
        (warn_refused(sf_step_end(s->h->c), "step end") < 0 || warn_violations(s->h) < 0))
        return NULL;
    Py_RETURN_FALSE;
}

static PyObject *stepctx_get_step(StepContext *s, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(s->h->last_step);
}

static PyMethodDef stepctx_methods[] = {
    {"__enter__", (PyCFunction)stepctx_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))stepctx_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef stepctx_getset[] = {
    {"step", (getter)stepctx_get_step, NULL, "index of the step last begun", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject StepContextType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stagefrontier.StepContext",
    .tp_basicsize = sizeof(StepContext),
    .tp_dealloc = (destructor)stepctx_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = stepctx_methods,
    .tp_getset = stepctx_getset,
};

/* ---- ProbeContext ---- */

typedef struct {
    PyObject_HEAD Handle *h;
    PyObject *name; /* str; its UTF-8 buffer lives as long as it */
} ProbeContext;

static void probectx_dealloc(ProbeContext *p)
{
    Py_XDECREF(p->h);
    Py_XDECREF(p->name);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

static PyObject *probectx_enter(ProbeContext *p, PyObject *unused)
{
    (void)unused;
    if (p->h->c != NULL)
        sf_probe_begin(p->h->c, PyUnicode_AsUTF8(p->name));
    Py_INCREF(p);
    return (PyObject *)p;
}

static PyObject *probectx_exit(ProbeContext *p, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    (void)nargs;
    if (p->h->c != NULL)
        sf_probe_end(p->h->c, PyUnicode_AsUTF8(p->name));
    Py_RETURN_FALSE;
}

static PyMethodDef probectx_methods[] = {
    {"__enter__", (PyCFunction)probectx_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))probectx_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ProbeContextType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stagefrontier.ProbeContext",
    .tp_basicsize = sizeof(ProbeContext),
    .tp_dealloc = (destructor)probectx_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = probectx_methods,
};

/* ---- DataIter: times next() and leaves it for the consuming step ---- */

typedef struct {
    PyObject_HEAD Handle *h;
    PyObject *it;
} DataIter;

static void dataiter_dealloc(DataIter *d)
{
    Py_XDECREF(d->h);
    Py_XDECREF(d->it);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

static PyObject *dataiter_next(DataIter *d)
{
    /* During a capture the fetch is a range named after the data stage. */
    const char *range = d->h->cap.capturing && d->h->c != NULL ? sf_stage_name(d->h->c, 0) : NULL;
    if (range != NULL)
        sfpy_capture_stage(&d->h->cap, range, true);
    int64_t t0 = now_ns();
    PyObject *item = PyIter_Next(d->it);
    if (item != NULL)
        d->h->pending_wait_ns += now_ns() - t0;
    if (range != NULL)
        sfpy_capture_stage(&d->h->cap, range, false);
    return item; /* NULL without an exception set means StopIteration */
}

static PyTypeObject DataIterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stagefrontier.DataIter",
    .tp_basicsize = sizeof(DataIter),
    .tp_dealloc = (destructor)dataiter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)dataiter_next,
};

/* ---- Done: the completion mark, called back by a collective's future ---- */

/* A torch Future calls it back (add_done_callback, or then() on a torch
 * without it) once the collective completed, on whichever thread completed
 * it (with the GIL): one clock read and one atomic store in the client
 * (sf_stage_complete), no blocking. */
typedef struct {
    PyObject_HEAD Handle *h;
    int stage; /* the stage of the last issue, -1 none */
    /* Interned method names, looked up once: a name made per call costs
     * more than the marks. */
    PyObject *add_done_callback, *then, *get_future;
} Done;

static void done_dealloc(Done *d)
{
    Py_XDECREF(d->h);
    Py_XDECREF(d->add_done_callback);
    Py_XDECREF(d->then);
    Py_XDECREF(d->get_future);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

static PyObject *done_call(Done *d, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;
    if (d->h->c != NULL && d->stage >= 0)
        sf_stage_complete(d->h->c, d->stage);
    Py_RETURN_NONE;
}

static PyTypeObject DoneType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stagefrontier._Done",
    .tp_basicsize = sizeof(Done),
    .tp_dealloc = (destructor)done_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_call = (ternaryfunc)done_call,
};

static Done *done_new(Handle *h)
{
    Done *d = PyObject_New(Done, &DoneType);
    if (d == NULL)
        return NULL;
    Py_INCREF(h);
    d->h = h;
    d->stage = -1;
    d->add_done_callback = PyUnicode_InternFromString("add_done_callback");
    d->then = PyUnicode_InternFromString("then");
    d->get_future = PyUnicode_InternFromString("get_future");
    if (d->add_done_callback == NULL || d->then == NULL || d->get_future == NULL) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* Calls f.name(d): 1 done, 0 f has no such method, -1 it failed (cleared:
 * nothing here fails the training step). */
static int hang_on(Done *d, PyObject *f, PyObject *name)
{
    PyObject *r = PyObject_CallMethodOneArg(f, name, (PyObject *)d);
    if (r != NULL) {
        Py_DECREF(r);
        return 1;
    }
    int missing = PyErr_ExceptionMatches(PyExc_AttributeError);
    PyErr_Clear();
    return missing ? 0 : -1;
}

/* Hangs the completion mark on a torch Future: add_done_callback, which
 * makes no future of its own (then() chains a new one, and costs a step
 * about a microsecond more), else then(). 0: f is no such future. */
static int hang_completion(Done *d, PyObject *f)
{
    int r = hang_on(d, f, d->add_done_callback);
    return r != 0 ? r : hang_on(d, f, d->then);
}

/* Marks the issue and, given a torch Future (or a Work with get_future()),
 * hangs the completion mark on it. An object with neither
 * add_done_callback() nor then() gets no completion mark; nothing here
 * fails the training step. */
static int mark_issue(Done *d, PyObject *fut)
{
    if (d->h->c == NULL)
        return 0;
    d->stage = sf_stage_issue(d->h->c);
    if (d->stage < 0 || fut == NULL || fut == Py_None || hang_completion(d, fut) != 0)
        return 0;
    PyObject *f = PyObject_CallMethodNoArgs(fut, d->get_future); /* a Work */
    if (f == NULL) {
        PyErr_Clear();
        return 0;
    }
    hang_completion(d, f);
    Py_DECREF(f);
    return 0;
}

/* ---- SyncContext: `with rec.sync() as s:` marks the arrival at entry,
 * s.issued(work) the issue and (through work's future) the completion ---- */

typedef struct {
    PyObject_HEAD Handle *h;
    Done *done;
} SyncContext;

static void syncctx_dealloc(SyncContext *s)
{
    Py_XDECREF(s->done);
    Py_XDECREF(s->h);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *syncctx_issued(SyncContext *s, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "issued(work=None)");
        return NULL;
    }
    mark_issue(s->done, nargs ? args[0] : NULL);
    Py_RETURN_NONE;
}

/* Entry marks the arrival and opens a sync point; exit adds the time
 * between to the stage's accumulated wait (docs/CLIENT.md, "Synchronizing
 * groups"). */
static PyObject *syncctx_enter(SyncContext *s, PyObject *unused)
{
    (void)unused;
    if (s->h->c != NULL)
        sf_sync_enter(s->h->c);
    Py_INCREF(s);
    return (PyObject *)s;
}

static PyObject *syncctx_exit(SyncContext *s, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    (void)nargs;
    if (s->h->c != NULL)
        sf_sync_exit(s->h->c);
    Py_RETURN_FALSE;
}

static PyMethodDef syncctx_methods[] = {
    {"__enter__", (PyCFunction)syncctx_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))syncctx_exit, METH_FASTCALL, NULL},
    {"issued", (PyCFunction)(void (*)(void))syncctx_issued, METH_FASTCALL,
     "issued(work=None): marks the issue of the wrapped collective; a Work or Future given "
     "also marks its completion when it completes"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SyncContextType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stagefrontier.SyncContext",
    .tp_basicsize = sizeof(SyncContext),
    .tp_dealloc = (destructor)syncctx_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = syncctx_methods,
};

/* ---- CommHook: a DDP communication hook that marks the arrival ---- */

/* DDP hands buckets to the hook as they become ready; the last one of the
 * step is handed over once the rank's whole backward has produced its
 * gradients, which is the rank's arrival at the gradient all-reduce. The
 * inner hook's future is returned untouched, so gradients are exactly the
 * inner hook's. */
typedef struct {
    PyObject_HEAD Handle *h;
    Done *done;
    PyObject *inner;
    PyObject *is_last_name;
    PyObject *signature; /* (state, bucket): DDP inspects the hook's parameters */
} CommHook;

static void commhook_dealloc(CommHook *k)
{
    Py_XDECREF(k->done);
    Py_XDECREF(k->h);
    Py_XDECREF(k->inner);
    Py_XDECREF(k->is_last_name);
    Py_XDECREF(k->signature);
    Py_TYPE(k)->tp_free((PyObject *)k);
}

static PyObject *commhook_call(CommHook *k, PyObject *args, PyObject *kwds)
{
    PyObject *state, *bucket;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "comm hook takes (state, bucket)");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "hook", 2, 2, &state, &bucket))
        return NULL;
    PyObject *last = PyObject_CallMethodNoArgs(bucket, k->is_last_name);
    if (last == NULL)
        return NULL;
    int is_last = PyObject_IsTrue(last);
    Py_DECREF(last);
    if (is_last < 0)
        return NULL;
    if (is_last && k->h->c != NULL)
        sf_stage_arrive(k->h->c);
    PyObject *fut = PyObject_Call(k->inner, args, NULL);
    /* The inner hook returned its future: its collective was handed to
     * the backend. The future goes back to DDP untouched. */
    if (fut != NULL && is_last)
        mark_issue(k->done, fut);
    return fut;
}

static PyMemberDef commhook_members[] = {
    {"__signature__", T_OBJECT, offsetof(CommHook, signature), READONLY, NULL},
    {"inner", T_OBJECT, offsetof(CommHook, inner), READONLY, "the wrapped hook"},
    {NULL, 0, 0, 0, NULL},
};

/* The inner hook's name: DDP checks some hooks by name (bf16 compression
 * needs NCCL support), and those checks must see the hook that runs. */
static PyObject *commhook_get_name(CommHook *k, void *closure)
{
    PyObject *name = PyObject_GetAttrString(k->inner, (const char *)closure);
    if (name == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        name = PyUnicode_FromString("ddp_comm_hook");
    }
    return name;
}

static PyGetSetDef commhook_getset[] = {
    {"__name__", (getter)commhook_get_name, NULL, "the inner hook's name", "__name__"},
    {"__qualname__", (getter)commhook_get_name, NULL, "the inner hook's qualified name",
     "__qualname__"},
    {NULL, NULL, NULL, NULL, NULL},
};

/* inspect.Signature of hook(state, bucket). */
static PyObject *hook_signature(void)
{
    PyObject *inspect = PyImport_ImportModule("inspect"), *param = NULL, *kind = NULL;
    PyObject *state = NULL, *bucket = NULL, *sig = NULL;
    if (inspect == NULL || (param = PyObject_GetAttrString(inspect, "Parameter")) == NULL ||
        (kind = PyObject_GetAttrString(param, "POSITIONAL_OR_KEYWORD")) == NULL)
        goto out;
    state = PyObject_CallFunction(param, "sO", "state", kind);
    bucket = state ? PyObject_CallFunction(param, "sO", "bucket", kind) : NULL;
    if (bucket != NULL)
        sig = PyObject_CallMethod(inspect, "Signature", "([OO])", state, bucket);
out:
    Py_XDECREF(bucket);
    Py_XDECREF(state);
    Py_XDECREF(kind);
    Py_XDECREF(param);
    Py_XDECREF(inspect);
    return sig;
}

static PyTypeObject CommHookType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stagefrontier.CommHook",
    .tp_doc = "DDP communication hook: marks the arrival at the last bucket, then calls inner",
    .tp_basicsize = sizeof(CommHook),
    .tp_dealloc = (destructor)commhook_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_call = (ternaryfunc)commhook_call,
    .tp_members = commhook_members,
    .tp_getset = commhook_getset,
};

/* ---- Recorder ---- */

typedef struct {
    PyObject_HEAD Handle *h;
    PyObject *stage_cache; /* str -> StageContext */
    StepContext *step_ctx; /* reused by every step() */
    SyncContext *sync_ctx; /* reused by every sync() */
} Recorder;

static void recorder_dealloc(Recorder *r)
{
    Py_XDECREF(r->stage_cache);
    Py_XDECREF(r->step_ctx);
    Py_XDECREF(r->sync_ctx);
    Py_XDECREF(r->h);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

/* Converts a sequence of str (or None where allowed) into a C array that
 * borrows the strings' UTF-8 buffers; keep seq alive while it is used. */
/* The group names of rec.sync(group=...) and Recorder(sync_groups=...). */
static const char *const sync_group_names[4] = {"world", "dp", "tp", "pp"};

static int sync_group_index(PyObject *o)
{
    for (int g = 0; PyUnicode_Check(o) && g < 4; g++)
        if (PyUnicode_CompareWithASCIIString(o, sync_group_names[g]) == 0)
            return g;
    PyErr_SetString(PyExc_ValueError, "sync group must be 'world', 'dp', 'tp' or 'pp'");
    return -1;
}

static int str_array(PyObject *seq, bool allow_none, const char **out, Py_ssize_t *n)
{
    PyObject *fast = PySequence_Fast(seq, "stages and groups must be sequences of str");
    if (fast == NULL)
        return -1;
    *n = PySequence_Fast_GET_SIZE(fast);
    if (*n > SF_CLIENT_MAX_STAGES) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_ValueError, "too many stages");
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
        if (allow_none && o == Py_None) {
            out[i] = NULL;
            continue;
        }
        if (!PyUnicode_Check(o) || (out[i] = PyUnicode_AsUTF8(o)) == NULL) {
            Py_DECREF(fast);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "stage names and groups must be str");
            return -1;
        }
    }
    Py_DECREF(fast); /* items are owned by seq, which the caller keeps */
    return 0;
}

static int raise_open_error(int r)
{
    if (r == -ENOMEM)
        PyErr_NoMemory();
    else if (r == -EINVAL)
        PyErr_SetString(PyExc_ValueError,
                        "stagefrontier: invalid options (rank < world_size, the socket path, "
                        "role, window and buffer sizes, stage names, parallel sizes that "
                        "multiply to world_size)");
    else
        PyErr_SetFromErrno(PyExc_OSError);
    return -1;
}

static const char *env_set(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* The library answers -EINVAL for any bad option; the job id is the one a
 * user most often gets wrong, so it gets its own message: none found, or
 * one that breaks the rule (docs/CLIENT.md). Same precedence as the library. */
static int check_job_id(const char *given)
{
    static const char *const envs[] = {"SF_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"};
    const char *id = given, *from = "job_id";
    for (size_t i = 0; id == NULL && i < sizeof envs / sizeof envs[0]; i++)
        if ((id = env_set(envs[i])) != NULL)
            from = envs[i];
    if (id == NULL) {
        PyErr_SetString(PyExc_ValueError,
                        "stagefrontier: no job id: pass job_id=, or set SF_JOB_ID (torchrun's "
                        "TORCHELASTIC_RUN_ID and Slurm's SLURM_JOB_ID are used when set)");
        return -1;
    }
    size_t len = strlen(id);
    bool ok = len > 0 && len <= SF_CLIENT_MAX_JOB_ID_LEN;
    for (size_t i = 0; ok && i < len; i++)
        ok = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-", id[i]) !=
             NULL;
    if (!ok) {
        PyErr_Format(PyExc_ValueError,
                     "stagefrontier: malformed job id '%.200s' (from %s): 1..%d characters of "
                     "A-Z, a-z, 0-9, '.', '_', ':' and '-'",
                     id, from, SF_CLIENT_MAX_JOB_ID_LEN);
        return -1;
    }
    return 0;
}

static bool env_disabled(void)
{
    const char *v = env_set("SF_DISABLE");
    return v != NULL && (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes"));
}

/* Said once per process: a Recorder whose socket is not there sends
 * nothing until sfd starts, and training goes on, so it is a warning. */
static int warn_missing_socket_once(const char *given)
{
    static bool warned;
    const char *path = given ? given : env_set("SF_SOCKET");
    if (path == NULL)
        path = SF_DEFAULT_INGEST_SOCKET;
    struct stat st;
    if (warned || stat(path, &st) == 0)
        return 0;
    warned = true;
    return PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                            "stagefrontier: no sfd socket at %s (is sfd running? SF_SOCKET "
                            "names another): nothing is recorded until it appears",
                            path);
}

/* parallel=: a str, a dict or a DeviceMesh, spelt as SF_PARALLEL by
 * stagefrontier.parallel.to_text, then parsed as the library does, so that a
 * malformed one is a ValueError that says why. */
static int parallel_arg(PyObject *value, sf_parallel *ret)
{
    PyObject *mod = PyImport_ImportModule("stagefrontier.parallel");
    if (mod == NULL)
        return -1;
    PyObject *text = PyObject_CallMethod(mod, "to_text", "O", value);
    Py_DECREF(mod);
    if (text == NULL)
        return -1;
    const char *utf8 = PyUnicode_Check(text) ? PyUnicode_AsUTF8(text) : NULL;
    char err[160];
    int r = utf8 != NULL ? sf_parallel_parse(utf8, ret, err, sizeof err) : -1;
    if (utf8 != NULL && r < 0)
        PyErr_Format(PyExc_ValueError, "stagefrontier: parallel: %s", err);
    else if (utf8 == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "stagefrontier: parallel text must be str");
    Py_DECREF(text);
    return r < 0 ? -1 : 0;
}

static int recorder_init(Recorder *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"job_id",
                             "socket",
                             "rank",
                             "world_size",
                             "local_rank",
                             "role",
                             "stages",
                             "groups",
                             "accumulation",
                             "disabled",
                             "event_sample_fraction",
                             "buffer_records",
                             "batch_records",
                             "sync_stages",
                             "window_steps",
                             "warmup_steps",
                             "capture",
                             "heartbeat_ms",
                             "parallel",
                             "sync_groups",
                             NULL};
    sf_client_options o;
    sf_client_options_init(&o);
    PyObject *stages = Py_None, *groups = Py_None, *sync = Py_None, *capture = Py_True;
    PyObject *parallel = Py_None, *sync_groups = Py_None;
    sf_parallel par;
    int disabled = 0;
    unsigned int accumulation = 1, buffer = 0, batch = 0;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "|$zziiizOOIpdIIOiiOiOO", kwlist, &o.job_id, &o.socket_path, &o.rank,
            &o.world_size, &o.local_rank, &o.role, &stages, &groups, &accumulation, &disabled,
            &o.event_sample_fraction, &buffer, &batch, &sync, &o.window_steps, &o.warmup_steps,
            &capture, &o.heartbeat_ms, &parallel, &sync_groups))
        return -1;
    if (self->h != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Recorder already initialised");
        return -1;
    }
    bool live = !disabled && !env_disabled();
    if (live && check_job_id(o.job_id) < 0)
        return -1;
    const char *names[SF_CLIENT_MAX_STAGES], *grps[SF_CLIENT_MAX_STAGES];
    Py_ssize_t n = 0, ng = 0;
    if (stages != Py_None) {
        if (str_array(stages, false, names, &n) < 0)
            return -1;
        o.stage_names = names;
        o.n_stages = (uint32_t)n;
    }
    if (groups != Py_None) {
        if (str_array(groups, true, grps, &ng) < 0)
            return -1;
        if (stages == Py_None || ng != n) {
            PyErr_SetString(PyExc_ValueError, "groups needs stages, one group per stage");
            return -1;
        }
        o.stage_groups = grps;
    }
    const char *syncs[SF_CLIENT_MAX_STAGES];
    Py_ssize_t ns = 0;
    if (sync != Py_None) {
        if (str_array(sync, false, syncs, &ns) < 0)
            return -1;
        o.sync_stages = syncs;
        o.n_sync_stages = (uint32_t)ns;
    }
    /* sync_groups: one group per sync_stages entry, or a dict stage -> group
     * (stages not named: world). */
    const char *sgroups[SF_CLIENT_MAX_STAGES];
    if (sync_groups != Py_None) {
        if (sync == Py_None) {
            PyErr_SetString(PyExc_ValueError, "sync_groups needs sync_stages");
            return -1;
        }
        for (Py_ssize_t i = 0; i < ns; i++) {
            PyObject *g = NULL, *owned = NULL;
            if (PyDict_Check(sync_groups)) {
                g = PyDict_GetItemString(sync_groups, syncs[i]);
            } else {
                Py_ssize_t len = PySequence_Size(sync_groups);
                if (len != ns) {
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_ValueError,
                                        "sync_groups: one group per sync stage, or a dict");
                    return -1;
                }
                g = owned = PySequence_GetItem(sync_groups, i);
                if (g == NULL)
                    return -1;
            }
            int gi = g == NULL || g == Py_None ? 0 : sync_group_index(g);
            Py_XDECREF(owned);
            if (gi < 0)
                return -1;
            sgroups[i] = sync_group_names[gi];
        }
        o.sync_groups = sgroups;
    }
    if (parallel != Py_None) {
        if (parallel_arg(parallel, &par) < 0)
            return -1;
        o.parallel = &par;
    }
    o.accumulation = accumulation;
    o.disabled = disabled;
    o.buffer_records = buffer;
    o.batch_records = batch;

    Handle *h = PyObject_New(Handle, &HandleType);
    if (h == NULL)
        return -1;
    h->c = NULL;
    h->any_step = false;
    h->last_step = -1;
    h->pending_wait_ns = 0;
    h->cap = (struct sfpy_capture){0};
    int r = sf_client_open(&o, &h->c);
    if (r < 0) {
        Py_DECREF(h);
        return raise_open_error(r);
    }
    if (sfpy_capture_install(h->c, &h->cap, capture) < 0) {
        Py_DECREF(h);
        return -1;
    }
    if (live && warn_missing_socket_once(o.socket_path) < 0) { /* warnings turned errors */
        Py_DECREF(h);
        return -1;
    }
    self->h = h;
    self->stage_cache = PyDict_New();
    self->step_ctx = PyObject_New(StepContext, &StepContextType);
    self->sync_ctx = PyObject_New(SyncContext, &SyncContextType);
    if (self->sync_ctx != NULL) {
        Py_INCREF(h);
        self->sync_ctx->h = h;
        self->sync_ctx->done = done_new(h);
    }
    if (self->stage_cache == NULL || self->step_ctx == NULL || self->sync_ctx == NULL ||
        self->sync_ctx->done == NULL)
        return -1;
    Py_INCREF(h);
    self->step_ctx->h = h;
    self->step_ctx->explicit_step = false;
    self->step_ctx->step = 0;
    return 0;
}

static bool recorder_ready(Recorder *r)
{
    if (r->h != NULL)
        return true;
    PyErr_SetString(PyExc_RuntimeError, "Recorder not initialised");
    return false;
}

/* ValueError naming the stages the schema has, so a typo shows its fix. */
static PyObject *raise_unknown_stage(const sf_client *c, PyObject *name)
{
    int n = sf_stage_count(c);
    PyObject *known = PyList_New(0);
    if (known == NULL)
        return NULL;
    for (int i = 0; i < n - 1; i++) { /* the residual is never timed */
        PyObject *s = PyUnicode_FromString(sf_stage_name(c, i));
        if (s == NULL || PyList_Append(known, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(known);
            return NULL;
        }
        Py_DECREF(s);
    }
    PyErr_Format(PyExc_ValueError, "unknown stage %R; known stages: %R", name, known);
    Py_DECREF(known);
    return NULL;
}

static PyObject *recorder_stage(Recorder *r, PyObject *name)
{
    if (!recorder_ready(r))
        return NULL;
    PyObject *ctx = PyDict_GetItemWithError(r->stage_cache, name);
    if (ctx != NULL) {
        Py_INCREF(ctx);
        return ctx;
    }
    if (PyErr_Occurred())
        return NULL;
    const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (s == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "stage name must be str");
        return NULL;
    }
    StageContext *sc = PyObject_New(StageContext, &StageContextType);
    if (sc == NULL)
        return NULL;
    Py_INCREF(r->h);
    sc->h = r->h;
    int id = r->h->c != NULL ? sf_stage_id(r->h->c, s) : -1;
    if (id < 0 && r->h->c != NULL && sf_stage_count(r->h->c) > 0) {
        Py_DECREF(sc);
        return raise_unknown_stage(r->h->c, name);
    }
    sc->id = id >= 0 ? id : -1; /* a closed or disabled client times nothing */
    if (PyDict_GET_SIZE(r->stage_cache) < STAGE_CACHE_MAX &&
        PyDict_SetItem(r->stage_cache, name, (PyObject *)sc) < 0) {
        Py_DECREF(sc);
        return NULL;
    }
    return (PyObject *)sc;
}

static PyObject *recorder_step(Recorder *r, PyObject *const *args, Py_ssize_t nargs)
{
    if (!recorder_ready(r))
        return NULL;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "step() takes at most one argument");
        return NULL;
    }
    StepContext *s = r->step_ctx;
    s->explicit_step = nargs == 1 && args[0] != Py_None;
    if (s->explicit_step) {
        long long v = PyLong_AsLongLong(args[0]);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        if (v < 0) {
            PyErr_SetString(PyExc_ValueError, "step index must be >= 0");
            return NULL;
        }
        s->step = v;
    }
    Py_INCREF(s);
    return (PyObject *)s;
}

static PyObject *recorder_probe(Recorder *r, PyObject *name)
{
    if (!recorder_ready(r))
        return NULL;
    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "probe name must be str");
        return NULL;
    }
    if (PyUnicode_AsUTF8(name) == NULL) /* encodes once; enter/exit reuse it */
        return NULL;
    ProbeContext *p = PyObject_New(ProbeContext, &ProbeContextType);
    if (p == NULL)
        return NULL;
    Py_INCREF(r->h);
    p->h = r->h;
    Py_INCREF(name);
    p->name = name;
    return (PyObject *)p;
}

static PyObject *recorder_data(Recorder *r, PyObject *iterable)
{
    if (!recorder_ready(r))
        return NULL;
    PyObject *it = PyObject_GetIter(iterable);
    if (it == NULL)
        return NULL;
    DataIter *d = PyObject_New(DataIter, &DataIterType);
    if (d == NULL) {
        Py_DECREF(it);
        return NULL;
    }
    Py_INCREF(r->h);
    d->h = r->h;
    d->it = it;
    return (PyObject *)d;
}

static PyObject *recorder_arrive(Recorder *r, PyObject *unused)
{
    (void)unused;
    if (!recorder_ready(r))
        return NULL;
    return PyLong_FromLong(r->h->c != NULL ? sf_stage_arrive(r->h->c) : 0);
}

static PyObject *recorder_issue(Recorder *r, PyObject *unused)
{
    (void)unused;
    if (!recorder_ready(r))
        return NULL;
    int rc = r->h->c != NULL ? sf_stage_issue(r->h->c) : 0;
    return PyLong_FromLong(rc < 0 ? rc : 0);
}

/* rec.sync(group=None): group names the group the collective spans, for
 * the reader; the stage's group is the one given in sync_groups. */
static PyObject *recorder_sync(Recorder *r, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *group = nargs == 1 ? args[0] : NULL;
    if (nargs + nk > 1 ||
        (nk == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "group") != 0)) {
        PyErr_SetString(PyExc_TypeError, "sync(group=None)");
        return NULL;
    }
    if (nk == 1)
        group = args[0];
    if (group != NULL && group != Py_None && sync_group_index(group) < 0)
        return NULL;
    if (!recorder_ready(r))
        return NULL;
    Py_INCREF(r->sync_ctx);
    return (PyObject *)r->sync_ctx;
}

static PyObject *recorder_mark_send(Recorder *r, PyObject *unused)
{
    (void)unused;
    if (!recorder_ready(r))
        return NULL;
    return PyLong_FromLong(r->h->c != NULL ? sf_sync_send(r->h->c) : 0);
}

static PyObject *recorder_charge_data_wait(Recorder *r, PyObject *args)
{
    long long step, ns;
    if (!recorder_ready(r) || !PyArg_ParseTuple(args, "LL", &step, &ns))
        return NULL;
    int rc = r->h->c != NULL ? sf_charge_data_wait(r->h->c, step, ns) : 0;
    return PyLong_FromLong(rc);
}

static PyObject *recorder_stats(Recorder *r, PyObject *unused)
{
    (void)unused;
    if (!recorder_ready(r))
        return NULL;
    sf_client_stats st = {0};
    if (r->h->c != NULL)
        sf_client_get_stats(r->h->c, &st);
    return Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:O,s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "steps",
        (unsigned long long)st.steps, "records_sent", (unsigned long long)st.records_sent,
        "records_dropped", (unsigned long long)st.records_dropped, "batches_sent",
        (unsigned long long)st.batches_sent, "send_syscalls", (unsigned long long)st.send_syscalls,
        "connects", (unsigned long long)st.connects, "reconnects",
        (unsigned long long)st.reconnects, "violations", (unsigned long long)st.violations,
        "connected", st.connected ? Py_True : Py_False, "captures_requested",
        (unsigned long long)st.captures_requested, "captures_done",
        (unsigned long long)st.captures_done, "captures_failed",
        (unsigned long long)st.captures_failed, "captures_unsupported",
        (unsigned long long)st.captures_unsupported, "captures_busy",
        (unsigned long long)st.captures_busy, "control_rejected",
        (unsigned long long)st.control_rejected, "heartbeats_sent",
        (unsigned long long)st.heartbeats_sent);
}

static PyObject *recorder_flush(Recorder *r, PyObject *unused)
{
    (void)unused;
    if (!recorder_ready(r))
        return NULL;
    if (r->h->c != NULL)
        sf_client_flush(r->h->c);
    Py_RETURN_NONE;
}

static PyObject *recorder_close(Recorder *r, PyObject *unused)
{
    (void)unused;
    if (r->h != NULL && r->h->c != NULL) {
        sf_client_close(r->h->c);
        r->h->c = NULL; /* every context becomes a no-op */
    }
    Py_RETURN_NONE;
}

static PyObject *recorder_enter(Recorder *r, PyObject *unused)
{
    (void)unused;
    Py_INCREF(r);
    return (PyObject *)r;
}

static PyObject *recorder_exit(Recorder *r, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    (void)nargs;
    PyObject *res = recorder_close(r, NULL);
    Py_XDECREF(res);
    Py_RETURN_FALSE;
}

static PyObject *recorder_get_stages(Recorder *r, void *closure)
{
    (void)closure;
    if (!recorder_ready(r))
        return NULL;
    int n = r->h->c != NULL ? sf_stage_count(r->h->c) : 0;
    PyObject *t = PyTuple_New(n > 0 ? n : 0);
    for (int i = 0; t != NULL && i < n; i++) {
        PyObject *s = PyUnicode_FromString(sf_stage_name(r->h->c, i));
        if (s == NULL) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

static PyObject *recorder_get_schema_hash(Recorder *r, void *closure)
{
    (void)closure;
    if (!recorder_ready(r))
        return NULL;
    return PyLong_FromUnsignedLongLong(r->h->c ? sf_client_schema_hash(r->h->c) : 0);
}

static PyMethodDef recorder_methods[] = {
    {"stage", (PyCFunction)recorder_stage, METH_O,
     "stage(name) -> context manager timing one ordered stage"},
    {"step", (PyCFunction)(void (*)(void))recorder_step, METH_FASTCALL,
     "step([index]) -> context manager for one training step (index: previous + 1)"},
    {"probe", (PyCFunction)recorder_probe, METH_O,
     "probe(name) -> context manager for a side-channel probe (may nest)"},
    {"data", (PyCFunction)recorder_data, METH_O,
     "data(iterable) -> iterator that charges each next() to the step that consumes it"},
    {"arrive", (PyCFunction)recorder_arrive, METH_NOARGS,
     "arrive() -> 0 or -errno: marks the arrival in the open synchronizing stage"},
    {"issue", (PyCFunction)recorder_issue, METH_NOARGS,
     "issue() -> 0 or -errno: marks the issue of the open synchronizing stage's collective"},
    {"sync", (PyCFunction)(void (*)(void))recorder_sync, METH_FASTCALL | METH_KEYWORDS,
     "sync(group=None) -> context manager around a collective call: marks the arrival at "
     "entry and adds entry to exit to the stage's accumulated sync wait; its "
     "issued(work=None) marks the issue, and the completion through work's future"},
    {"mark_send", (PyCFunction)recorder_mark_send, METH_NOARGS,
     "mark_send() -> 0 or -errno: a pipeline send, a sync point without a wait: marks the "
     "arrival and counts one sync point"},
    {"charge_data_wait", (PyCFunction)recorder_charge_data_wait, METH_VARARGS,
     "charge_data_wait(step, ns) -> 0 or -errno"},
    {"stats", (PyCFunction)recorder_stats, METH_NOARGS, "client counters as a dict"},
    {"flush", (PyCFunction)recorder_flush, METH_NOARGS, "one non-blocking send attempt"},
    {"close", (PyCFunction)recorder_close, METH_NOARGS, "flush without blocking and close"},
    {"__enter__", (PyCFunction)recorder_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))recorder_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef recorder_getset[] = {
    {"stages", (getter)recorder_get_stages, NULL, "stage names, residual last", NULL},
    {"schema_hash", (getter)recorder_get_schema_hash, NULL, "the schema hash sent", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RecorderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stagefrontier.Recorder",
    .tp_doc = "Recorder(*, job_id=None, socket=None, rank=-1, world_size=-1, local_rank=-1, "
              "role=None, stages=None, groups=None, accumulation=1, disabled=False, "
              "event_sample_fraction=0.0, buffer_records=0, batch_records=0, sync_stages=None, "
              "window_steps=-1, warmup_steps=-1, capture=True, heartbeat_ms=-1, parallel=None, "
              "sync_groups=None)",
    .tp_basicsize = sizeof(Recorder),
    .tp_dealloc = (destructor)recorder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = recorder_methods,
    .tp_getset = recorder_getset,
    .tp_init = (initproc)recorder_init,
    .tp_new = PyType_GenericNew,
};

static PyObject *module_ddp_comm_hook(PyObject *mod, PyObject *args, PyObject *kwds)
{
    (void)mod;
    static char *kwlist[] = {"rec", "inner", NULL};
    PyObject *rec, *inner = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!|O", kwlist, &RecorderType, &rec, &inner))
        return NULL;
    if (!recorder_ready((Recorder *)rec))
        return NULL;
    if (inner == Py_None) {
        PyObject *hooks =
            PyImport_ImportModule("torch.distributed.algorithms.ddp_comm_hooks.default_hooks");
        if (hooks == NULL)
            return NULL;
        inner = PyObject_GetAttrString(hooks, "allreduce_hook");
        Py_DECREF(hooks);
        if (inner == NULL)
            return NULL;
    } else {
        Py_INCREF(inner);
    }
    if (!PyCallable_Check(inner)) {
        Py_DECREF(inner);
        PyErr_SetString(PyExc_TypeError, "inner must be a DDP comm hook (callable)");
        return NULL;
    }
    CommHook *k = PyObject_New(CommHook, &CommHookType);
    if (k == NULL) {
        Py_DECREF(inner);
        return NULL;
    }
    k->h = ((Recorder *)rec)->h;
    Py_INCREF(k->h);
    k->inner = inner;
    k->done = done_new(k->h);
    k->is_last_name = k->done ? PyUnicode_InternFromString("is_last") : NULL;
    k->signature = k->is_last_name ? hook_signature() : NULL;
    if (k->signature == NULL) {
        Py_DECREF(k);
        return NULL;
    }
    return (PyObject *)k;
}

static PyMethodDef module_methods[] = {
    {"ddp_comm_hook", (PyCFunction)(void (*)(void))module_ddp_comm_hook,
     METH_VARARGS | METH_KEYWORDS,
     "ddp_comm_hook(rec, inner=None) -> hook for model.register_comm_hook(state, hook): marks "
     "rec's arrival when the step's last gradient bucket is handed to communication, then "
     "calls inner (default: torch's allreduce_hook); gradients are inner's, unchanged"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "stagefrontier._stagefrontier",
    .m_doc = "StageFrontier per-step stage telemetry (libsfclient binding).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__stagefrontier(void);
PyMODINIT_FUNC PyInit__stagefrontier(void)
{
    PyTypeObject *types[] = {&HandleType,       &StageContextType, &StepContextType,
                             &ProbeContextType, &DataIterType,     &RecorderType,
                             &SyncContextType,  &CommHookType,     &DoneType};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (PyType_Ready(types[i]) < 0)
            return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    PyObject *defaults = PyTuple_New(6);
    for (int i = 0; defaults != NULL && i < 6; i++)
        PyTuple_SET_ITEM(defaults, i, PyUnicode_FromString(default_stages[i]));
    Py_INCREF(&RecorderType);
    if (defaults == NULL || PyModule_AddObject(m, "DEFAULT_STAGES", defaults) < 0 ||
        PyModule_AddObject(m, "Recorder", (PyObject *)&RecorderType) < 0 ||
        PyModule_AddStringConstant(m, "__version__", "0.1.0") < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
