/* The backend plugin interface: a versioned table of C functions that every backend shared
 * library (cpu, reference, later vulkan and cuda) exports through `ember_backend_entry`.
 *
 * Plain C so that plugins can be built by other compilers and loaded at run time: buffers and
 * programs are opaque handles, errors cross as a code plus a message (never as exceptions), and
 * the core checks `abi_version` before using anything else in the table.
 *
 * Kernels are KIR programs (see kir below): a small SSA list of scalar instructions run at every
 * point of an iteration space. Structure (instructions, argument dtypes) lives in the program and
 * is compiled/cached once; sizes and strides live in the launch, so one program serves all shapes.
 */
#ifndef EMBER_BACKEND_ABI_H
#define EMBER_BACKEND_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EMBER_BACKEND_ABI_VERSION 5u  /* 3: multi-output library calls (fused attention);
                                          4: launch-time scalar arguments (LOAD_SCALAR);
                                          5: MAX_POOL2D_BACKWARD_EPILOGUE, EMBER_POST_MASK_POSITIVE */
#define EMBER_MAX_ITER_RANK 16 /* outer dims + reduced dims */

/* ---- status -------------------------------------------------------------------------------- */
typedef struct ember_status {
  int32_t code; /* 0 = ok */
  uint32_t reserved; /* flags: EMBER_STATUS_ERRORS_LOST */
  uint64_t tag; /* a deferred error: the tag of the call that failed (see queues below) */
  char message[480];
} ember_status;

/* Set in a deferred error's `reserved` by a queue that had to drop deferred errors after it. */
#define EMBER_STATUS_ERRORS_LOST 1u

enum { EMBER_OK = 0, EMBER_ERR_INVALID = 1, EMBER_ERR_OUT_OF_MEMORY = 2, EMBER_ERR_UNSUPPORTED = 3,
       EMBER_ERR_INTERNAL = 4 };

/* ---- dtypes: same numbering as ember::DType ------------------------------------------------ */
enum {
  EMBER_F32 = 0, EMBER_F64, EMBER_F16, EMBER_BF16, EMBER_I32, EMBER_I64, EMBER_U8, EMBER_BOOL,
  EMBER_I8, EMBER_I16, EMBER_U16, EMBER_U32, EMBER_U64,
  EMBER_NUM_DTYPES
};

/* Bytes of one element. */
static inline size_t ember_dtype_bytes(int32_t dt) {
  switch (dt) {
    case EMBER_F64: case EMBER_I64: case EMBER_U64: return 8;
    case EMBER_F32: case EMBER_I32: case EMBER_U32: return 4;
    case EMBER_F16: case EMBER_BF16: case EMBER_I16: case EMBER_U16: return 2;
    default: return 1;
  }
}

/* ---- KIR ------------------------------------------------------------------------------------
 * Values have a logical dtype. Backends may hold them wider: f16/bf16 as f32; i8, i16, u8, u16
 * and bool as i32; u32 as i64 (so that signed 64-bit compares and divisions are right for it).
 * Arithmetic on a dtype held wider is the wider type's (wrapping) arithmetic: CAST to a logical
 * dtype rounds/wraps to that dtype (cast to bool is `!= 0`), and the core casts after each op.
 * u64 is held in 64 bits with unsigned semantics: compares, MAX/MIN, DIV/FLOORDIV/REM/FMOD
 * (which are then all the same unsigned division), POW's exponent, ABS (identity), the ACC_*
 * reductions and conversions treat the 64 bits as unsigned. Float -> u64: values in
 * (-2^63, 2^64) truncate and wrap modulo 2^64; NaN and the rest give 2^63.
 * Phases. For each outer point, a program makes passes over the reduce dims:
 *   even phase 2k: pass k, its instructions run at every reduce point (in row-major order);
 *   odd phase 2k+1: instructions run once, after pass k. An ACC_* instruction of phase 2k+1 is
 *   the accumulation over pass k of its phase-2k operand.
 * An instruction may use values of its own phase and of earlier odd phases (which stay valid
 * for the rest of the outer point). Loads and stores may appear in any phase; in odd phases
 * the reduce-dim strides are not used. Programs without reduce dims have only phase 0, where
 * every instruction runs at every point. Fused softmax uses phases 0-4: max, sum, normalize. */
