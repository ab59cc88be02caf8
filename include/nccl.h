/* braid's own nccl.h.
 *
 * Written for braid, not derived from NVIDIA's text. It is binary compatible
 * with the host API of NCCL 2.28 (names, signatures, enum values, struct
 * layouts), so a program compiled against either header runs on either
 * library. It reports version 2.27.7 because braid does not ship the device
 * API header (nccl_device.h) that 2.28 programs may expect next to this one.
 *
 * The header needs no CUDA headers: when <cuda_runtime.h> is reachable it is
 * used (so cudaStream_t, half and bfloat16 types come from CUDA); otherwise,
 * or with -DBRAID_NO_CUDA_HEADERS, cudaStream_t is declared here as the same
 * pointer type CUDA uses. Compiles as C99 and later, and as C++. */
#ifndef NCCL_H_
#define NCCL_H_

/* Lets code tell at compile time that it is built against braid's header. */
#define BRAID_NCCL_HEADER 1

#if !defined(BRAID_NO_CUDA_HEADERS) && defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#define BRAID_NCCL_WITH_CUDA_HEADERS 1
#endif
#endif

#ifdef BRAID_NCCL_WITH_CUDA_HEADERS
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
#else
/* Same declaration as CUDA's driver_types.h, so the two can meet in one program. */
typedef struct CUstream_st* cudaStream_t;
#endif

#include <limits.h>
#include <stddef.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 27
#define NCCL_PATCH 7
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 22707
/* Releases up to 2.8 packed the version as X*1000+Y*100+Z; later ones as
 * X*10000+Y*100+Z. The macro keeps both encodings. */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#if defined(__GNUC__) || defined(__clang__)
#define BRAID_NCCL_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define BRAID_NCCL_DEPRECATED(msg)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- handles and identifiers ----------------------------------------------- */

typedef struct ncclComm* ncclComm_t;                 /* a communicator */
typedef struct ncclWindow_vidmem* ncclWindow_t;      /* a registered memory window */
#define NCCL_COMM_NULL NULL

/* Opaque bytes made by ncclGetUniqueId on one rank and handed to all others. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* ---- result codes ------------------------------------------------------------ */

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

/* ---- sentinels and flags ------------------------------------------------------ */

#define NCCL_CONFIG_UNDEF_INT INT_MIN /* "let the library choose" for int fields */
#define NCCL_CONFIG_UNDEF_PTR NULL    /* same, for pointer fields */
#define NCCL_SPLIT_NOCOLOR -1         /* ncclCommSplit color: this rank joins no group */
#define NCCL_UNDEF_FLOAT -1.0f

/* winFlags of ncclCommWindowRegister. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* Values of ncclConfig_t.CTAPolicy. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* shrinkFlags of ncclCommShrink: DEFAULT keeps pending work of the parent,
 * ABORT cancels it before the shrink. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* revokeFlags of ncclCommRevoke; no other value is defined. */
#define NCCL_REVOKE_DEFAULT 0x00

/* ---- communicator configuration --------------------------------------------- */

/* The first three fields let the library recognise which header version built
 * the struct; always start from NCCL_CONFIG_INITIALIZER and then set fields. */
typedef struct ncclConfig_v22800 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;            /* 0: calls may return ncclInProgress */
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                   \
  {                                                                               \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,      \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,      \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,      \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,      \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT                              \
  }

/* Filled by ncclGroupSimulateEnd; start from NCCL_SIM_INFO_INITIALIZER. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER                                                 \
  {                                                                               \
    sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_UNDEF_FLOAT                                                          \
  }

/* ---- reduction operators and data types ------------------------------------- */

/* ncclRedOp_t must keep the size it had in older releases. The helper enum has
 * the size the compiler picks for a small enum, and ncclMaxRedOp is the largest
 * signed value of that size; dynamic operators (ncclRedOpCreatePreMulSum) take
 * values from ncclNumOps up to ncclMaxRedOp. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives: read from device memory
 * when the collective runs, or read from host memory before the call returns. */
typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

/* Every entry point has a twin with a leading 'p' (pnccl*): the nccl* symbol
 * may be interposed by a profiling tool, which then calls the pnccl* one. */

