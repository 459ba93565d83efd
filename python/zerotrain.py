"""zerotrain from Python: a ctypes binding of libzerotrain's unit API (no compiled extension).

Two levels:

* ``Engine``: the C API as it is (units, parameters, acquire/release/grads_ready, step,
  checkpoints, reports) with the unit buffers as numpy views.
* ``Optimizer``: zerotrain as the optimizer of a trainer that computes its own gradients
  (numpy, PyTorch): it hands its flat float32 parameter and gradient arrays over, and
  zerotrain's sharded AdamW / 8-bit AdamW / Adafactor, with the optimizer state offloaded if
  asked, updates the arrays in place.

MPI: when mpi4py has initialised MPI, the engine runs on its COMM_WORLD (or the communicator
given); otherwise the binding initialises MPI itself (and finalises it at exit). Run several
ranks with ``mpirun -np N python3 script.py``; each rank's gradients are *summed* over the
ranks, so each rank passes its share of the global batch's mean gradient.

The library is found through $ZEROTRAIN_LIB, then next to this file's checkout
(build/libzerotrain.so), then the system's loader path (libzerotrain.so.ABI). It is loaded
into the running interpreter as it is, in any order with numpy, PyTorch and mpi4py: it links
no allocator and leaves the process's malloc alone (its large buffers are mappings of its
own), so nothing has to be preloaded and the interpreter is never restarted.

Unit buffers are handed out as View objects, not numpy arrays: numpy cannot take memory
back from an array that holds it, and the engine frees its buffers on close, so every
access to a View checks that its engine is still open (Error otherwise).
"""
import atexit
import ctypes
import json
import math
import numbers
import os
import sys
import weakref

import numpy as np

ABI_VERSION = 10
FOR_FORWARD, FOR_BACKWARD, FOR_RECOMPUTE, FOR_EVAL = 1, 2, 4, 8
INIT_NORMAL, INIT_ZEROS, INIT_ONES, INIT_VALUES = 0, 1, 2, 3


class Error(RuntimeError):
    """A zerotrain call failed: the message is the library's (what, where)."""


class _ParamSpec(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("ndim", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("init", ctypes.c_int),
                ("std", ctypes.c_float), ("values", ctypes.POINTER(ctypes.c_float)),
                ("no_decay", ctypes.c_int), ("alias", ctypes.c_char_p)]


class _ParamInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("alias", ctypes.c_char_p), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * 4), ("numel", ctypes.c_size_t),
                ("unit", ctypes.c_int), ("decay", ctypes.c_int), ("offset", ctypes.c_size_t)]


class _TrainState(ctypes.Structure):
    _fields_ = [("step", ctypes.c_int64), ("samples", ctypes.c_uint64), ("seed", ctypes.c_uint64)]


class _StepInfo(ctypes.Structure):
    _fields_ = [("grad_norm", ctypes.c_double), ("clip_coef", ctypes.c_float),
                ("step", ctypes.c_int64), ("lr", ctypes.c_float), ("skipped", ctypes.c_int),
                ("nonfinite_unit", ctypes.c_int), ("overflow", ctypes.c_int),
                ("loss_scale", ctypes.c_double)]


_lib = None
_mpi = None
_live = weakref.WeakSet()  # engines not closed yet: closed at exit, before MPI is finalised
_closer = []


_I64P = ctypes.POINTER(ctypes.c_int64)


class _Batch(ctypes.Structure):  # zt_batch
    _fields_ = [("B", ctypes.c_int), ("T", ctypes.c_int), ("input_ids", _I64P),
                ("attention_mask", _I64P), ("token_type_ids", _I64P), ("labels", _I64P),
                ("first_sample", ctypes.c_uint64), ("label_count", ctypes.c_int64),
                ("T_dec", ctypes.c_int), ("decoder_attention_mask", _I64P),
                ("label_values", ctypes.POINTER(ctypes.c_float)), ("sentence_order_label", _I64P),
                ("aux_count", ctypes.c_int64), ("replacement_ids", _I64P)]


_HOOK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                         ctypes.POINTER(ctypes.c_float), ctypes.c_int, ctypes.c_int)


class _GenConfig(ctypes.Structure):  # zt_generate_config
    _fields_ = [("max_new_tokens", ctypes.c_int), ("num_beams", ctypes.c_int),
                ("length_penalty", ctypes.c_float), ("early_stopping", ctypes.c_int),
                ("use_cache", ctypes.c_int), ("eos_token_id", ctypes.c_int),
                ("pad_token_id", ctypes.c_int), ("logits_hook", _HOOK),
                ("hook_arg", ctypes.c_void_p)]