typedef enum ember_kir_op {
  EMBER_KIR_CONST = 0,   /* fimm (floating dtypes) or iimm (others)                          */
  EMBER_KIR_LOAD,        /* arg; dtype = the arg's dtype                                      */
  EMBER_KIR_LOAD_GATHER, /* arg, a = index (i64) along the arg's gather axis (bounds-checked) */
  EMBER_KIR_IOTA,        /* arg: offset of the current point in that arg's view (i64); an arg
                          * without a buffer (a device binds a buffer's window and addresses it
                          * from there, so a buffer's offsets are not the launch's)             */
  EMBER_KIR_STORE,       /* arg, a = value                                                    */
  EMBER_KIR_CAST,        /* a -> dtype                                                        */
  /* unary */
  EMBER_KIR_NEG, EMBER_KIR_ABS, EMBER_KIR_EXP, EMBER_KIR_LOG, EMBER_KIR_SQRT, EMBER_KIR_TANH,
  EMBER_KIR_ERF, EMBER_KIR_SIN, EMBER_KIR_COS, EMBER_KIR_FLOOR, EMBER_KIR_CEIL, EMBER_KIR_NOT,
  /* binary: both operands have the result's dtype except comparisons (bool result) */
  EMBER_KIR_ADD, EMBER_KIR_SUB, EMBER_KIR_MUL,
  EMBER_KIR_DIV,      /* floats: IEEE division; integers: truncating, error on zero        */
  EMBER_KIR_FLOORDIV, /* floor(a / b); integers: error on zero                            */
  EMBER_KIR_REM,      /* a - floor(a / b) * b (sign of the divisor); integers: error on 0 */
  EMBER_KIR_FMOD,     /* C's fmod: a - trunc(a / b) * b (sign of a); integers: error on 0  */
  EMBER_KIR_POW,      /* integers: error on a negative exponent                           */
  EMBER_KIR_MAX, EMBER_KIR_MIN, /* NaN-propagating                                        */
  EMBER_KIR_LT, EMBER_KIR_LE, EMBER_KIR_GT, EMBER_KIR_GE, EMBER_KIR_EQ, EMBER_KIR_NE,
  EMBER_KIR_AND, EMBER_KIR_OR, /* logical, on bool                                        */
  /* ternary */
  EMBER_KIR_SELECT, /* a (bool) ? b : c                                                  */
  /* counter-based random numbers: Philox4x32-10 with key = iimm (64-bit seed), or the value of
   * operand b (i64) when b >= 0, so that a kernel drawing with a new seed is the same program;
   * counter = a (i64 element index) in words 0-1, words 2-3 zero; result uniform in [0, 1)
   * built from the output word aux (the stream, 0-3; f32: its top 24 bits) or the words 2·aux
   * and 2·aux + 1 (f64, stream 0-1: 53 bits), so the streams of one element share a block  */
  EMBER_KIR_RAND_UNIFORM,
  /* reductions over the reduce dims (phase 1 value of a phase 0 operand a) */
  EMBER_KIR_ACC_SUM, EMBER_KIR_ACC_PROD, EMBER_KIR_ACC_MAX, EMBER_KIR_ACC_MIN,
  EMBER_KIR_ACC_ARGMAX, /* i64 row-major index into the reduce dims; first of equal values; NaN wins */
  EMBER_KIR_ACC_ARGMIN,
  /* arg: the element at the argument's offset, the same at every point (its strides are not
   * used; dtype = the arg's dtype). Scalars that live on the device (a learning rate, a bias
   * correction) enter kernels this way, so the program does not change when their value does. */
  EMBER_KIR_LOAD_UNIFORM,
  /* arg: a launch-time scalar argument (what a GPU passes as a push constant or kernel
   * parameter): an argument without a buffer whose 64-bit value is the launch's `offset` field
   * (ember_kir_arg), the same at every point; dtype = i64 = the arg's dtype. An argument read by
   * LOAD_SCALAR is read by nothing else. A random op's Philox key enters kernels this way: a new
   * seed every step changes the launch, not the program, and writes no buffer. */
  EMBER_KIR_LOAD_SCALAR,
  EMBER_KIR_NUM_OPS
} ember_kir_op;

typedef struct ember_kir_inst {
  uint16_t op;    /* ember_kir_op */
  uint8_t dtype;  /* logical dtype of the result (of the stored value for STORE) */
  uint8_t phase;  /* 0 or 1, see above */
  int32_t a, b, c; /* operand instruction indices (earlier in the list), -1 if unused */
  int32_t arg;    /* argument index for LOAD, LOAD_GATHER, IOTA, STORE */
  int32_t aux;    /* RAND_UNIFORM: stream */
  double fimm;
  int64_t iimm;
} ember_kir_inst;

typedef struct ember_kir_program {
  const char* name; /* the op(s) it computes, used in error messages */
  int32_t n_insts;
  const ember_kir_inst* insts;
  int32_t n_args;
  const uint8_t* arg_dtypes; /* storage dtype of each argument */
  int32_t has_reduction;     /* 1 if the program contains ACC_* instructions */
} ember_kir_program;

