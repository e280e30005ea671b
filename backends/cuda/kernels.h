// Launchers of the CUDA backend's kernels. Every kernel reduces each output element in an order fixed
// by the shapes of the weights and the heads alone, never by the number of rows in the batch, so a
// row's result is the same bits alone and inside any batch (the engine's batch invariance).
// Each launcher queues its kernel on `stream` and returns the launch error, if any.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace fak::cuda {

#ifdef __CUDACC__
#define FAK_HOST_DEVICE __host__ __device__
#else
#define FAK_HOST_DEVICE
#endif

// The shape of a quantized row's sum (qblock.cuh): 32-weight blocks, segments of 8 blocks, and 1 or
// 4 pieces of consecutive segments (piece p: segments [PieceBegin(p), PieceBegin(p + 1))).
constexpr int kBlocksPerSegment = 8;
FAK_HOST_DEVICE constexpr int64_t QuantSegments(int64_t cols) {
  return (cols / 32 + kBlocksPerSegment - 1) / kBlocksPerSegment;
}
FAK_HOST_DEVICE constexpr int QuantPieces(int64_t cols) { return cols / 32 >= 128 ? 4 : 1; }
FAK_HOST_DEVICE constexpr int64_t PieceBegin(int64_t segments, int pieces, int p) {
  return segments * p / pieces;
}

// Weight matrices in device memory, in the layouts of weights.h.
enum class MatFormat : int { kQ8_0, kQ4_K, kQ6_K, kF16, kBF16, kF32 };

struct DeviceMatrix {
  MatFormat format = MatFormat::kF32;
  int64_t rows = 0, cols = 0;
  const uint8_t* q = nullptr;   // quants, blocks or values
  const uint16_t* d = nullptr;  // f16 block scales (q8_0: per 32 weights, q6_k: per 256), else null
};

// int8 activations: element i of an f32 buffer is q[i] * d[i / 32] (a "shadow" of the buffer). The
// scale is shared by `group` consecutive values of a row (32, or 256: then the 8 blocks of a group hold
// the same d, and a row's last group may be shorter). Q8_0 matrices read either; Q4_K and Q6_K need
// groups of 256 (qblock.cuh), which makes a super-block's dots add up in integers.
constexpr int kKQuantGroup = 256;
struct Q8Act {
  const int8_t* q = nullptr;
  const float* d = nullptr;
  int group = 32;
};

// The activation group a matrix format reads (Q8Act::group): 256 for the K-quants, else 32 (Q8_0 reads
// any).
inline int GroupFor(MatFormat f) {
  return f == MatFormat::kQ4_K || f == MatFormat::kQ6_K ? kKQuantGroup : 32;
}

// True when the format reads int8 activations (the quantized formats) rather than f32.
inline bool ReadsQ8(MatFormat f) {
  return f == MatFormat::kQ8_0 || f == MatFormat::kQ4_K || f == MatFormat::kQ6_K;
}

// Where a matrix's results go: y[r * ldy + o] = result (+ bias[o]); then, with a residual,
// residual[r * ldr + o] += that value. Each is the same float operation as a separate AddRow or Add,
// so fusing them changes no bit.
struct MatVecOut {
  float* y = nullptr;
  int64_t ldy = 0;
  const float* bias = nullptr;
  float* residual = nullptr;
  int64_t ldr = 0;
};

// The batch as the KV kernels read it (device arrays, see ops/backend.h's BatchPlan).
struct DeviceBatch {
  const int32_t* positions = nullptr;
  const int32_t* row_seq = nullptr;
  const int32_t* page_begin = nullptr;
  const int32_t* pages = nullptr;
  // The rows attention computes together (AttnGroups): (first row, rows, the sequence's first position
  // in the batch) for each group.
  const int32_t* attn_groups = nullptr;
};

// A KV store: page p's storage starts at page_ptr[p]; inside a page, block (layer, k or v, kv head)
// holds page_tokens rows of head_dim elements (f16, or f32 when f32).
struct DeviceKv {
  void* const* page_ptr = nullptr;
  int64_t n_kv_head = 0, head_dim = 0, page_tokens = 0;
  bool f32 = false;
};

