/* Prints every ABI-relevant fact of whichever nccl.h it is compiled against:
 * struct sizes, field offsets and types, enum values, initializer contents and
 * macro values. run_abi_compare.sh builds it against NVIDIA's header and
 * against braid's and diffs the outputs. Lines starting with "version " hold
 * values that differ on purpose (braid claims 2.27.7); the script checks them
 * separately. Needs C11 for _Generic and _Alignof. */
#include <nccl.h>

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define TYPE_NAME(x)                                                                  \
  _Generic((x), char: "char", signed char: "signed char", unsigned char: "unsigned char", \
           short: "short", unsigned short: "unsigned short", int: "int",                \
           unsigned int: "unsigned int", long: "long", unsigned long: "unsigned long",  \
           long long: "long long", unsigned long long: "unsigned long long",           \
           float: "float", double: "double", char*: "char*", const char*: "const char*", \
           void*: "void*", default: "other")

#define FIELD(T, f)                                                                   \
  printf("field %s.%s offset=%zu size=%zu type=%s\n", #T, #f, offsetof(T, f),          \
         sizeof(((T*)0)->f), TYPE_NAME(((T*)0)->f))
#define STRUCT(T) printf("struct %s size=%zu align=%zu\n", #T, sizeof(T), _Alignof(T))
#define ENUM_TYPE(T) \
  printf("enum %s size=%zu signed=%d\n", #T, sizeof(T), (int)((T)-1 < (T)0))
#define ENUM(v) printf("enumval %s=%lld\n", #v, (long long)(v))
#define INT_MACRO(m) printf("macro %s=%lld type=%s\n", #m, (long long)(m), TYPE_NAME(m))
#define INT_FIELD(prefix, s, f) printf("%s %s=%lld\n", prefix, #f, (long long)(s).f)

static void dumpStructs(void) {
  STRUCT(ncclUniqueId);
  FIELD(ncclUniqueId, internal);
  STRUCT(ncclConfig_t);
  FIELD(ncclConfig_t, size);
  FIELD(ncclConfig_t, magic);
  FIELD(ncclConfig_t, version);
  FIELD(ncclConfig_t, blocking);
  FIELD(ncclConfig_t, cgaClusterSize);
  FIELD(ncclConfig_t, minCTAs);
  FIELD(ncclConfig_t, maxCTAs);
  FIELD(ncclConfig_t, netName);
  FIELD(ncclConfig_t, splitShare);
  FIELD(ncclConfig_t, trafficClass);
  FIELD(ncclConfig_t, commName);
  FIELD(ncclConfig_t, collnetEnable);
  FIELD(ncclConfig_t, CTAPolicy);
  FIELD(ncclConfig_t, shrinkShare);
  FIELD(ncclConfig_t, nvlsCTAs);
  FIELD(ncclConfig_t, nChannelsPerNetPeer);
  FIELD(ncclConfig_t, nvlinkCentricSched);
  /* The versioned struct tags are part of the source API. */
  printf("struct tag ncclConfig_v22800 size=%zu\n", sizeof(struct ncclConfig_v22800));
  STRUCT(ncclSimInfo_t);
  FIELD(ncclSimInfo_t, size);
  FIELD(ncclSimInfo_t, magic);
  FIELD(ncclSimInfo_t, version);
  FIELD(ncclSimInfo_t, estimatedTime);
  printf("struct tag ncclSimInfo_v22200 size=%zu\n", sizeof(struct ncclSimInfo_v22200));
  printf("handle ncclComm_t size=%zu\n", sizeof(ncclComm_t));
  printf("handle ncclWindow_t size=%zu\n", sizeof(ncclWindow_t));
  printf("handle cudaStream_t size=%zu\n", sizeof(cudaStream_t));
}

static void dumpEnums(void) {
  ENUM_TYPE(ncclResult_t);
  ENUM(ncclSuccess);
  ENUM(ncclUnhandledCudaError);
  ENUM(ncclSystemError);
  ENUM(ncclInternalError);
  ENUM(ncclInvalidArgument);
  ENUM(ncclInvalidUsage);
  ENUM(ncclRemoteError);
  ENUM(ncclInProgress);
  ENUM(ncclNumResults);

  ENUM_TYPE(ncclRedOp_dummy_t);
  ENUM(ncclNumOps_dummy);
  ENUM_TYPE(ncclRedOp_t);
  ENUM(ncclSum);
  ENUM(ncclProd);
  ENUM(ncclMax);
  ENUM(ncclMin);
  ENUM(ncclAvg);
  ENUM(ncclNumOps);
  ENUM(ncclMaxRedOp);

  ENUM_TYPE(ncclDataType_t);
  ENUM(ncclInt8);
  ENUM(ncclChar);
  ENUM(ncclUint8);
  ENUM(ncclInt32);
  ENUM(ncclInt);
  ENUM(ncclUint32);
  ENUM(ncclInt64);
  ENUM(ncclUint64);
  ENUM(ncclFloat16);
  ENUM(ncclHalf);
  ENUM(ncclFloat32);
  ENUM(ncclFloat);
  ENUM(ncclFloat64);
  ENUM(ncclDouble);
  ENUM(ncclBfloat16);
  ENUM(ncclFloat8e4m3);
  ENUM(ncclFloat8e5m2);
  ENUM(ncclNumTypes);

  ENUM_TYPE(ncclScalarResidence_t);
  ENUM(ncclScalarDevice);
  ENUM(ncclScalarHostImmediate);
}

static void dumpMacros(void) {
  INT_MACRO(NCCL_UNIQUE_ID_BYTES);
  INT_MACRO(NCCL_CONFIG_UNDEF_INT);
  printf("macro NCCL_CONFIG_UNDEF_PTR is_null=%d\n", (void*)NCCL_CONFIG_UNDEF_PTR == NULL);
  printf("macro NCCL_COMM_NULL is_null=%d\n", (void*)NCCL_COMM_NULL == NULL);
  INT_MACRO(NCCL_SPLIT_NOCOLOR);
  printf("macro NCCL_UNDEF_FLOAT=%a type=%s\n", (double)NCCL_UNDEF_FLOAT,
         TYPE_NAME(NCCL_UNDEF_FLOAT));
  INT_MACRO(NCCL_WIN_DEFAULT);
  INT_MACRO(NCCL_WIN_COLL_SYMMETRIC);
  INT_MACRO(NCCL_WIN_REQUIRED_ALIGNMENT);
  INT_MACRO(NCCL_CTA_POLICY_DEFAULT);
  INT_MACRO(NCCL_CTA_POLICY_EFFICIENCY);
  INT_MACRO(NCCL_CTA_POLICY_ZERO);
  INT_MACRO(NCCL_SHRINK_DEFAULT);
  INT_MACRO(NCCL_SHRINK_ABORT);
  INT_MACRO(NCCL_REVOKE_DEFAULT);
  /* The encoding switches between 2.8 and 2.9; probe both sides and the edges. */
  INT_MACRO(NCCL_VERSION(2, 8, 4));
  INT_MACRO(NCCL_VERSION(2, 9, 6));
  INT_MACRO(NCCL_VERSION(2, 27, 7));
  INT_MACRO(NCCL_VERSION(2, 28, 9));
  INT_MACRO(NCCL_VERSION(1, 9, 0));
  INT_MACRO(NCCL_VERSION(3, 0, 1));
}

static void dumpInitializers(void) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  const char* p = "config";
  INT_FIELD(p, c, size);
  printf("%s magic=0x%x\n", p, c.magic);
  INT_FIELD(p, c, blocking);
  INT_FIELD(p, c, cgaClusterSize);
  INT_FIELD(p, c, minCTAs);
  INT_FIELD(p, c, maxCTAs);
  printf("%s netName_is_null=%d\n", p, c.netName == NULL);
  INT_FIELD(p, c, splitShare);
  INT_FIELD(p, c, trafficClass);
  printf("%s commName_is_null=%d\n", p, c.commName == NULL);
  INT_FIELD(p, c, collnetEnable);
  INT_FIELD(p, c, CTAPolicy);
  INT_FIELD(p, c, shrinkShare);
  INT_FIELD(p, c, nvlsCTAs);
  INT_FIELD(p, c, nChannelsPerNetPeer);
  INT_FIELD(p, c, nvlinkCentricSched);

  ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;
  p = "siminfo";
  INT_FIELD(p, s, size);
  printf("%s magic=0x%x\n", p, s.magic);
  printf("%s estimatedTime=%a\n", p, (double)s.estimatedTime);

  /* Version-dependent: checked by the script, not diffed. */
  printf("version config.version=%u\n", c.version);
  printf("version siminfo.version=%u\n", s.version);
}

static void dumpVersion(void) {
  printf("version NCCL_MAJOR=%d\n", NCCL_MAJOR);
  printf("version NCCL_MINOR=%d\n", NCCL_MINOR);
  printf("version NCCL_PATCH=%d\n", NCCL_PATCH);
  printf("version NCCL_SUFFIX=\"%s\"\n", NCCL_SUFFIX);
  printf("version NCCL_VERSION_CODE=%d\n", NCCL_VERSION_CODE);
  printf("version code_matches_parts=%d\n",
         NCCL_VERSION_CODE == NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH));
}

int main(void) {
  dumpStructs();
  dumpEnums();
  dumpMacros();
  dumpInitializers();
  dumpVersion();
  return 0;
}