/* ---- buffers, programs, launches ------------------------------------------------------------ */
typedef struct ember_buffer_s* ember_buffer;
typedef struct ember_program_s* ember_program;

typedef struct ember_kir_arg {
  ember_buffer buffer;
  int64_t offset;                        /* in elements; a LOAD_SCALAR argument: its value */
  int64_t strides[EMBER_MAX_ITER_RANK];  /* in elements, over the iteration dims; 0 = broadcast */
  int64_t gather_stride;                 /* LOAD_GATHER: element stride of the gathered axis */
  int64_t gather_size;                   /* LOAD_GATHER: size of that axis (bounds check) */
} ember_kir_arg;

typedef struct ember_kir_launch {
  int32_t outer_rank;  /* iteration dims 0..outer_rank-1 are outer (one output point each) */
  int32_t reduce_rank; /* the next reduce_rank dims are reduced */
  int64_t shape[EMBER_MAX_ITER_RANK];
  int32_t n_args;
  const ember_kir_arg* args; /* output args have zero strides over reduce dims */
} ember_kir_launch;

/* A tensor for library calls (matmul, conv, pooling, sorting, scans). */
typedef struct ember_tensor_desc {
  ember_buffer buffer;
  int64_t offset; /* elements */
  int32_t dtype;
  int32_t rank;
  int64_t shape[8];
  int64_t strides[8]; /* elements; may be 0 on broadcast dims */
} ember_tensor_desc;

/* Library calls. Every descriptor has explicit shape and strides (inputs may be strided views;
 * outputs are fresh contiguous buffers). Unless stated, inputs and outputs share one floating
 * dtype (f32, f64, f16, bf16). Index outputs are i64. */
