/* lab.trace._scan: the ftrace text parser's fast path (lab/trace/parser.py).
 *
 * scan() takes a block of whole trace lines and builds the typed events for the lines
 * it is sure of; every other line (headers, LOST markers, unknown events, bodies that
 * do not match, values out of range, non-ASCII text, overlong lines) goes back to the
 * Python path, which does all the accounting.  A line this code accepts is parsed
 * exactly as the Python path's regular expressions parse it (parser.py: _LINE and the
 * body patterns; tests/unit/test_trace_scan.py checks the two agree on generated and
 * fuzzed lines): the comms are matched lazily (shortest first, up to 64 characters,
 * up to the next key), digit runs have the patterns' bounds, a final number must be
 * followed by white space or the line's end.  Linear in the line: at most 65 * 65
 * comm splits are tried on a line, each failing at its first wrong character.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

enum { K_SWITCH, K_WAKEUP, K_WAKING, K_WAKEUP_NEW, K_MIGRATE, K_MOVE_NUMA, K_SWAP_NUMA, K_STICK_NUMA,
       K_FORK, K_EXIT, N_KINDS };

static const char *const KIND_NAMES[N_KINDS] = {
    "sched_switch", "sched_wakeup", "sched_waking", "sched_wakeup_new", "sched_migrate_task",
    "sched_move_numa", "sched_swap_numa", "sched_stick_numa", "sched_process_fork", "sched_process_exit",
};

#define MAX_COMM 64
#define MAX_FIELDS 20

typedef struct {
    long long max_cpus, max_pid, max_nodes;
    Py_ssize_t max_line;
} limits;

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }
static inline int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static inline int is_word(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* 1..maxd digits at p, then a non-digit (every use is followed by one): end, or NULL. */
static const char *digits(const char *p, const char *e, int maxd, long long *v) {
    const char *q = p;
    long long x = 0;
    while (q < e && is_digit(*q)) {
        if (q - p == maxd) return NULL;
        x = x * 10 + (*q - '0');
        q++;
    }
    if (q == p) return NULL;
    *v = x;
    return q;
}

/* -?\d{1,maxd} */
static const char *number(const char *p, const char *e, int maxd, long long *v) {
    int neg = p < e && *p == '-';
    const char *q = digits(p + neg, e, maxd, v);
    if (q && neg) *v = -*v;
    return q;
}

static inline const char *lit(const char *p, const char *e, const char *s, size_t n) {
    return ((size_t)(e - p) >= n && memcmp(p, s, n) == 0) ? p + n : NULL;
}
#define LIT(p, e, s) lit((p), (e), (s), sizeof(s) - 1)

/* (?!\S): the line's end or white space */
static inline int ends(const char *p, const char *e) { return p == e || is_space(*p); }

typedef struct { const char *s; Py_ssize_t n; } span;

/* What a line's fields are before they become Python objects. */
typedef struct {
    int kind;
    long long cpu, pid, tgid; /* tgid -1: None */
    span comm, flags, ts;
    int nf;
    struct { char t; long long v; span s; } f[MAX_FIELDS]; /* t: 'i' int, 's' str */
} parsed;

static inline void fint(parsed *o, long long v) { o->f[o->nf].t = 'i'; o->f[o->nf].v = v; o->nf++; }
static inline void fstr(parsed *o, const char *s, const char *e) {
    o->f[o->nf].t = 's'; o->f[o->nf].s.s = s; o->f[o->nf].s.n = e - s; o->nf++;
}

#define PID_OK(v) ((v) <= L->max_pid)
#define CPU_OK(v) ((v) >= 0 && (v) < L->max_cpus)
#define CPU_OR_NONE_OK(v) ((v) >= -1 && (v) < L->max_cpus)
#define NID_OK(v) ((v) >= -1 && (v) < L->max_nodes)