_EST_FIELDS = ("num_params", "padded_params", "param_bytes", "grad_bytes", "master_bytes",
               "optimizer_bytes_per_param", "model_state_bytes", "buffer_bytes",
               "activation_bytes", "nvme_bytes", "params_nvme", "grads_nvme", "optimizer_nvme",
               "params_ram", "grads_ram", "optimizer_ram", "comm_bytes", "io_bytes",
               "peak_bytes")


class _Estimate(ctypes.Structure):  # zt_estimate
    _fields_ = [("world_size", ctypes.c_int), ("zero_stage", ctypes.c_int),
                ("precision", ctypes.c_int)] + [(f, ctypes.c_double) for f in _EST_FIELDS]


class _ModelInfo(ctypes.Structure):  # zt_model_info
    _fields_ = [("model_type", ctypes.c_char * 16), ("vocab_size", ctypes.c_int),
                ("hidden_size", ctypes.c_int), ("num_layers", ctypes.c_int),
                ("num_heads", ctypes.c_int), ("intermediate_size", ctypes.c_int),
                ("max_positions", ctypes.c_int), ("type_vocab_size", ctypes.c_int),
                ("num_parameters", ctypes.c_size_t), ("num_tensors", ctypes.c_int),
                ("num_units", ctypes.c_int), ("num_decoder_layers", ctypes.c_int),
                ("head_dim", ctypes.c_int), ("architecture", ctypes.c_char * 48),
                ("num_labels", ctypes.c_int), ("problem_type", ctypes.c_int),
                ("pad_token_id", ctypes.c_int), ("bos_token_id", ctypes.c_int),
                ("eos_token_id", ctypes.c_int), ("generator_hidden_size", ctypes.c_int),
                ("generator_layers", ctypes.c_int), ("generator_heads", ctypes.c_int),
                ("generator_intermediate_size", ctypes.c_int)]


def _close_all():
    for e in list(_live):
        e.close()