enum {
  EMBER_LIB_MATMUL = 1, /* in: a [..., M, K], b [..., K, N] (same rank, batch dims already broadcast
                           to out's, possibly with stride 0); out [..., M, N] contiguous. All three
                           share one dtype (any dtype). attrs: none. */
  /* Convolution, attrs = ember_conv_attrs. x [N, C, H, W], w [O, C/groups, KH, KW], y [N, O, OH, OW]
   * with OH = (H + pad_begin[0] + pad_end[0] - dilation[0] * (KH - 1) - 1) / stride[0] + 1 (same
   * for W); x[n, c, oh * stride - pad_begin + kh * dilation, ...] (zero outside the input).       */
  EMBER_LIB_CONV2D = 2,              /* in: x, w[, bias [O]]; out: y                                 */
  EMBER_LIB_CONV2D_BACKWARD_DATA = 3,    /* in: dy, w; out: dx (shape of x)                           */
  EMBER_LIB_CONV2D_BACKWARD_WEIGHTS = 4, /* in: x, dy; out: dw (shape of w)                          */
  /* Pooling over [N, C, H, W] windows, attrs = ember_pool_attrs (OH computed as for conv with
   * dilation 1). Padding never wins a max; avg divides by the window's size inside the padded
   * input (count_include_pad) or by the number of input elements it covers (else; 0 -> 0).      */
  EMBER_LIB_MAX_POOL2D = 5,          /* in: x; out: y[, indices (i64, as MAX_POOL2D_INDICES): a second
                                        output, so one call gives both]                              */
  EMBER_LIB_MAX_POOL2D_INDICES = 6,  /* in: x; out: i64 [N, C, OH, OW], h * W + w of the first maximum
                                        in the window (a NaN is a maximum)                           */
  EMBER_LIB_AVG_POOL2D = 7,          /* in: x; out: y                                                */
  EMBER_LIB_AVG_POOL2D_BACKWARD = 8, /* in: dy; out: dx [N, C, H, W] (the adjoint of AVG_POOL2D)    */
  /* Sorting along attrs->dim (ember_sort_attrs); input of any dtype, output i64 indices. Stable;
   * a NaN compares greater than every number (last ascending, first descending).                */
  EMBER_LIB_ARGSORT = 9,             /* in: x; out: indices, shape of x                              */
  EMBER_LIB_TOPK = 10,               /* in: x; out: indices, shape of x with dim -> k: the first k of
                                        the stable sort (descending = the k largest)                 */
  /* Scans along attrs->dim (ember_scan_attrs); out has x's shape. Floating sums and products are
   * accumulated in f64 and rounded at each store; integers wrap in 64 bits.                     */
  EMBER_LIB_CUMSUM = 11,             /* in: x; out: same dtype (reverse: suffix sums)               */
  EMBER_LIB_CUMPROD = 12,            /* in: x; out: same dtype                                       */
  EMBER_LIB_CUMMAX_INDICES = 13,     /* in: x (any dtype); out: i64 index of the running maximum:
                                        the latest of equal values; a NaN, once seen, stays          */
  EMBER_LIB_CUMMIN_INDICES = 14,     /* as CUMMAX_INDICES for the minimum                            */
  /* Scaled dot-product attention, attrs = ember_attention_attrs. in: q [B, L, E], k [B, S, E],
   * v [B, S, Ev][, mask [B, L, S] (additive, may have 0 strides)]; two outputs: the attention
   * o [B, L, Ev] and the row logsumexp lse [B, L] (each of q's dtype, or f32 for f16 / bf16
   * operands) of the scores s = q k^T * scale (+ mask) (+ -inf where j > i if causal, top-left
   * aligned): o = softmax(s) v. A row with no finite score gets o = NaN and lse = -inf. Need not
   * hold an L x S buffer (the CPU backend tiles with an online softmax).                      */
  EMBER_LIB_FUSED_ATTENTION = 15,
  /* Its gradient, same attrs. in: q, k, v, lse [B, L], d [B, L] = rowsum(do * o) - dlse,
   * do [B, L, Ev][, mask] (lse and d: q's dtype, or f32 for f16 / bf16 operands); three outputs
   * in q's dtype: dq [B, L, E], dk [B, S, E], dv [B, S, Ev], with p = exp(s - lse),
   * ds = p * (do v^T - d), dq = ds k * scale, dk = ds^T q * scale, dv = p^T do; p = 0 where
   * s = -inf (so a row with no visible key gets zero gradients).                               */
  EMBER_LIB_FUSED_ATTENTION_BACKWARD = 16,
  /* The gradient of MAX_POOL2D, attrs = ember_pool_attrs. in: dy [N, C, OH, OW], x [N, C, H, W];
   * out: dx (shape of x): each window's dy added at its first maximum of x (a NaN is a maximum),
   * i.e. a scatter-add at MAX_POOL2D_INDICES, without materializing the indices.                */
  EMBER_LIB_MAX_POOL2D_BACKWARD = 17,
  /* Contraction epilogues, attrs = ember_epilogue_attrs: the product (as MATMUL / CONV2D) followed
   * by attrs->ops applied in order to each output element before it is stored (oneDNN post-ops on
   * the CPU). f32 and f64. A backend without them leaves these codes unsupported and the core
   * runs the epilogue as separate kernels.                                                       */
  EMBER_LIB_MATMUL_EPILOGUE = 18,    /* in: a, b (as MATMUL), then the post-op operands; out: y      */
  EMBER_LIB_CONV2D_EPILOGUE = 19,    /* in: x, w[, bias [O] when has_bias], then the post-op operands */
  /* The recurrence of one LSTM layer and direction, attrs = ember_recurrence_attrs. in: the input
   * projection with both biases gi [L, N, 4H], h0 [N, H], c0 [N, H], w_hh [4H, H] (rows i, f, g,
   * o as PyTorch); three outputs: h [L, N, H], c [L, N, H] and the activated gates [L, N, 4H].
   * Step t (0 .. L-1, or L-1 .. 0 when reverse) from the previous step's h, c (h0, c0 first):
   * a = gi[t] + h w_hh^T; i = sigmoid(a_i), f = sigmoid(a_f), g = tanh(a_g), o = sigmoid(a_o)
   * with sigmoid(x) = 1 / (1 + exp(-x)); c[t] = f * c + i * g; h[t] = o * tanh(c[t]).
   * Floating dtypes; f16 / bf16 may compute in f32.                                              */
  EMBER_LIB_LSTM_RECURRENCE = 20,
  /* Its gradient, same attrs. in: gates [L, N, 4H], c [L, N, H], c0, w_hh (as above), dh, dc
   * [L, N, H] (the gradients of the outputs h and c); three outputs: da [L, N, 4H] (the gradient
   * of the pre-activations a, which is gi's), dh0 [N, H], dc0 [N, H]. Backwards in time from
   * dh' = dc' = 0: dh_t = dh[t] + dh', dc_t = dc[t] + dc' + dh_t * o * (1 - tanh(c[t])^2),
   * da_i = dc_t * g * i (1 - i), da_f = dc_t * c_prev * f (1 - f), da_g = dc_t * i * (1 - g^2),
   * da_o = dh_t * tanh(c[t]) * o (1 - o); then dh' = da w_hh, dc' = dc_t * f. dh0, dc0 are the
   * last dh', dc'. (w_hh's gradient, sum over t of da^T h_prev, is one product outside.)        */
  EMBER_LIB_LSTM_RECURRENCE_BACKWARD = 21,
  /* The recurrence of one GRU layer and direction, attrs = ember_recurrence_attrs. in: gi [L, N, 3H]
   * (x W_ih^T + b_ih, rows r, z, n as PyTorch), h0 [N, H], w_hh [3H, H], b_hh [3H]; three outputs:
   * h [L, N, H], the activated gates [L, N, 3H] (r, z, n) and hn [L, N, H]. Step t (order as
   * LSTM's) from the previous h: b = h w_hh^T + b_hh; r = sigmoid(gi_r + b_r), z = sigmoid(gi_z +
   * b_z), hn[t] = b_n, n = tanh(gi_n + r * b_n); h[t] = n + z * (h - n).                        */
  EMBER_LIB_GRU_RECURRENCE = 22,
  /* Its gradient, same attrs. in: gates, hn, h (the outputs), h0, w_hh, dh [L, N, H]; three
   * outputs: dgi [L, N, 3H] (gi's gradient), db [L, N, 3H] (the gradient of b = h w_hh^T + b_hh)
   * and dh0 [N, H]. Backwards in time from dh' = 0: dh_t = dh[t] + dh', dz = dh_t (h_prev - n),
   * da_n = dh_t (1 - z) (1 - n^2), da_r = da_n * hn * r (1 - r), da_z = dz * z (1 - z);
   * dgi = [da_r, da_z, da_n], db = [da_r, da_z, da_n * r]; then dh' = db w_hh + dh_t * z. dh0 is
   * the last dh'. (w_hh's and b_hh's gradients, sums over t of db^T h_prev and of db, are outside.) */
  EMBER_LIB_GRU_RECURRENCE_BACKWARD = 23,
  /* Sums of rows at integer positions (index_add; the gradient of an embedding lookup or an
   * index_select), attrs = ember_index_attrs. in: src [..., N, ...] (N at attrs->dim), index [N]
   * (i64); out: zeros of src's shape with dim N -> S (out's size there), then
   * out[..., index[n], ...] += src[..., n, ...] for n = 0, 1, ..., N - 1 in that order (so a
   * backend sums duplicates in index order, deterministically); f16 / bf16 sums are kept in f32
   * and rounded once. Floating dtypes. An index outside [0, S) fails the call (EMBER_ERR_INVALID)
   * before anything is written. Costs O(N * row) where the dense scatter costs O(S * N * row). */
  EMBER_LIB_INDEX_ADD = 24,
  /* MAX_POOL2D_BACKWARD followed by attrs->ops (ember_epilogue_attrs; its `pool` holds the
   * pooling's attrs) applied to each element of dx: a ReLU's gradient where the pooling's input
   * is the ReLU's output (EMBER_POST_MASK_POSITIVE with that input as the operand). f32 and f64.
   * in: dy, x (as MAX_POOL2D_BACKWARD), then the post-op operands; out: dx.                     */
  EMBER_LIB_MAX_POOL2D_BACKWARD_EPILOGUE = 25,
  EMBER_LIB_NUM_OPS
};