/* comm=C pid=PID prio=NUM[ success=\d{1,10}] target_cpu=\d{1,5}(?!\S) */
static int body_wakeup(const char *p, const char *e, parsed *o, const limits *L) {
    if (!(p = LIT(p, e, "comm="))) return 0;
    for (int k = 0; k <= MAX_COMM && p + k <= e; k++) {
        const char *q = LIT(p + k, e, " pid=");
        long long pid, prio, t, ignored;
        if (!q || !(q = digits(q, e, 7, &pid)) || !(q = LIT(q, e, " prio=")) || !(q = number(q, e, 10, &prio)))
            continue;
        const char *r = LIT(q, e, " success="), *r2 = NULL;
        if (r && (r = digits(r, e, 10, &ignored)) && (r = LIT(r, e, " target_cpu=")) && (r = digits(r, e, 5, &t)) && ends(r, e))
            r2 = r;
        else if ((r = LIT(q, e, " target_cpu=")) && (r = digits(r, e, 5, &t)) && ends(r, e))
            r2 = r;
        if (!r2) continue;
        if (!(CPU_OK(t) && PID_OK(pid))) return 0;
        fstr(o, p, p + k); fint(o, pid); fint(o, prio); fint(o, t);
        return 1;
    }
    return 0;
}

/* prev_comm=C prev_pid=PID prev_prio=NUM prev_state=\S{1,32} ==> next_comm=C next_pid=PID next_prio=NUM(?!\S) */
static int body_switch(const char *p, const char *e, parsed *o, const limits *L) {
    if (!(p = LIT(p, e, "prev_comm="))) return 0;
    for (int k = 0; k <= MAX_COMM && p + k <= e; k++) {
        const char *q = LIT(p + k, e, " prev_pid=");
        long long pp, ppr, np, npr;
        if (!q || !(q = digits(q, e, 7, &pp)) || !(q = LIT(q, e, " prev_prio=")) || !(q = number(q, e, 10, &ppr)) ||
            !(q = LIT(q, e, " prev_state=")))
            continue;
        const char *st = q;
        while (q < e && !is_space(*q) && q - st < 33) q++;
        if (q == st || q - st > 32) continue;
        const char *st_end = q;
        if (!(q = LIT(q, e, " ==> next_comm="))) continue;
        for (int j = 0; j <= MAX_COMM && q + j <= e; j++) {
            const char *r = LIT(q + j, e, " next_pid=");
            if (!r || !(r = digits(r, e, 7, &np)) || !(r = LIT(r, e, " next_prio=")) || !(r = number(r, e, 10, &npr)) ||
                !ends(r, e))
                continue;
            if (!(PID_OK(pp) && PID_OK(np))) return 0;
            fstr(o, p, p + k); fint(o, pp); fint(o, ppr); fstr(o, st, st_end);
            fstr(o, q, q + j); fint(o, np); fint(o, npr);
            return 1;
        }
    }
    return 0;
}

/* comm=C pid=PID prio=NUM orig_cpu=\d{1,5} dest_cpu=\d{1,5}(?!\S) */
static int body_migrate(const char *p, const char *e, parsed *o, const limits *L) {
    if (!(p = LIT(p, e, "comm="))) return 0;
    for (int k = 0; k <= MAX_COMM && p + k <= e; k++) {
        const char *q = LIT(p + k, e, " pid=");
        long long pid, prio, oc, dc;
        if (!q || !(q = digits(q, e, 7, &pid)) || !(q = LIT(q, e, " prio=")) || !(q = number(q, e, 10, &prio)) ||
            !(q = LIT(q, e, " orig_cpu=")) || !(q = digits(q, e, 5, &oc)) || !(q = LIT(q, e, " dest_cpu=")) ||
            !(q = digits(q, e, 5, &dc)) || !ends(q, e))
            continue;
        if (!(PID_OK(pid) && CPU_OK(oc) && CPU_OK(dc))) return 0;
        fstr(o, p, p + k); fint(o, pid); fint(o, prio); fint(o, oc); fint(o, dc);
        return 1;
    }
    return 0;
}