def _load():
    global _lib, _mpi
    if _lib is not None:
        return _lib
    # Open MPI's components resolve libmpi's symbols globally: load it so first
    for name in ("libmpi.so.40", "libmpi.so"):
        try:
            _mpi = ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
            break
        except OSError:
            pass
    here = os.path.dirname(os.path.abspath(__file__))
    tries = [os.environ.get("ZEROTRAIN_LIB"),
             os.path.join(here, "..", "build", "libzerotrain.so"),
             "libzerotrain.so.%d" % ABI_VERSION]
    err = None
    for path in tries:
        if not path or (path.startswith("/") and not os.path.exists(path)):
            continue
        try:
            _lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
            break
        except OSError as e:
            err = e
    if _lib is None:
        raise Error("libzerotrain not found (set ZEROTRAIN_LIB): %s" % err)
    L = _lib
    L.zt_abi_version.restype = ctypes.c_int
    if L.zt_abi_version() != ABI_VERSION:
        raise Error("libzerotrain has ABI %d, this binding %d" % (L.zt_abi_version(),
                                                                  ABI_VERSION))
    vp, ip, cp = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
    sigs = {
        "zt_version": (cp, []), "zt_last_error": (cp, []), "zt_engine_last_error": (cp, [vp]),
        "zt_config_size": (ctypes.c_size_t, []), "zt_config_init": (None, [vp]),
        "zt_config_set": (ip, [vp, cp, cp]), "zt_config_key": (cp, [ip]),
        "zt_engine_create": (ip, [vp, vp, ctypes.POINTER(vp)]),
        "zt_engine_destroy": (None, [vp]),
        "zt_engine_add_unit": (ip, [vp, cp, ip, ctypes.POINTER(ip)]),
        "zt_engine_add_param": (ip, [vp, ip, ctypes.POINTER(_ParamSpec), ctypes.POINTER(ip)]),
        "zt_engine_commit": (ip, [vp]), "zt_engine_unit_count": (ip, [vp]),
        "zt_engine_rank": (ip, [vp]), "zt_engine_world_size": (ip, [vp]),
        "zt_engine_param_count": (ip, [vp]), "zt_engine_param_dtype": (ip, [vp]),
        "zt_engine_param_get": (ip, [vp, ip, ctypes.POINTER(_ParamInfo)]),
        "zt_engine_unit_acquire": (ip, [vp, ip, ip, ctypes.POINTER(ctypes.POINTER(ctypes.c_float)),
                                        ctypes.POINTER(ctypes.POINTER(ctypes.c_float))]),
        "zt_engine_unit_release": (ip, [vp, ip]), "zt_engine_unit_grads_ready": (ip, [vp, ip]),
        "zt_engine_step": (ip, [vp, ctypes.c_float, ctypes.POINTER(_StepInfo)]),
        "zt_engine_zero_grad": (ip, [vp]), "zt_engine_save_model": (ip, [vp, cp]),
        "zt_engine_set_save_dtype": (ip, [vp, ip]),
        "zt_engine_loss_scale": (ctypes.c_double, [vp]),
        "zt_checkpoint_save": (ip, [vp, cp, ctypes.POINTER(_TrainState), cp, ip]),
        "zt_checkpoint_load": (ip, [vp, cp, ctypes.POINTER(_TrainState)]),
        "zt_checkpoint_find_latest": (ip, [cp, cp, ctypes.c_size_t]),
        "zt_engine_report_json": (ip, [vp, cp, ctypes.c_size_t]),
        "zt_engine_pass_abort": (ip, [vp]), "zt_memory_heap_source": (cp, []),
        "zt_engine_model_info": (ip, [vp, ctypes.POINTER(_ModelInfo)]),
        "zt_engine_label_name": (cp, [vp, ip]),
        "zt_predict_classify": (ip, [vp, ctypes.POINTER(_Batch), ctypes.POINTER(ctypes.c_float)]),
        "zt_predict_fill_mask": (ip, [vp, ctypes.POINTER(_Batch), ctypes.c_int64, ip, ip,
                                      ctypes.POINTER(ctypes.c_int32),
                                      ctypes.POINTER(ctypes.c_float), _I64P]),
        "zt_estimate_memory": (ip, [vp, ip, ctypes.c_double, ctypes.c_size_t,
                                    ctypes.POINTER(_Estimate)]),
        "zt_generate_config_init": (None, [ctypes.POINTER(_GenConfig)]),
        "zt_generate": (ip, [vp, ctypes.POINTER(_Batch), ctypes.POINTER(_GenConfig),
                             ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int),
                             ctypes.POINTER(ctypes.c_float)]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(L, name)
        f.restype, f.argtypes = res, args
    return L


def _comm_handle(comm):
    """The C MPI_Comm for comm (an mpi4py communicator, or None: COMM_WORLD)."""
    if "mpi4py.MPI" in sys.modules or comm is not None:
        from mpi4py import MPI
        if MPI.Is_initialized():
            return ctypes.c_void_p(MPI._handleof(comm if comm is not None else MPI.COMM_WORLD))
    if _mpi is None:
        raise Error("libmpi not found")
    flag = ctypes.c_int(0)
    _mpi.MPI_Initialized(ctypes.byref(flag))
    if not flag.value:
        if _mpi.MPI_Init(None, None) != 0:
            raise Error("MPI_Init failed")

        def fin():
            done = ctypes.c_int(0)
            _mpi.MPI_Finalized(ctypes.byref(done))
            if not done.value:
                _mpi.MPI_Finalize()
        atexit.register(fin)
    return ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(_mpi, "ompi_mpi_comm_world")))


def _check_lr(lr):
    """lr as the float32 the engine gets, refused unless a finite number >= 0 (also as float32:
    1e39 would reach the engine as inf)."""
    if isinstance(lr, bool) or not isinstance(lr, numbers.Real):
        raise Error("learning rate must be a number, not %r" % (lr,))
    with np.errstate(over="ignore"):
        f = float(np.float32(lr))
    if not (math.isfinite(f) and f >= 0):
        raise Error("learning rate %r is not a finite float32 >= 0" % (lr,))
    return f


def version():
    return _load().zt_version().decode()


def _config(L, config, keep):
    """A zt_config from fields by name (zt_config_set); keep holds the borrowed strings."""
    cfg = ctypes.create_string_buffer(L.zt_config_size())
    L.zt_config_init(cfg)
    for k, v in config.items():
        if isinstance(v, bool):
            v = int(v)
        s = str(v).encode()
        keep.append(s)
        if L.zt_config_set(cfg, k.encode(), s) != 0:
            raise Error(L.zt_last_error().decode())
    return cfg


def estimate_memory(world_size, num_params=0, unit_params=0, **config):
    """Bytes per rank a configuration needs, before anything is allocated
    (zt_estimate_memory, what `zerotrain estimate` prints): config names zt_config fields
    (model_preset="bert-base" or model_dir=..., zero_stage, precision "fp32"/"bf16"/"fp16",
    optimizer, offload_optimizer, offload_param, plan_micro_batch and plan_seq_len for the
    activations, recompute, ...), or num_params > 0 and no model. Returns a dict of the
    zt_estimate fields (model_state_bytes, buffer_bytes, activation_bytes, nvme_bytes,
    peak_bytes, ...)."""
    L = _load()
    keep = []
    cfg = _config(L, config, keep)
    out = _Estimate()
    if L.zt_estimate_memory(cfg, int(world_size), float(num_params), int(unit_params),
                            ctypes.byref(out)) != 0:
        raise Error(L.zt_last_error().decode())
    return {f: getattr(out, f) for f, _ in _Estimate._fields_}