/* Post-ops of the *_EPILOGUE calls; y is the running value of an output element. */
enum {
  EMBER_POST_ADD = 0,   /* y += in[input] at the element (a descriptor of the output's shape whose
                           strides broadcast it: bias [N] has stride 0 on every other dim)      */
  EMBER_POST_LINEAR,    /* y = alpha * y + beta (x * c: alpha = c, beta = -0, which keeps a -0 product; x + c: 1, c) */
  EMBER_POST_RELU,      /* max(y, 0), NaN stays NaN                                             */
  EMBER_POST_TANH,
  EMBER_POST_SIGMOID,   /* 1 / (1 + exp(-y))                                                    */
  EMBER_POST_GELU_ERF,  /* 0.5 y (1 + erf(y / sqrt 2))                                          */
  EMBER_POST_GELU_TANH, /* 0.5 y (1 + tanh(sqrt(2 / pi) (y + 0.044715 y^3)))                    */
  EMBER_POST_MUL,       /* y *= in[input] at the element (an operand as EMBER_POST_ADD's)       */
  EMBER_POST_MASK_POSITIVE, /* y = in[input] > 0 ? y : +0 at the element (an operand as EMBER_POST_ADD's):
                           where(gt(o, 0), y, 0), a ReLU's gradient from its output o; NaN o gives +0 */
  EMBER_POST_NUM_KINDS
};
/* Whether a post-op kind reads a tensor operand (ember_post_op.input). */
static inline int ember_post_has_operand(int32_t kind) {
  return kind == EMBER_POST_ADD || kind == EMBER_POST_MUL || kind == EMBER_POST_MASK_POSITIVE;
}
#define EMBER_MAX_POST_OPS 8
typedef struct ember_post_op {
  int32_t kind;  /* EMBER_POST_* */
  int32_t input; /* EMBER_POST_ADD / MUL / MASK_POSITIVE: index of the operand in the call's inputs */
  double alpha, beta;
} ember_post_op;