/* pid=PID tgid=PID ngid=PID src_cpu=NUM src_nid=NUM dst_cpu=NUM dst_nid=NUM(?!\S) */
static int body_move_numa(const char *p, const char *e, parsed *o, const limits *L) {
    long long v[7];
    if (!(p = LIT(p, e, "pid=")) || !(p = digits(p, e, 7, &v[0])) || !(p = LIT(p, e, " tgid=")) ||
        !(p = digits(p, e, 7, &v[1])) || !(p = LIT(p, e, " ngid=")) || !(p = digits(p, e, 7, &v[2])) ||
        !(p = LIT(p, e, " src_cpu=")) || !(p = number(p, e, 10, &v[3])) || !(p = LIT(p, e, " src_nid=")) ||
        !(p = number(p, e, 10, &v[4])) || !(p = LIT(p, e, " dst_cpu=")) || !(p = number(p, e, 10, &v[5])) ||
        !(p = LIT(p, e, " dst_nid=")) || !(p = number(p, e, 10, &v[6])) || !ends(p, e))
        return 0;
    if (!(PID_OK(v[0]) && PID_OK(v[1]) && PID_OK(v[2]) && CPU_OR_NONE_OK(v[3]) && NID_OK(v[4]) &&
          CPU_OR_NONE_OK(v[5]) && NID_OK(v[6])))
        return 0;
    for (int i = 0; i < 7; i++) fint(o, v[i]);
    return 1;
}

/* src_pid= src_tgid= src_ngid= src_cpu= src_nid= dst_pid= dst_tgid= dst_ngid= dst_cpu= dst_nid= */
static int body_pair(const char *p, const char *e, parsed *o, const limits *L) {
    static const char *const keys[10] = {"src_pid=", " src_tgid=", " src_ngid=", " src_cpu=", " src_nid=",
                                         " dst_pid=", " dst_tgid=", " dst_ngid=", " dst_cpu=", " dst_nid="};
    static const int is_pid[10] = {1, 1, 1, 0, 0, 1, 1, 1, 0, 0};
    long long v[10];
    for (int i = 0; i < 10; i++) {
        if (!(p = lit(p, e, keys[i], strlen(keys[i])))) return 0;
        if (!(p = is_pid[i] ? digits(p, e, 7, &v[i]) : number(p, e, 10, &v[i]))) return 0;
    }
    if (!ends(p, e)) return 0;
    for (int i = 0; i < 10; i++)
        if (is_pid[i] && !PID_OK(v[i])) return 0;
    if (!(CPU_OR_NONE_OK(v[3]) && NID_OK(v[4]) && CPU_OR_NONE_OK(v[8]) && NID_OK(v[9]))) return 0;
    for (int i = 0; i < 10; i++) fint(o, v[i]);
    return 1;
}

/* comm=C pid=PID child_comm=C child_pid=PID(?!\S) */
static int body_fork(const char *p, const char *e, parsed *o, const limits *L) {
    if (!(p = LIT(p, e, "comm="))) return 0;
    for (int k = 0; k <= MAX_COMM && p + k <= e; k++) {
        const char *q = LIT(p + k, e, " pid=");
        long long pid, child;
        if (!q || !(q = digits(q, e, 7, &pid)) || !(q = LIT(q, e, " child_comm="))) continue;
        for (int j = 0; j <= MAX_COMM && q + j <= e; j++) {
            const char *r = LIT(q + j, e, " child_pid=");
            if (!r || !(r = digits(r, e, 7, &child)) || !ends(r, e)) continue;
            if (!(PID_OK(pid) && PID_OK(child))) return 0;
            fstr(o, p, p + k); fint(o, pid); fstr(o, q, q + j); fint(o, child);
            return 1;
        }
    }
    return 0;
}

/* comm=C pid=PID prio=NUM(?!\S) */
static int body_exit(const char *p, const char *e, parsed *o, const limits *L) {
    if (!(p = LIT(p, e, "comm="))) return 0;
    for (int k = 0; k <= MAX_COMM && p + k <= e; k++) {
        const char *q = LIT(p + k, e, " pid=");
        long long pid, prio;
        if (!q || !(q = digits(q, e, 7, &pid)) || !(q = LIT(q, e, " prio=")) || !(q = number(q, e, 10, &prio)) ||
            !ends(q, e))
            continue;
        if (!PID_OK(pid)) return 0;
        fstr(o, p, p + k); fint(o, pid); fint(o, prio);
        return 1;
    }
    return 0;
}

static int kind_of(const char *s, Py_ssize_t n) {
    for (int i = 0; i < N_KINDS; i++)
        if ((size_t)n == strlen(KIND_NAMES[i]) && memcmp(s, KIND_NAMES[i], n) == 0) return i;
    return -1;
}

