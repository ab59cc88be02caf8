/* braid's own extensions to the NCCL API. Everything here is prefixed braid*
 * so that a program can tell it runs on braid rather than NVIDIA's NCCL:
 * look the symbol up with dlsym(RTLD_DEFAULT, "braidVersionString"). */
#ifndef BRAID_H_
#define BRAID_H_

#ifdef __cplusplus
extern "C" {
#endif

/* "braid X.Y.Z (NCCL API 2.27.7)": the library that is actually loaded. */
const char* braidVersionString(void);

/* 1 when collectives accept CUDA device buffers: braid was built with CUDA and
 * this process can use a CUDA device; 0 otherwise (host buffers only). Stage 1
 * stages device buffers through pinned host memory (see kernels/README.md).
 * The first call may initialise the CUDA driver. */
int braidSupportsDeviceBuffers(void);

/* braid's extensions take NCCL's types; include nccl.h first. */
#ifdef NCCL_H_
/* Seconds any later blocking operation of `comm` may wait for its peers before it
 * fails (BRAID_TIMEOUT sets the default at init). A positive number. */
ncclResult_t braidCommSetTimeout(ncclComm_t comm, double seconds);

/* Reproducible reductions on `comm` (on: 1, off: 0; BRAID_REPRODUCIBLE=1 sets the
 * default at init): sums and averages of float32, float64, float16 and bfloat16
 * (allreduce, reduce, reduce-scatter) whose bits depend only on the ranks'
 * contributions, whatever algorithm, channel count, protocol or transport runs
 * them (docs/algorithms.md). Every rank of `comm` must set the same mode.
 * Blocking communicators only. On device buffers the call runs on the host and
 * returns when the results are on the device (not inside a graph capture); a
 * call inside ncclGroupStart/End runs when the group ends, after the group's
 * other calls. */
ncclResult_t braidCommSetReproducible(ncclComm_t comm, int on);

/* Float32 sums and averages on `comm` (allreduce, reduce-scatter, reduce) send
 * their messages as `type`: ncclBfloat16, ncclFloat16, ncclFloat8e4m3 or
 * ncclFloat8e5m2; ncclFloat32 turns it off (the default; BRAID_WIRE_TYPE=bf16,
 * fp16, fp8e4m3 or fp8e5m2 sets it at init). Every hop accumulates in float32;
 * an allreduce's results are the owner's narrowed values, the same bits on every
 * rank. bfloat16 sums and averages travel narrowed under the fp8 types too (added
 * in float, stored once as bfloat16). Lossy: the error bound is in
 * docs/algorithms.md. float16 and fp8 are
 * scaled per 32 values, so gradients neither underflow nor overflow. Every rank
 * of `comm` must set the same type (a mismatch fails the call). Reproducible
 * mode, where on, takes precedence. Device buffers are staged through the host. */
ncclResult_t braidCommSetWireType(ncclComm_t comm, ncclDataType_t type);

/* out[i] = what a peer decodes when values[0..count) travel as one message of
 * wire type `type` (as braidCommSetWireType takes it): the narrowing a rank's
 * contribution meets on its first hop. Host memory; out may be values. For
 * error feedback: the residual values - out is what the wire dropped. */
ncclResult_t braidWireRoundTrip(const float* values, float* out, size_t count, ncclDataType_t type);

/* A fresh unique id served by a root in this process, whatever NCCL_COMM_ID says
 * (ncclGetUniqueId follows NCCL_COMM_ID, which gives every caller the same id):
 * for frameworks that make several communicators, e.g. subgroups. */
ncclResult_t braidGetPrivateUniqueId(ncclUniqueId* uniqueId);

/* ncclCommInitRankConfig (config may be NULL) whose creation, and every later
 * blocking operation, may wait `seconds` for its peers instead of BRAID_TIMEOUT:
 * a framework can bound each communicator without touching the environment. */
ncclResult_t braidCommInitRankTimeout(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                      ncclConfig_t* config, double seconds);
#endif

#ifdef __cplusplus
}
#endif

#endif /* BRAID_H_ */