typedef struct ember_conv_attrs {
  int64_t stride[2];    /* (h, w) */
  int64_t pad_begin[2]; /* top, left */
  int64_t pad_end[2];   /* bottom, right */
  int64_t dilation[2];  /* 1 = dense */
  int64_t groups;
} ember_conv_attrs;

typedef struct ember_pool_attrs {
  int64_t kernel[2];
  int64_t stride[2];
  int64_t pad_begin[2];
  int64_t pad_end[2];
  int32_t count_include_pad; /* avg pool only */
} ember_pool_attrs;

typedef struct ember_epilogue_attrs {
  ember_conv_attrs conv; /* CONV2D_EPILOGUE only */
  int32_t has_bias;      /* CONV2D_EPILOGUE: in[2] is a bias [O] added before the post-ops */
  int32_t n_ops;         /* 1 .. EMBER_MAX_POST_OPS */
  ember_post_op ops[EMBER_MAX_POST_OPS];
  ember_pool_attrs pool; /* MAX_POOL2D_BACKWARD_EPILOGUE only */
} ember_epilogue_attrs;

typedef struct ember_sort_attrs {
  int32_t dim;
  int32_t descending; /* ARGSORT: descending order; TOPK: 1 = largest, 0 = smallest */
  int64_t k;          /* TOPK only */
} ember_sort_attrs;

typedef struct ember_scan_attrs {
  int32_t dim;
  int32_t reverse; /* CUMSUM only: scan from the end */
} ember_scan_attrs;

typedef struct ember_attention_attrs {
  double scale;   /* multiplies q k^T */
  int32_t causal; /* 1: key j is visible to query i only when j <= i */
} ember_attention_attrs;

typedef struct ember_recurrence_attrs {
  int32_t reverse; /* 1: the steps run from t = L - 1 down to 0 */
} ember_recurrence_attrs;

typedef struct ember_index_attrs {
  int32_t dim; /* INDEX_ADD: the dim the index runs along */
} ember_index_attrs;

/* ---- devices, queues, events (ABI v2) ------------------------------------------------------
 * Execution model. Every call that touches device memory or runs work names an in-order queue
 * (a CUDA stream, a Vulkan queue with a timeline semaphore, the CPU's calling thread). Work on
 * one queue runs in the order it was enqueued; a call may return before its work is done (the
 * device advertises `async`). Events order work across queues and let the host wait:
 * event_record marks the point reached by a queue's enqueued work, queue_wait_event makes a
 * queue's later work wait for that point, event_synchronize blocks the host until it is reached.
 *
 * Memory. buffer_write, buffer_copy and buffer_free are ordered on the queue they name:
 * buffer_write may return before the copy happens but has taken the source bytes by then (the
 * caller may reuse them); buffer_free releases the memory only after the work enqueued before
 * it on that queue is done (like cudaFreeAsync), so the core may drop its last reference to a
 * buffer that an enqueued kernel still reads. buffer_read blocks until the queue's work enqueued
 * before it is done, then copies. A freed buffer handle that the core keeps for reuse is only
 * reused on the same queue, so in-order execution keeps that safe without events.
 *
 * Errors. A call that can tell at once that it cannot run (bad arguments, an unsupported op,
 * out of memory) returns the error. An error found while the work runs (integer division by
 * zero, a gather index out of range) is *deferred*: the queue remembers it (code, message and
 * the `tag` the core passed with the failing call), one per failing call, in order, and each
 * queue_synchronize or event_synchronize on that queue (and a buffer_read that waits for it)
 * returns the oldest one and forgets it; the core calls again until it gets EMBER_OK. A queue
 * that cannot keep them all sets EMBER_STATUS_ERRORS_LOST in the last one it kept. Later work on
 * the queue still runs; the core decides which results the failures invalidate (the buffers
 * that depend on the failing calls: src/runtime/kernel_checks.h).                           */
typedef struct ember_queue_s* ember_queue;
typedef struct ember_event_s* ember_event;

/* A bit per dtype (1u << EMBER_F32, ...). */
#define EMBER_DTYPE_BIT(dt) (1u << (uint32_t)(dt))