/* The context after the comm's '-' (see parser._LINE): pid, optional (tgid), [cpu],
 * optional irq-info, timestamp, name.  Returns where the body starts, or NULL. */
static const char *context(const char *p, const char *e, parsed *o, span *name) {
    const char *q;
    if (!(q = digits(p, e, 7, &o->pid)) || q == e || *q != ' ') return NULL;
    while (q < e && *q == ' ') q++;
    o->tgid = -1;
    if (q < e && *q == '(') {
        q++;
        while (q < e && *q == ' ') q++;
        if (q < e && *q == '-') {
            while (q < e && *q == '-') q++;
        } else if (!(q = digits(q, e, 7, &o->tgid))) {
            return NULL;
        }
        if (q == e || *q != ')') return NULL;
        q++;
        if (q == e || *q != ' ') return NULL;
        while (q < e && *q == ' ') q++;
    }
    if (q == e || *q != '[') return NULL;
    if (!(q = digits(q + 1, e, 5, &o->cpu)) || q == e || *q != ']') return NULL;
    q++;
    if (q == e || *q != ' ') return NULL;
    while (q < e && *q == ' ') q++;
    /* irq-info: a token of 1..16 characters other than ' ' and ':' followed by spaces;
     * a token followed by ':' is the timestamp itself. */
    const char *t = q;
    while (q < e && *q != ' ' && *q != ':') q++;
    if (q < e && *q == ' ') {
        if (q - t > 16) return NULL;
        o->flags.s = t; o->flags.n = q - t;
        while (q < e && *q == ' ') q++;
    } else {
        o->flags.s = NULL; o->flags.n = 0;
        q = t;
    }
    const char *ts = q;
    while (q < e && is_digit(*q)) q++;
    if (q == ts || q - ts > 20) return NULL;
    if (q < e && *q == '.') {
        const char *d = q + 1;
        while (d < e && is_digit(*d)) d++;
        if (d == q + 1 || d - q - 1 > 12) return NULL;
        q = d;
    }
    o->ts.s = ts; o->ts.n = q - ts;
    if (!(q = LIT(q, e, ": "))) return NULL;
    const char *nm = q;
    while (q < e && is_word(*q)) q++;
    if (q == nm || q - nm > 128 || q == e || *q != ':') return NULL;
    name->s = nm; name->n = q - nm;
    q++;
    if (q == e) return q; /* ':' then the line's end ('$') */
    if (*q != ' ') return NULL;
    return q + 1;
}

/* A parsed line, or 0: *o filled, *name its event name (also for kinds it does not
 * build).  The comm is the shortest that lets the rest parse (parser._LINE's lazy
 * '(.{0,64}?)-'). */
static const char *line_head(const char *p, const char *e, parsed *o, span *name) {
    while (p < e && *p == ' ') p++;
    for (int k = 0; k <= MAX_COMM && p + k < e; k++) {
        if (p[k] != '-') continue;
        const char *body = context(p + k + 1, e, o, name);
        if (body) {
            o->comm.s = p; o->comm.n = k;
            return body;
        }
    }
    return NULL;
}

/* A tiny cache of the str objects made from short spans (comms, irq-info, states
 * repeat on almost every line): fewer allocations, and one object per distinct comm. */
#define CACHE 512
typedef struct { PyObject *str[CACHE]; } strcache;

static PyObject *mkstr(strcache *c, const char *s, Py_ssize_t n) {
    if (n > 32) return PyUnicode_DecodeASCII(s, n, NULL);
    unsigned h = 2166136261u;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    h = (h ^ (unsigned)n) % CACHE;
    PyObject *o = c->str[h];
    if (o && PyUnicode_GET_LENGTH(o) == n && memcmp(PyUnicode_DATA(o), s, n) == 0) {
        Py_INCREF(o);
        return o;
    }
    o = PyUnicode_DecodeASCII(s, n, NULL);
    if (!o) return NULL;
    Py_XDECREF(c->str[h]);
    Py_INCREF(o);
    c->str[h] = o;
    return o;
}