_load()  # at import: a missing or mismatched library is reported before anything else runs


class View:
    """A window on one of an engine's buffers: a unit's parameters or gradients (from
    Engine.acquire), or one parameter within them (Engine.param). Reading gives numpy copies
    (v[...], v[i:j], np.asarray(v), v.numpy()); writing goes through item assignment
    (v[...] = a, v[i] += x). Valid until the unit is released (gradients: until grads_ready);
    after Engine.close() every access raises Error, since the memory is freed by then."""

    __slots__ = ("_a", "_live", "_what", "_kind")

    def __init__(self, a, live, what, kind):
        self._a, self._live, self._what, self._kind = a, live, what, kind

    def _get(self):
        if not self._live[0]:
            raise Error("%s: used after Engine.close() (the engine's buffers are freed)" %
                        self._what)
        return self._a

    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    size = property(lambda self: self._a.size)
    ndim = property(lambda self: self._a.ndim)

    def __len__(self):
        return len(self._a)

    def __getitem__(self, k):
        r = self._get()[k]
        return r.copy() if isinstance(r, np.ndarray) else r

    def __setitem__(self, k, v):
        self._get()[k] = v

    def __array__(self, dtype=None, copy=None):
        return np.array(self._get(), dtype=dtype, copy=True)

    def numpy(self):
        """A copy of the values as a numpy array."""
        return self._get().copy()

    def _sub(self, off, n, shape, name):
        return View(self._get()[off:off + n].reshape(shape), self._live,
                    "parameter %s's %s" % (name, self._kind), self._kind)

    def __repr__(self):
        state = "open" if self._live[0] else "closed"
        return "<zerotrain.View %s %s %s (%s)>" % (self._what, self.shape, self._a.dtype, state)