typedef struct ember_device_properties {
  uint32_t struct_size;    /* set by the caller: sizeof its struct; the plugin fills what fits */
  char name[128];          /* "x86-64 AVX2 (Highway target AVX2), 2 threads" */
  char kind[16];           /* "cpu", "gpu", "test" */
  uint64_t memory_total;   /* bytes; 0 = unknown */
  uint64_t memory_free;    /* bytes; 0 = unknown */
  uint32_t dtypes;         /* EMBER_DTYPE_BIT of each dtype kernels can compute in */
  uint32_t index_bits;     /* 64, or 32: launches and buffers must stay below 2^31 elements */
  uint64_t max_buffer_bytes;   /* largest buffer_alloc */
  uint64_t max_binding_bytes;  /* largest byte span (lowest to highest element) that a library
                                * call's tensor may cover, wherever it starts; larger ones take
                                * the host fallback. A plugin splits larger KIR launches and
                                * matmuls along their output dims: what must fit is what one
                                * output point reads (a reduced row, a gathered table; one row
                                * of a matmul's a and one column of its b) */
  uint32_t max_workgroup_size; /* 1 for host backends */
  uint32_t subgroup_size;      /* 1 for host backends */
  uint32_t host_visible;   /* 1 if device memory is host memory */
  uint32_t async;          /* 1 if calls may return before their work is done */
  uint32_t max_kernel_args; /* most arguments one KIR program may take (bindings a shader may have);
                               0 = no limit. The fusion planner keeps kernels within it. */
  uint32_t host_threads;    /* host threads one call keeps busy (a host backend's thread pool);
                               0 for a device that computes elsewhere (a GPU) or when unknown.
                               The core runs the work of a device with host threads and
                               synchronous calls on the calling thread, not on a queue thread
                               (docs/backends.md, "Asynchronous execution"). Added after v2's
                               first release: a plugin built before it leaves it 0. */
} ember_device_properties;

/* ---- services the core offers plugins --------------------------------------------------------
 * Handed to a plugin's `attach_host` once, right after it is loaded, before any other call; the
 * struct lives as long as the process. A plugin loaded by something other than the core (a test
 * harness) may never receive it and must work without it. */
typedef struct ember_host_services {
  uint32_t struct_size; /* sizeof(ember_host_services) in the core: read only the fields that fit */
  /* The core's on-disk cache of compiled programs (docs/backends.md, "Compiled-program cache"),
   * shared by every compiled backend. An entry is the bytes a plugin stored under `key`, which
   * must spell out everything that determines them: the program's text, the device, the
   * compiler's or driver's version, the target. `plugin` ("cpu", "vulkan") keeps plugins apart.
   * The core compares the whole key and a checksum on every load, so a damaged entry, or one
   * another key's hash collides with, is a miss (and is replaced by the next store), never the
   * wrong bytes. Stores are atomic (other processes see the old entry or the new one, whole); the
   * cache is bounded in size (EMBER_CACHE_MAX_BYTES) and forgets the least recently used entries.
   * Thread-safe; none of these calls fails loudly: without a usable cache folder a load misses
   * and a store does nothing.
   * cache_load: 1 and *data, *bytes (release with cache_free) on a hit, else 0. */
  int32_t (*cache_load)(const char* plugin, const void* key, size_t key_bytes, void** data, size_t* bytes);
  void (*cache_free)(void* data);
  /* 1 if stored. */
  int32_t (*cache_store)(const char* plugin, const void* key, size_t key_bytes, const void* data,
                         size_t bytes);
} ember_host_services;

/* One timed call (queue_take_timings): the tag its program_run or library_call was given, and
 * when the device started its first command and finished its last, in nanoseconds on the
 * device's own clock (any epoch, the same for every queue of a device). */
typedef struct ember_timing {
  uint64_t tag;
  int64_t start_ns, end_ns;
} ember_timing;