// The row op that follows a product (matvec.cu). With one activation row it runs inside the product's
// kernel: the RMS norm (which needs the whole row) in the grid's last block, the SiLU per 32 output
// elements and the rope per head in the block that completes that group, the values' KV store as
// their rows are computed; the blocks count themselves done on `counter` (zero between launches).
// With more rows, MatVec launches the op's own kernel after the product. Both run the same device
// functions (row_ops.cuh): the same bits. While the norm tail is on, every RMS norm (RmsNorm) sums in
// the tail's order, so a row's bits never depend on where its norm ran.
// The widest row the RMS norm takes (row_ops.cuh RmsNormRow): 512 runs of 32.
constexpr int kNormMaxRuns = 512;
enum class TailKind : int { kNone = 0, kRmsNorm = 1, kSiluMul = 2, kRopeKvWrite = 3 };
struct MatVecTail {
  TailKind kind = TailKind::kNone;
  unsigned* counter = nullptr;
  // kRmsNorm: y = x / rms(x) * w per row of `cols` (x: the product's residual); kSiluMul: y = silu(y) * u
  // per row of `cols` (y and u: the job's outputs 0 and 1). Both with the int8 shadow q, d of the result
  // when q is not null.
  const float* x = nullptr;
  const float* w = nullptr;
  float* y = nullptr;
  const float* u = nullptr;
  int64_t cols = 0;
  float eps = 0.0f;
  int8_t* q = nullptr;
  float* d = nullptr;
  int group = 32;  // the shadow's group (Q8Act::group); a tail inside the product writes groups of 32 only
  // kRopeKvWrite: rope of the queries rq (q_cols wide; null: none) and of the keys k, then the KV store
  // of k and v (RopeKvWrite's arguments).
  float* rq = nullptr;
  int64_t q_cols = 0;
  float* k = nullptr;
  const float* v = nullptr;
  int64_t head_dim = 0, half = 0, layer = 0;
  const float* cos_sin = nullptr;
  bool neox = false;
  DeviceKv kv;
  DeviceBatch b;
};

// Which tails run inside the product (FAK_CUDA_TAILS: unset or 0 none, 1 all, or a list of norm,
// silu, rope); the others run as their own launch after it.
bool TailInKernel(TailKind kind);
// Whether a product of n activation rows runs its tail t in its last block (TailInKernel, one row, a
// counter, and a shadow, if any, in groups of 32) rather than as the op's own launch after it.
bool TailRunsInKernel(const MatVecTail& t, int64_t n);

// Up to three matrices of one format and width that read the same activations (q, k and v; gate and
// up), in one launch.
struct MatVecJob {
  static constexpr int kMax = 3;
  int count = 0;
  DeviceMatrix w[kMax];
  MatVecOut out[kMax];
  // Scratch for the GEMM's four pieces of long rows when it computes them in separate blocks (too few
  // tiles to fill the GPU otherwise); null or too small: one block per tile does all four.
  float* split = nullptr;
  int64_t split_floats = 0;
  MatVecTail tail;
};

// For every matrix k of the job: y_k (n, w_k.rows) = x (n, cols) . w_k^T. Quantized formats read xq,
// the others x.
// Batches of several rows of the quantized formats go to SmallQuantGemm or QuantGemm, which give the
// same bits.
cudaError_t MatVec(const MatVecJob& job, const float* x, Q8Act xq, int64_t n, cudaStream_t stream);
// The same for one activation row of a quantized format and no tail, a warp per whole row (matvec_rows.cu):
// the same bits. MatVec takes it where MatVecRowsTakes (FAK_CUDA_MATVEC_ROWS=0: never, for comparisons).
constexpr int64_t kMatVecRowsMaxCols = 32768;  // the activation row is staged in shared memory
bool MatVecRowsTakes(const MatVecJob& job, int64_t n);
cudaError_t MatVecRows(const MatVecJob& job, Q8Act xq, cudaStream_t stream);
// The same for the quantized formats on the tensor cores (gemm.cu): tiles of 64 weight rows x 64
// activation rows, int8 mma for each block's integer dot, the terms summed in qblock.cuh's order.
cudaError_t QuantGemm(const MatVecJob& job, Q8Act xq, int64_t n, cudaStream_t stream);