static PyObject *mkts(const char *s, Py_ssize_t n) {
    char buf[40];
    if (n >= (Py_ssize_t)sizeof(buf)) return NULL;
    memcpy(buf, s, n);
    buf[n] = 0;
    double d = PyOS_string_to_double(buf, NULL, NULL);
    if (d == -1.0 && PyErr_Occurred()) return NULL;
    return PyFloat_FromDouble(d);
}

static PyObject *build(PyTypeObject *cls, const parsed *o, strcache *c) {
    Py_ssize_t n = 6 + o->nf;
    PyObject *ev = cls->tp_alloc(cls, n);
    if (!ev) return NULL;
    PyObject *items[6 + MAX_FIELDS];
    items[0] = PyLong_FromLongLong(o->cpu);
    items[1] = mkts(o->ts.s, o->ts.n);
    items[2] = mkstr(c, o->comm.s, o->comm.n);
    items[3] = PyLong_FromLongLong(o->pid);
    if (o->tgid < 0) {
        Py_INCREF(Py_None);
        items[4] = Py_None;
    } else {
        items[4] = PyLong_FromLongLong(o->tgid);
    }
    items[5] = mkstr(c, o->flags.s ? o->flags.s : "", o->flags.n);
    for (int i = 0; i < o->nf; i++)
        items[6 + i] = o->f[i].t == 'i' ? PyLong_FromLongLong(o->f[i].v) : mkstr(c, o->f[i].s.s, o->f[i].s.n);
    int bad = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!items[i]) bad = 1;
        PyTuple_SET_ITEM(ev, i, items[i]); /* NULL items are fine in a tuple being torn down */
    }
    if (bad) {
        Py_DECREF(ev);
        return NULL;
    }
    return ev;
}

typedef int (*body_fn)(const char *, const char *, parsed *, const limits *);
static const body_fn BODIES[N_KINDS] = {
    body_switch, body_wakeup, body_wakeup, body_wakeup, body_migrate,
    body_move_numa, body_pair, body_pair, body_fork, body_exit,
};

/* scan(text, classes, build, counts, max_cpus, max_pid, max_nodes, max_line)
 *   -> (items, fallback, lines, first, last)
 * items: the events, in order, with None where a line goes to the Python path;
 * fallback: [(index in items, line index, line)]; lines: how many lines the text held;
 * first/last: (line index, timestamp text) of the first and last line this code
 * counted as an event, or None.  counts[name] grows by the events it counted (built or
 * not: build[k] false means count only, like parse(only=...)). */