/* ---- memory -------------------------------------------------------------------- */

/* Allocates memory suited to registration; the block may be larger than asked. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* ---- library and communicator life cycle ------------------------------------- */

/* Stores the library's NCCL_VERSION_CODE (which may differ from this header's). */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/* Makes the id that one rank creates and all ranks pass to ncclCommInitRank*. */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/* Joins rank `rank` of `nranks` to the communicator named by commId. Blocks
 * until all ranks have joined unless called inside a group or with a
 * non-blocking config. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/* Creates ndev communicators of one clique in this process, one per device
 * (devlist, or devices 0..ndev-1 when NULL); comm must hold ndev handles. */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/* Like ncclCommInitRankConfig with nId ids (same ids, same order on every rank)
 * to spread the bootstrap load. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId* commIds, ncclConfig_t* config);

/* Completes all pending work of comm; ncclCommDestroy may then free it
 * without waiting. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

/* Releases comm and its local resources. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/* Cancels pending work of comm, then releases it. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/* Stops pending work of comm so it can be destroyed, split or shrunk safely;
 * revokeFlags must be NCCL_REVOKE_DEFAULT. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* Partitions comm by color (ordering ranks by key) into new communicators;
 * NCCL_SPLIT_NOCOLOR yields NULL. A NULL config inherits comm's. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                            ncclConfig_t* config);

/* Makes a communicator of the ranks of comm not listed in excludeRanksList,
 * renumbered densely. shrinkFlags: NCCL_SHRINK_*. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                             ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);

/* ---- errors and diagnostics ---------------------------------------------------- */

/* A fixed description of a result code. */
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);

/* The text of the most recent failure seen by the library. */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

/* Re-reads the logging environment variables. Not part of the supported API. */
BRAID_NCCL_DEPRECATED("ncclResetDebugInit is not a supported NCCL API; it may disappear")
void ncclResetDebugInit(void);
BRAID_NCCL_DEPRECATED("pncclResetDebugInit is not a supported NCCL API; it may disappear")
void pncclResetDebugInit(void);

/* Reports errors that occurred in the background (or ncclInProgress while a
 * non-blocking operation is still running). Cheap and thread-safe. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

/* ---- communicator queries ------------------------------------------------------ */

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* ---- buffer registration --------------------------------------------------------- */

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);

/* Collective over comm: registers buff on every rank as one window. */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                     int winFlags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* ---- custom reduction operators ----------------------------------------------- */

/* Creates an operator that multiplies each input by *scalar, then sums; valid
 * only for comm and datatype. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);
/* Destroys op once no call using it is still being issued. */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- collectives ------------------------------------------------------------------ *
 * Every rank of comm makes the same call. On a device, the work is enqueued on
 * stream. Counts are in elements of datatype. */

/* root receives the reduction of all sendbuffs in recvbuff. */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream);

/* Older in-place form of ncclBroadcast. */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);

/* Copies root's sendbuff into every rank's recvbuff. */
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream);

/* Every rank receives the reduction of all sendbuffs. */
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream);

/* Rank r receives block r (recvcount elements) of the reduction of all
 * sendbuffs (nranks*recvcount elements each). */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream);

/* recvbuff block r (sendcount elements) receives rank r's sendbuff. */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/* Block j of sendbuff goes to rank j; block i of recvbuff comes from rank i. */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/* root's recvbuff block i receives rank i's sendbuff. */
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);

/* Rank i's recvbuff receives block i of root's sendbuff. */
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm,
                          cudaStream_t stream);

/* ---- point to point ----------------------------------------------------------------- *
 * A send to peer matches a recv from this rank with the same count and type.
 * Exchanges that must progress together go in one group. */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

/* ---- groups --------------------------------------------------------------------------- *
 * Calls between ncclGroupStart and the matching ncclGroupEnd are collected and
 * issued together at ncclGroupEnd; groups nest and may span communicators. */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/* Closes the group like ncclGroupEnd would, but only estimates its cost into
 * simInfo instead of running it. */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCL_H_ */