// The same for Q8_0 weights and batches of kSmallGemmMinRows to kSmallGemmMaxRows rows (batched decode):
// blocks of 16 weight rows whose warps split the segments (gemm_small.cu). Measured on an H200 (1.5B
// geometry): at 4 rows the matrix-vector kernel is as fast, at 64 the GEMM's 64 x 64 tiles are faster.
constexpr int64_t kSmallGemmMinRows = 5, kSmallGemmMaxRows = 32;
cudaError_t SmallQuantGemm(const MatVecJob& job, Q8Act xq, int64_t n, cudaStream_t stream);

// The GPU's multiprocessors (0 when the device cannot be asked), for sizing grids.
int MultiprocessorCount();

// While set on a thread, the kernels it launches (or captures) leave out programmatic dependent launch
// (pdl.cuh) and run in plain stream order, the same bits. The step queue sets it for the steps that
// measured faster so: a hybrid model's prompt steps (docs/bench/gpu.md).
void SetPlainLaunches(bool plain);
bool PlainLaunches();

// q, d = the int8 shadow of x (rows x cols, cols a multiple of 32) with a scale per `group` (32 or 256)
// values of a row.
cudaError_t Quantize(const float* x, int64_t rows, int64_t cols, int8_t* q, float* d, int group,
                     cudaStream_t stream);

// y = x / rms(x) * w per row; when q is not null also y's int8 shadow (cols a multiple of 32) with a
// scale per `group` values. The sum of squares in a fixed order per row length: per thread over its
// runs, per warp, then over the warps; with the norm tail on (TailInKernel), RmsNormRow's order
// (row_ops.cuh).
cudaError_t RmsNorm(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps,
                    int8_t* q, float* d, int group, cudaStream_t stream);
// x[r] += b for each of rows rows.
cudaError_t AddRow(float* x, const float* b, int64_t rows, int64_t cols, cudaStream_t stream);
// x += y over n elements.
cudaError_t Add(float* x, const float* y, int64_t n, cudaStream_t stream);
// g = silu(g) * u over rows x cols elements; when q is not null also g's int8 shadow (cols a multiple of
// 32) with a scale per `group` values of a row.
cudaError_t SiluMul(float* g, const float* u, int64_t rows, int64_t cols, int8_t* q, float* d, int group,
                    cudaStream_t stream);
// Rotates the first 2 * half dims of every head of row r by the angles whose cos and sin are
// cos_sin[r * 2 * half + i] and cos_sin[r * 2 * half + half + i].
cudaError_t Rope(float* x, int64_t rows, int64_t cols, int64_t head_dim, int64_t half, const float* cos_sin,
                 bool neox, cudaStream_t stream);
// out[i] = x[out_rows[i]].
cudaError_t Gather(const float* x, int64_t cols, const int32_t* out_rows, int64_t n_out, float* out,
                   cudaStream_t stream);

// flags[b] = whether block b of a fixed grid of kFiniteFlags blocks found a NaN or infinity among the
// n floats of x (each block a strided share); all zero means x is finite.
constexpr int kFiniteFlags = 128;
cudaError_t NonFiniteFlags(const float* x, int64_t n, uint32_t* flags, cudaStream_t stream);

// Stores every row's keys and values (n_kv_head * head_dim each) at its position, layer `layer`.
cudaError_t KvWrite(const DeviceKv& kv, const DeviceBatch& b, int64_t layer, const float* k, const float* v,
                    int64_t rows, cudaStream_t stream);
// Rope of q (null: none) and k, then KvWrite of k and v: the three ops in one launch, the same values.
cudaError_t RopeKvWrite(float* q, int64_t q_cols, float* k, const float* v, int64_t rows, int64_t head_dim,
                        int64_t half, const float* cos_sin, bool neox, const DeviceKv& kv,
                        const DeviceBatch& b, int64_t layer, cudaStream_t stream);