typedef struct ember_backend_v2 {
  uint32_t abi_version; /* EMBER_BACKEND_ABI_VERSION the plugin was built with */
  uint32_t struct_size; /* sizeof(ember_backend_v2) in the plugin: a newer core reads only the
                           fields that fit, an older plugin's missing fields count as absent */
  const char* name;     /* "cpu", "reference", ...: the device kind users write */

  int32_t (*device_count)(void);
  int32_t (*device_properties)(int32_t device, ember_device_properties* out, ember_status* st);
  /* 1 if `device` runs this KIR instruction (kind EMBER_SUPPORT_KIR, op an ember_kir_op) or
   * library call (EMBER_SUPPORT_LIBRARY, op an EMBER_LIB_* code) with values of `dtype` (the
   * instruction's result dtype; a library call's first input's dtype); else 0. The core asks
   * before compiling a program or calling the library and names what is missing. */
  int32_t (*supports_op)(int32_t device, int32_t kind, int32_t op, int32_t dtype);

  /* Queues: in-order streams of work on one device. A device has at least one. */
  int32_t (*queue_create)(int32_t device, ember_queue* out, ember_status* st);
  void (*queue_destroy)(ember_queue queue); /* after its enqueued work is done */
  /* Blocks until the work enqueued so far is done; returns the queue's deferred error, if any. */
  int32_t (*queue_synchronize)(ember_queue queue, ember_status* st);

  /* Buffers (ordering rules above). Offsets and sizes in bytes. */
  int32_t (*buffer_alloc)(int32_t device, size_t bytes, ember_buffer* out, ember_status* st);
  void (*buffer_free)(ember_queue queue, ember_buffer buffer);
  int32_t (*buffer_write)(ember_queue queue, ember_buffer dst, size_t dst_offset, const void* src,
                          size_t bytes, ember_status* st);
  int32_t (*buffer_read)(ember_queue queue, ember_buffer src, size_t src_offset, void* dst,
                         size_t bytes, ember_status* st);

  /* Programs are compiled for one device; program_destroy waits for launches still using it. */
  int32_t (*program_create)(int32_t device, const ember_kir_program* program, ember_program* out,
                            ember_status* st);
  void (*program_destroy)(ember_program program);
  /* `tag` identifies the launch in a deferred error. */
  int32_t (*program_run)(ember_queue queue, ember_program program, const ember_kir_launch* launch,
                         uint64_t tag, ember_status* st);
  /* Contractions and other library-backed ops; EMBER_ERR_UNSUPPORTED if op is unknown. The
   * descriptors and attrs are read before the call returns. */
  int32_t (*library_call)(ember_queue queue, int32_t op, const ember_tensor_desc* inputs,
                          int32_t n_inputs, const ember_tensor_desc* outputs, int32_t n_outputs,
                          const void* attrs, uint64_t tag, ember_status* st);

  /* ---- optional: a plugin whose struct_size ends before a field does not have it ----------
   * Without events the core synchronizes whole queues; without buffer_copy it stages copies
   * through host memory. */
  /* Events: points in a queue's work. */
  int32_t (*event_create)(int32_t device, ember_event* out, ember_status* st);
  /* May be called right after event_record or queue_wait_event: a wait already enqueued keeps
   * what it needs. */
  void (*event_destroy)(ember_event event);
  int32_t (*event_record)(ember_event event, ember_queue queue, ember_status* st);
  int32_t (*queue_wait_event)(ember_queue queue, ember_event event, ember_status* st);
  /* Blocks until the recorded point is reached; returns that queue's deferred error, if any. */
  int32_t (*event_synchronize)(ember_event event, ember_status* st);
  int32_t (*event_query)(ember_event event); /* 1 reached (or never recorded), 0 not yet */

  /* Between two buffers of this plugin, possibly on two of its devices (queue: the source's). */
  int32_t (*buffer_copy)(ember_queue queue, ember_buffer dst, size_t dst_offset, ember_buffer src,
                         size_t src_offset, size_t bytes, ember_status* st);

  /* Why device_count() is 0 ("no Vulkan driver found"), for `ember info` and error messages;
   * NULL when the plugin has devices. The string lives as long as the plugin. */
  const char* (*no_device_reason)(void);

  /* The address of a buffer's first byte where the device's memory is host memory (NULL
   * elsewhere), for host reads without a staging copy. The caller synchronizes the queues that
   * write the buffer before reading through it. */
  const void* (*buffer_host_address)(ember_buffer buffer);

  /* Receives the core's services (ember_host_services above), once, right after loading. */
  void (*attach_host)(const ember_host_services* host);

  /* Device timing for the profiler (docs/backends.md, "Profiler"), on a device that computes
   * apart from the host (the core times host devices' synchronous calls itself). While timing is
   * on, the queue times each program_run and library_call with a nonzero tag on the device and
   * keeps one record per call until queue_take_timings takes it. queue_set_timing applies to the
   * work enqueued after it; EMBER_ERR_UNSUPPORTED where the device cannot time its work (the
   * core then keeps the host's times). A queue keeps at most 65536 records: later calls go
   * untimed until they are taken. Added after v2's first release. */
  int32_t (*queue_set_timing)(ember_queue queue, int32_t on, ember_status* st);
  /* Moves up to `capacity` records of finished calls into `out`, in the order the calls were
   * enqueued; returns how many. After queue_synchronize, every timed call's record is there. */
  int32_t (*queue_take_timings)(ember_queue queue, ember_timing* out, int32_t capacity);
} ember_backend_v2;

enum { EMBER_SUPPORT_KIR = 0, EMBER_SUPPORT_LIBRARY = 1 };

/* Every plugin exports this symbol. It returns NULL if it cannot serve `requested_abi`. A
 * plugin built for another version returns its own table (or NULL); the core checks
 * abi_version before reading anything else. */
typedef const ember_backend_v2* (*ember_backend_entry_fn)(uint32_t requested_abi);
#define EMBER_BACKEND_ENTRY_SYMBOL "ember_backend_entry"

#ifdef __cplusplus
}
#endif

#endif /* EMBER_BACKEND_ABI_H */