def widen_bf16(bits):
    """bf16 bit patterns (a uint16 array, as a bf16 engine's parameter Views hold them) as
    float32 values (exact)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


class Engine:
    """One zerotrain engine with a model of the caller's own. config: zt_config fields by name
    (zero_stage=3, optimizer="adamw8bit", offload_optimizer="cpu", lr=1e-3, ...)."""

    def __init__(self, comm=None, **config):
        L = _load()
        self._L = L
        self._h = None
        self._keep = []  # the borrowed strings, alive until create copied them
        self._comm = _comm_handle(comm)
        cfg = _config(L, config, self._keep)
        h = ctypes.c_void_p()
        if L.zt_engine_create(cfg, self._comm, ctypes.byref(h)) != 0:
            raise Error(L.zt_last_error().decode())
        self._h = h
        if not _closer:  # (registered after MPI's finaliser, so it runs before it)
            atexit.register(_close_all)
            _closer.append(1)
        _live.add(self)
        self.rank = L.zt_engine_rank(h)
        self.size = L.zt_engine_world_size(h)
        self._units = []  # per unit: its floats
        self._params = {}  # name -> (unit, offset, shape)
        self._live = [True]  # shared with every View handed out; False once closed

    def _check(self, rc):
        if rc < 0:
            raise Error(self._L.zt_engine_last_error(self._h).decode())
        return rc

    def _handle(self):
        if self._h is None:
            raise Error("the engine is closed")
        return self._h

    def close(self):
        """Frees the engine and its buffers: Views of them raise from now on."""
        if getattr(self, "_live", None):
            self._live[0] = False
        if getattr(self, "_h", None) is not None:
            self._L.zt_engine_destroy(self._h)
            self._h = None

    def __del__(self):
        self.close()

    def add_unit(self, name, params):
        """Registers a unit and its parameters: params is a list of (name, array) (initial
        values, copied) or (name, shape, dict(init=INIT_*, std=..., no_decay=...)). Returns the
        unit's index."""
        u = ctypes.c_int()
        self._check(self._L.zt_engine_add_unit(self._handle(), name.encode(), len(params),
                                               ctypes.byref(u)))
        for p in params:
            pname, second = p[0], p[1]
            opt = p[2] if len(p) > 2 else {}
            if isinstance(second, np.ndarray):
                arr = np.ascontiguousarray(second, dtype=np.float32)
                shape, init = arr.shape, INIT_VALUES
            else:
                arr, shape, init = None, tuple(second), opt.get("init", INIT_ZEROS)
            sh = (ctypes.c_int64 * len(shape))(*shape)
            spec = _ParamSpec(pname.encode(), len(shape), sh, init, opt.get("std", 0.0),
                              arr.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
                              if arr is not None else None,
                              int(opt.get("no_decay", False)), None)
            self._check(self._L.zt_engine_add_param(self._handle(), u.value, ctypes.byref(spec),
                                                    None))
        return u.value

    def commit(self):
        """Ends registration: allocates the stage's buffers (collective)."""
        self._check(self._L.zt_engine_commit(self._handle()))
        info = _ParamInfo()
        self._units = [0] * self._L.zt_engine_unit_count(self._handle())
        for i in range(self._L.zt_engine_param_count(self._handle())):
            self._check(self._L.zt_engine_param_get(self._handle(), i, ctypes.byref(info)))
            shape = tuple(info.shape[k] for k in range(info.ndim))
            self._params[info.name.decode()] = (info.unit, info.offset, shape)
            self._units[info.unit] = max(self._units[info.unit], info.offset + info.numel)

    def _view(self, ptr, unit, what, half=0):
        if not ptr:
            return None
        if half:  # 16-bit compute copies: bf16 bit patterns (uint16) or float16
            p16 = ctypes.cast(ptr, ctypes.POINTER(ctypes.c_uint16))
            a = np.ctypeslib.as_array(p16, shape=(self._units[unit],))
            a = a if half == 1 else a.view(np.float16)
        else:
            a = np.ctypeslib.as_array(ptr, shape=(self._units[unit],))
        return View(a, self._live, "unit %d's %s" % (unit, what), what)

    def param_dtype(self):
        """The dtype of the parameter Views acquire gives: "fp32", or in a half-precision
        engine "bf16" (their bit patterns as uint16: widen with widen_bf16) or "fp16"
        (numpy float16). Gradients are always float32."""
        return ("fp32", "bf16", "fp16")[self._L.zt_engine_param_dtype(self._handle())]

    def acquire(self, unit, purpose):
        """(params, grads) of the unit as 1-D Views (grads None unless FOR_BACKWARD; float32,
        the parameters in param_dtype()), valid until release (grads: until grads_ready)."""
        h = self._handle()
        if not self._units:
            self.commit()
        p = ctypes.POINTER(ctypes.c_float)()
        g = ctypes.POINTER(ctypes.c_float)()
        self._check(self._L.zt_engine_unit_acquire(h, unit, purpose, ctypes.byref(p),
                                                   ctypes.byref(g)))
        half = self._L.zt_engine_param_dtype(h)
        return (self._view(p, unit, "parameters", half),
                self._view(g, unit, "gradients") if purpose == FOR_BACKWARD else None)

    def param(self, buf, name):
        """The View of parameter `name` within its unit's buffer buf (from acquire)."""
        if name not in self._params:
            raise Error("no parameter named %r" % name)
        if not isinstance(buf, View):
            raise Error("param: buf must be a View from acquire, not %s" % type(buf).__name__)
        unit, off, shape = self._params[name]
        n = int(np.prod(shape))
        if buf.shape != (self._units[unit],):
            raise Error("param %s: buf has %s floats, unit %d has %d" % (name, buf.shape,
                                                                         unit, self._units[unit]))
        return buf._sub(off, n, shape, name)

    def release(self, unit):
        self._check(self._L.zt_engine_unit_release(self._handle(), unit))

    def grads_ready(self, unit):
        self._check(self._L.zt_engine_unit_grads_ready(self._handle(), unit))

    def step(self, lr):
        """Clip, update, gather: returns dict(grad_norm, clip_coef, step, lr, skipped,
        nonfinite_unit, overflow, loss_scale); skipped is True when the divergence guard
        (config skip_nonfinite, off by default here) or an fp16 overflow (overflow True: the
        loss scale is lowered, as DeepSpeed's dynamic loss scaling does) left everything as it
        was; loss_scale is the scale the step's gradients carried (1 unless fp16). lr: a finite
        number >= 0."""
        lr = _check_lr(lr)
        si = _StepInfo()
        self._check(self._L.zt_engine_step(self._handle(), lr, ctypes.byref(si)))
        return {"grad_norm": si.grad_norm, "clip_coef": si.clip_coef, "step": si.step,
                "lr": si.lr, "skipped": bool(si.skipped), "nonfinite_unit": si.nonfinite_unit,
                "overflow": bool(si.overflow), "loss_scale": si.loss_scale}

    def loss_scale(self):
        """fp16: the scale the next backward pass must multiply the loss's gradient by (the
        gradients reach the engine scaled; step unscales them); 1.0 in fp32 and bf16."""
        return self._L.zt_engine_loss_scale(self._handle())

    def zero_grad(self):
        self._check(self._L.zt_engine_zero_grad(self._handle()))

    def report(self):
        """Model state per rank against the formula, collectives, offload traffic and the
        process's memory by category (zt_engine_report_get), as a dict. memory["heap"] is
        the heap's own statistics: source "jemalloc" when the process runs it (started with
        it preloaded), else "none" with allocated and resident 0."""
        n = 1 << 14
        while True:
            buf = ctypes.create_string_buffer(n)
            k = self._check(self._L.zt_engine_report_json(self._handle(), buf, n))
            if k < n:
                return json.loads(buf.value.decode())
            n = k + 1

    def pass_abort(self):
        """Lets go of the pass in progress after an error of the trainer's (then zero_grad)."""
        self._check(self._L.zt_engine_pass_abort(self._handle()))

    def save_model(self, path, dtype=None):
        """A Hugging Face folder. dtype: None (the run's: a bf16 run saves BF16 weights, an fp16
        run F16), "fp32" (a bf16 or fp16 run: its fp32 master), "bf16" or "fp16" (the run's
        own 16-bit format only)."""
        codes = {None: -1, "fp32": 0, "bf16": 1, "fp16": 2}
        if dtype not in codes:
            raise Error("save_model: dtype %r: None, \"fp32\", \"bf16\" or \"fp16\"" % (dtype,))
        self._check(self._L.zt_engine_set_save_dtype(self._handle(), codes[dtype]))
        try:
            self._check(self._L.zt_engine_save_model(self._handle(), path.encode()))
        finally:  # (this save only: checkpoints and later saves keep the run's dtype)
            self._L.zt_engine_set_save_dtype(self._handle(), -1)

    def checkpoint_save(self, root, step, samples=0, seed=0, keep=0):
        """A training checkpoint ROOT/step-N (crash-safe; keep > 0: only the newest keep).
        step, samples, seed and keep: integers >= 0."""
        for what, v in (("step", step), ("samples", samples), ("seed", seed), ("keep", keep)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
                raise Error("checkpoint_save: %s must be an integer >= 0, not %r" % (what, v))
        if step >= 1 << 63 or samples >= 1 << 64 or seed >= 1 << 64 or keep >= 1 << 31:
            raise Error("checkpoint_save: step, samples, seed or keep out of range")
        st = _TrainState(step, samples, seed)
        self._check(self._L.zt_checkpoint_save(self._handle(), root.encode(), ctypes.byref(st),
                                               None, keep))

    def checkpoint_load(self, path):
        """Loads a checkpoint folder, or the newest valid one under a root: its state as a
        dict(step, samples, seed), or None when the root has none."""
        buf = ctypes.create_string_buffer(4096)
        found = self._L.zt_checkpoint_find_latest(path.encode(), buf, 4096)
        d = buf.value if found > 0 else path.encode()
        if found <= 0 and not os.path.exists(os.path.join(path, "manifest.json")):
            return None
        st = _TrainState()
        self._check(self._L.zt_checkpoint_load(self._handle(), d, ctypes.byref(st)))
        return {"step": st.step, "samples": st.samples, "seed": st.seed}


class Model(Engine):
    """A built-in model from a Hugging Face folder (config.json + model.safetensors), to use:
    Model(path) runs it forward only (inference=True: no gradients, no optimizer state);
    head="mlm" makes a BERT a masked LM (a classifier's pooler and classifier unused),
    "classify" a sequence classifier. Further keyword arguments are zt_config fields
    (zero_stage, offload_param, nvme_path, threads, ...). The caller tokenizes: the methods
    take token ids (numpy integer arrays [B, T], or lists)."""

    def __init__(self, path, head="auto", inference=True, comm=None, **config):
        super().__init__(comm=comm, model_dir=path, head=head, inference=int(inference),
                         **config)
        self._mi = _ModelInfo()
        self._check(self._L.zt_engine_model_info(self._h, ctypes.byref(self._mi)))
        self.architecture = self._mi.architecture.decode()
        self.num_labels = self._mi.num_labels
        self.label_names = [self._L.zt_engine_label_name(self._h, i).decode()
                            for i in range(self.num_labels)]

    def _batch(self, input_ids, attention_mask, token_type_ids):
        import numpy as np
        ids = np.ascontiguousarray(np.atleast_2d(np.asarray(input_ids)), dtype=np.int64)
        B, T = ids.shape
        arrays = [ids]
        for a in (attention_mask, token_type_ids):
            if a is not None:
                a = np.ascontiguousarray(np.atleast_2d(np.asarray(a)), dtype=np.int64)
                if a.shape != ids.shape:
                    raise Error("attention_mask / token_type_ids have shape %s, input_ids %s"
                                % (a.shape, ids.shape))
            arrays.append(a)
        ptr = lambda a: a.ctypes.data_as(_I64P) if a is not None else None  # noqa: E731
        b = _Batch(B, T, ptr(arrays[0]), ptr(arrays[1]), ptr(arrays[2]), None, 0, 0, 0, None,
                   None)
        return b, arrays  # (the arrays stay alive with the batch)

    def classify(self, input_ids, attention_mask=None, token_type_ids=None):
        """A sequence classifier's outputs [B, num_labels] (float32): probabilities (softmax;
        multi-label: each label's sigmoid) or, for regression, the values. label_names
        names the columns."""
        import numpy as np
        b, keep = self._batch(input_ids, attention_mask, token_type_ids)
        out = np.zeros((b.B, max(self.num_labels, 1)), np.float32)
        self._check(self._L.zt_predict_classify(
            self._handle(), ctypes.byref(b), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))))
        return out

    def fill_mask(self, input_ids, mask_id, top_k=5, attention_mask=None, token_type_ids=None):
        """A masked LM's top_k tokens at each position whose id is mask_id: a list, per mask in
        row-major order, of {"position": (row, t), "token_ids": [...], "scores": [...]}, best
        first."""
        import numpy as np
        b, keep = self._batch(input_ids, attention_mask, token_type_ids)
        n = int((keep[0] == mask_id).sum())
        if n == 0:
            raise Error("no input id is the mask id %d" % mask_id)
        ids = np.zeros((n, top_k), np.int32)
        sc = np.zeros((n, top_k), np.float32)
        pos = np.zeros(n, np.int64)
        self._check(self._L.zt_predict_fill_mask(
            self._handle(), ctypes.byref(b), mask_id, top_k, n,
            ids.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
            sc.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), pos.ctypes.data_as(_I64P)))
        return [{"position": (int(p) // b.T, int(p) % b.T), "token_ids": ids[m].tolist(),
                 "scores": sc[m].tolist()} for m, p in enumerate(pos)]

    def generate(self, input_ids, attention_mask=None, max_new_tokens=20, num_beams=1,
                 length_penalty=1.0, early_stopping=False, use_cache=True, eos_token_id=None,
                 pad_token_id=None, logits_processor=None, return_scores=False):
        """A T5's continuations of the rows of input_ids [B, T] (attention_mask: 1 on tokens, 0
        on padding), as transformers' generate: greedy (num_beams 1) or beam search with
        length_penalty and early_stopping (False, True or "never"). Returns a list of B lists of
        token ids (the decoder start token not included, the </s> included when one was
        generated); return_scores: (ids, scores), beam search's sequence scores or greedy's
        summed log-probabilities. logits_processor(step, logits) may change each step's logits
        [B * num_beams, V] (a float32 numpy view) in place. Every rank calls it, each with its
        own rows."""
        import numpy as np
        b, keep = self._batch(input_ids, attention_mask, None)
        es = {False: 0, True: 1, "never": 2}
        if early_stopping not in es:
            raise Error("early_stopping must be False, True or \"never\", got %r" % (early_stopping,))
        g = _GenConfig()
        self._L.zt_generate_config_init(ctypes.byref(g))
        g.max_new_tokens, g.num_beams = int(max_new_tokens), int(num_beams)
        g.length_penalty, g.early_stopping = float(length_penalty), es[early_stopping]
        g.use_cache = int(bool(use_cache))
        if eos_token_id is not None:
            g.eos_token_id = int(eos_token_id)
        if pad_token_id is not None:
            g.pad_token_id = int(pad_token_id)
        raised = []
        if logits_processor is not None:
            def hook(arg, step, logits, rows, V):
                try:
                    logits_processor(step, np.ctypeslib.as_array(logits, shape=(rows, V)))
                    return 0
                except BaseException as ex:  # noqa: BLE001 (raised again below)
                    raised.append(ex)
                    return 1
            g.logits_hook = _HOOK(hook)
        M = max(int(max_new_tokens), 1)
        ids = np.zeros((b.B, M), np.int32)
        lens = np.zeros(b.B, np.intc)
        sc = np.zeros(b.B, np.float32)
        rc = self._L.zt_generate(self._handle(), ctypes.byref(b), ctypes.byref(g),
                                 ids.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                 lens.ctypes.data_as(ctypes.POINTER(ctypes.c_int)),
                                 sc.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
        if raised:
            raise raised[0]
        self._check(rc)
        out = [ids[r, :lens[r]].tolist() for r in range(b.B)]
        return (out, sc.tolist()) if return_scores else out



class Optimizer:
    """zerotrain's optimizer over the caller's float32 arrays (each a unit of its own): after
    step(grads) the arrays hold the updated parameters. names: per array (default p0, p1, ...);
    no_decay: names (or indices) without weight decay; lr ... weight_decay as torch.optim.AdamW
    (lr None: its 1e-3, or for optimizer="adafactor" with relative steps no lr at all, as
    transformers' Adafactor(lr=None); a number there is refused, as transformers refuses it;
    weight_decay None: torch's 0.01, Adafactor's and DeepSpeed's FusedLamb's 0.0);
    optimizer="lamb" takes FusedLamb's max_coeff, min_coeff, bias_correction and
    eps_inside_sqrt keywords;
    further keyword arguments are zt_config fields (zero_stage, optimizer, offload_optimizer,
    nvme_path, grad_clip, precision, ...). With precision="fp16" step multiplies the gradients
    by the engine's loss scale before they reach its fp16 sums (as a scaled loss's backward
    would) and the engine unscales them: an overflow skips the step and lowers the scale
    (step's "overflow"), as DeepSpeed's fp16 optimizer does."""

    def __init__(self, params, lr=None, betas=(0.9, 0.999), eps=1e-8, weight_decay=None,
                 names=None, no_decay=(), comm=None, **config):
        self.params = params
        kind = str(config.get("optimizer", "")).lower()
        adafactor = kind == "adafactor"
        if lr is None:
            relative = adafactor and str(config.get("relative_step", 1)).lower() not in ("0", "false")
            lr = 0.0 if relative else 1e-3
        if weight_decay is None:
            weight_decay = 0.0 if kind in ("adafactor", "lamb") else 0.01
        self.lr = _check_lr(lr)
        names = names or ["p%d" % i for i in range(len(params))]
        self.engine = Engine(comm=comm, lr=lr, beta1=betas[0], beta2=betas[1], eps=eps,
                             weight_decay=weight_decay, **config)
        for i, (n, a) in enumerate(zip(names, params)):
            if a.dtype != np.float32 or not a.flags.c_contiguous:
                raise Error("parameter %s: a C-contiguous float32 array is needed" % n)
            nd = n in no_decay or i in no_decay
            self.engine.add_unit(n, [(n, a, {"no_decay": nd})])
        self.engine.commit()
        self._names = names

    def step(self, grads, lr=None):
        """One update from this rank's share of the gradients: a list like params, each of
        exactly its parameter's shape (no broadcasting). Everything is checked before the
        engine is touched, so a refused call changes nothing."""
        e, n = self.engine, len(self.params)
        lr = _check_lr(self.lr if lr is None else lr)
        if len(grads) != n:
            raise Error("step: %d gradients for %d parameters" % (len(grads), n))
        gs = []
        for u in range(n):
            g = np.asarray(grads[u], dtype=np.float32)
            if g.shape != self.params[u].shape:
                raise Error("step: the gradient of %s has shape %s, the parameter %s (shapes "
                            "must match exactly)" % (self._names[u], g.shape,
                                                     self.params[u].shape))
            gs.append(g)
        for u in range(n):  # a backward pass follows a forward pass
            e.acquire(u, FOR_FORWARD)
            e.release(u)
        scale = e.loss_scale()
        if scale != 1.0:  # (fp16: float32 products, rounded into the fp16 sums by the engine)
            gs = [g * np.float32(scale) for g in gs]
        for u in reversed(range(n)):
            _, g = e.acquire(u, FOR_BACKWARD)
            # the only contribution of the step: copied, not added to the zeroed buffer
            # (0 + -0 is +0: a -0 gradient would reach the engine as +0)
            e.param(g, self._names[u])[...] = gs[u]
            e.grads_ready(u)
            e.release(u)
        info = e.step(lr)
        e.zero_grad()
        self._copy_out()
        return info

    def _copy_out(self):
        e = self.engine
        for u in range(len(self.params)):  # the engine's parameters into the caller's arrays
            p, _ = e.acquire(u, FOR_FORWARD | FOR_EVAL)
            v = e.param(p, self._names[u])._get()
            self.params[u][...] = widen_bf16(v) if v.dtype == np.uint16 else v
            e.release(u)

    def save(self, root, step, keep=0):
        """A checkpoint of parameters and optimizer state (ROOT/step-N)."""
        self.engine.checkpoint_save(root, step, keep=keep)

    def load(self, path):
        """Resumes from a checkpoint (a folder, or the newest under a root): the arrays get
        its parameters; returns its state (dict with "step"), or None when there is none."""
        st = self.engine.checkpoint_load(path)
        if st is not None:
            self._copy_out()
        return st

    def close(self):
        self.engine.close()