// Long contexts (head sizes 64, 128, 256): a row's positions are split into chunks, a function of its
// context length alone, whose softmax partials (sums, maximum, normalizer) are computed by separate
// blocks and combined in chunk order; a row of one chunk is computed as before, in one block.
constexpr int64_t kAttnTile = 128;
constexpr int64_t kAttnMaxChunks = 16;
constexpr int64_t kAttnMinChunkTiles = 2;  // chunks of at least 256 positions
FAK_HOST_DEVICE constexpr int64_t AttnChunkLen(int64_t ctx) {
  const int64_t tiles = (ctx + kAttnTile - 1) / kAttnTile;
  const int64_t per = (tiles + kAttnMaxChunks - 1) / kAttnMaxChunks;
  return kAttnTile * (per > kAttnMinChunkTiles ? per : kAttnMinChunkTiles);
}
FAK_HOST_DEVICE constexpr int64_t AttnChunks(int64_t ctx) {
  return (ctx + AttnChunkLen(ctx) - 1) / AttnChunkLen(ctx);
}
// The most chunks of any context up to max_ctx: the grid of a batch whose longest context is max_ctx.
// AttnChunks itself is not monotonic (16 chunks of 256 positions at 4,096, 11 of 384 at 4,097), so a
// shorter row of the batch may have more chunks than the longest.
FAK_HOST_DEVICE constexpr int64_t AttnGridChunks(int64_t max_ctx) {
  return max_ctx <= kAttnMaxChunks * kAttnTile * kAttnMinChunkTiles ? AttnChunks(max_ctx) : kAttnMaxChunks;
}
// Floats of the chunk partials Attention needs for `rows` rows whose longest context is max_ctx; 0 when
// no row has more than one chunk.
FAK_HOST_DEVICE constexpr int64_t AttnPartFloats(int64_t rows, int64_t n_head, int64_t head_dim,
                                                 int64_t max_ctx) {
  return AttnChunks(max_ctx) > 1 && (head_dim == 64 || head_dim == 128 || head_dim == 256)
             ? rows * n_head * kAttnMaxChunks * (head_dim + 2)
             : 0;
}

// Attention groups: runs of consecutive rows of one sequence, at most kAttnGroupRows long, whose contexts
// share one chunk length, computed together by the tensor-core kernel (attention_mma.cu) from keys and
// values staged once for them. A row's result does not depend on its group.
constexpr int64_t kAttnGroupRows = 16;
// Appends the groups of a batch to `groups` (3 ints each, as DeviceBatch::attn_groups) and returns the
// most rows of any.
int64_t AttnGroups(const int32_t* positions, const int32_t* row_seq, int64_t rows, int64_t n_seqs,
                   std::vector<int32_t>* groups);
// Whether attention runs on the tensor cores for this geometry: f16 caches, head size 64 or 128, and
// at most 8 query heads per KV head (the rest run on the f32 kernels of attention.cu). A function of
// the model alone, so every row of a model takes the same arithmetic.
FAK_HOST_DEVICE constexpr bool AttnOnTensorCores(bool f32_cache, int64_t head_dim, int64_t group) {
  return !f32_cache && (head_dim == 64 || head_dim == 128) && group >= 1 && group <= 8;
}

// Whether Attention can write its output's shadow in groups of kKQuantGroup values itself: where a
// group is whole heads that one block writes. On the tensor cores a block writes the query heads of a
// KV head (of a row), so their width must be a multiple of the group; the f32 kernels write a head a
// block (or a group of 128 threads), so the head must be the group. Elsewhere the product that reads
// the output quantizes it.
FAK_HOST_DEVICE constexpr bool AttnShadowGroups(bool f32_cache, int64_t head_dim, int64_t group) {
  return AttnOnTensorCores(f32_cache, head_dim, group) ? (group * head_dim) % kKQuantGroup == 0
                                                       : head_dim == kKQuantGroup;
}

// out (rows, n_head * head_dim) = causal attention of each row's query heads over its sequence's cache;
// when oq is not null also out's int8 shadow in groups of `og` values (32, or kKQuantGroup where
// AttnShadowGroups). max_ctx: the longest context of the rows (positions + 1); part: AttnPartFloats
// floats of scratch (null when that is 0); n_groups and group_rows: the batch's attention groups
// (b.attn_groups) and the most rows of any.
cudaError_t Attention(const DeviceKv& kv, const DeviceBatch& b, int64_t layer, const float* q, int64_t rows,
                      int64_t n_head, float scale, float* out, int8_t* oq, float* od, int og, int64_t max_ctx,
                      float* part, int64_t n_groups, int64_t group_rows, cudaStream_t stream);