static PyObject *scan(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *text, *classes, *buildflags, *counts;
    limits L;
    if (!PyArg_ParseTuple(args, "UO!O!O!LLLn", &text, &PyTuple_Type, &classes, &PyTuple_Type, &buildflags,
                          &PyDict_Type, &counts, &L.max_cpus, &L.max_pid, &L.max_nodes, &L.max_line))
        return NULL;
    if (PyTuple_GET_SIZE(classes) != N_KINDS || PyTuple_GET_SIZE(buildflags) != N_KINDS) {
        PyErr_SetString(PyExc_ValueError, "scan: one class and one build flag per kind");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text)) {
        PyErr_SetString(PyExc_ValueError, "scan: ASCII text only");
        return NULL;
    }
    PyTypeObject *cls[N_KINDS];
    int do_build[N_KINDS];
    for (int i = 0; i < N_KINDS; i++) {
        PyObject *c = PyTuple_GET_ITEM(classes, i);
        if (!PyType_Check(c) || !PyType_IsSubtype((PyTypeObject *)c, &PyTuple_Type)) {
            PyErr_SetString(PyExc_TypeError, "scan: event classes must be tuple subclasses");
            return NULL;
        }
        cls[i] = (PyTypeObject *)c;
        do_build[i] = PyObject_IsTrue(PyTuple_GET_ITEM(buildflags, i));
    }
    const char *s = (const char *)PyUnicode_DATA(text);
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    long long counted[N_KINDS] = {0};
    Py_ssize_t nlines = 0, first_i = -1, last_i = -1;
    span first_ts = {0}, last_ts = {0};
    strcache cache;
    memset(&cache, 0, sizeof cache);
    PyObject *items = PyList_New(0), *fallback = PyList_New(0), *result = NULL;
    if (!items || !fallback) goto done;

    Py_ssize_t pos = 0;
    while (pos < len) {
        const char *p = s + pos;
        const char *nl = memchr(p, '\n', len - pos);
        const char *e = nl ? nl : s + len;
        Py_ssize_t next = nl ? (nl - s) + 1 : len;
        Py_ssize_t li = nlines++;
        PyObject *ev = NULL;
        int blank = next - pos <= L.max_line; /* an overlong line is counted, even a blank one */
        for (const char *b = p; blank && b < e; b++)
            if (!is_space(*b)) blank = 0;
        if (blank) { /* the Python path ignores blank lines: so does this one */
            pos = next;
            continue;
        }
        if (next - pos <= L.max_line) {
            parsed o;
            span name;
            o.nf = 0;
            const char *body = line_head(p, e, &o, &name);
            int k = body ? kind_of(name.s, name.n) : -1;
            if (k >= 0 && !do_build[k]) { /* counted, not built: no range checks (as in Python) */
                counted[k]++;
                if (first_i < 0) { first_i = li; first_ts = o.ts; }
                last_i = li; last_ts = o.ts;
                pos = next;
                continue;
            }
            if (k >= 0 && o.cpu < L.max_cpus && o.pid <= L.max_pid && o.tgid <= L.max_pid && BODIES[k](body, e, &o, &L)) {
                ev = build(cls[k], &o, &cache);
                if (!ev) goto done;
                counted[k]++;
                if (first_i < 0) { first_i = li; first_ts = o.ts; }
                last_i = li; last_ts = o.ts;
            }
        }
        if (ev) {
            if (PyList_Append(items, ev) < 0) { Py_DECREF(ev); goto done; }
            Py_DECREF(ev);
        } else {
            PyObject *line = PyUnicode_Substring(text, pos, next);
            PyObject *t = line ? Py_BuildValue("(nnN)", PyList_GET_SIZE(items), li, line) : NULL;
            if (!t || PyList_Append(fallback, t) < 0 || PyList_Append(items, Py_None) < 0) { Py_XDECREF(t); goto done; }
            Py_DECREF(t);
        }
        pos = next;
    }
    for (int i = 0; i < N_KINDS; i++) {
        if (!counted[i]) continue;
        PyObject *key = PyUnicode_FromString(KIND_NAMES[i]);
        if (!key) goto done;
        PyObject *old = PyDict_GetItemWithError(counts, key);
        if (!old && PyErr_Occurred()) { Py_DECREF(key); goto done; }
        long long before = old ? PyLong_AsLongLong(old) : 0;
        PyObject *nv = PyLong_FromLongLong(before + counted[i]);
        int rc = nv ? PyDict_SetItem(counts, key, nv) : -1;
        Py_DECREF(key);
        Py_XDECREF(nv);
        if (rc < 0) goto done;
    }
    {
        PyObject *f = Py_None, *l = Py_None;
        if (first_i >= 0) {
            f = Py_BuildValue("(ns#)", first_i, first_ts.s, first_ts.n);
            l = Py_BuildValue("(ns#)", last_i, last_ts.s, last_ts.n);
            if (!f || !l) { Py_XDECREF(f); Py_XDECREF(l); goto done; }
        } else {
            Py_INCREF(f);
            Py_INCREF(l);
        }
        result = Py_BuildValue("(OOnNN)", items, fallback, nlines, f, l);
    }
done:
    for (int i = 0; i < CACHE; i++) Py_XDECREF(cache.str[i]);
    Py_XDECREF(items);
    Py_XDECREF(fallback);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Parse a block of ftrace lines into events (see lab/trace/_scan.c)."},
    {NULL, NULL, 0, NULL},
};

static PyObject *kinds(void) {
    PyObject *t = PyTuple_New(N_KINDS);
    for (int i = 0; t && i < N_KINDS; i++) PyTuple_SET_ITEM(t, i, PyUnicode_FromString(KIND_NAMES[i]));
    return t;
}

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", "ftrace text fast path", -1, methods};

PyMODINIT_FUNC PyInit__scan(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddObject(m, "KINDS", kinds()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