// The tensor-core kernel (attention_mma.cu) for geometries where AttnOnTensorCores; `chunks`: the most
// chunks of any row. Rows of several chunks leave partials for Attention's combine.
cudaError_t AttentionMma(const DeviceKv& kv, const DeviceBatch& b, int64_t layer, const float* q,
                         int64_t n_head, float scale, float* out, int8_t* oq, float* od, int og, float* part,
                         int64_t n_groups, int64_t group_rows, int64_t chunks, cudaStream_t stream);

// --- The hybrid architecture (delta_net.cu).

// x *= sigmoid(g) over a rows x cols tensor; with q (cols a multiple of 32), its int8 shadow in groups
// of `group` (32 or 256) values of a row, as Quantize writes it.
cudaError_t SigmoidMul(float* x, const float* g, int64_t rows, int64_t cols, int8_t* q, float* d, int group,
                       cudaStream_t stream);
// Each of `heads` heads of 2 * head_dim in x: the first head_dim to a, the second to b.
cudaError_t SplitHeads(const float* x, int64_t heads, int64_t head_dim, float* a, float* b,
                       cudaStream_t stream);
// Whether the gated norm over rows x cols (a row per head) can write its shadow in groups of 256
// consecutive values: whole warps a row and whole heads a group, and whole groups in all.
FAK_HOST_DEVICE constexpr bool GatedNormShadowGroups(int64_t rows, int64_t cols) {
  return cols > 0 && cols % 32 == 0 && kKQuantGroup % cols == 0 && (rows * cols) % kKQuantGroup == 0;
}
// x = x / rms(x) * w * silu(z) per row (in place); with q, x's int8 shadow as Quantize writes it over
// consecutive values of the whole tensor: in blocks of 32 (cols a multiple of 32), or in groups of 256
// (GatedNormShadowGroups: the groups of any product input whose rows are a multiple of 256 long).
cudaError_t GatedRmsNorm(float* x, const float* w, const float* z, int64_t rows, int64_t cols, float eps,
                         int8_t* q, float* d, int group, cudaStream_t stream);

// One Gated-DeltaNet layer (ops/backend.h's DeltaNetSpec) over a state store in device memory.
struct DeltaNetDevice {
  uint8_t* states = nullptr;
  size_t slot_bytes = 0;
  size_t conv_offset = 0;  // the layer's convolution window in a slot
  size_t rule_offset = 0;  // its recurrent state S
  int64_t n_k_head = 0, n_v_head = 0, k_dim = 0, v_dim = 0, conv_dim = 0;
  int conv_kernel = 0;
  float eps = 1e-6f;
  // Value heads per key head when value head h reads key head h / key_group; 0: h % n_k_head.
  int64_t key_group = 0;
};

// seqs: (row0, n_rows, state slot) of each of n_seqs sequences, whose rows are consecutive.
// The causal depthwise convolution of x (rows, conv_dim) with w (conv_dim, conv_kernel), then SiLU, in
// place, continuing each sequence's window. `rows`: the batch's rows (x's); batches of prompts (32
// rows a sequence or more on average) spread each sequence's rows over a block, the same bits
// (FAK_CUDA_CONV_SERIAL=1: one thread per channel and sequence always, for comparisons).
cudaError_t DeltaNetConv(float* x, const float* w, const DeltaNetDevice& d, const int32_t* seqs,
                         int64_t n_seqs, int64_t rows, cudaStream_t stream);
// The gated delta rule (ops/backend.h's DeltaNetRule) into out (rows, n_v_head * v_dim). Needs
// k_dim <= 128 and k_dim and conv_dim multiples of 4.
cudaError_t DeltaNetRule(const float* x, const float* b, const float* a, const float* ssm_a,
                         const float* dt_bias, const DeltaNetDevice& d, const int32_t* seqs, int64_t n_seqs,
                         float* out, cudaStream_t stream);

// What a boundary between dependent steps costs (launch_bench.cu, for the kernel bench): microseconds
// a kernel that does nothing takes in a graph of such kernels, in plain stream order and with
// programmatic dependent launch, at a block per multiprocessor and at eight; and a grid-wide barrier
// inside one kernel of a block per multiprocessor (0 where cooperative launches are not supported).
struct LaunchCosts {
  int sms = 0;
  double plain_us = 0, pdl_us = 0, plain8_us = 0, pdl8_us = 0, barrier_us = 0;
};
cudaError_t MeasureLaunchCosts(cudaStream_t stream, double min_seconds, LaunchCosts* costs);

}  // namespace fak::cuda
