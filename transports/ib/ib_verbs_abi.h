// The part of libibverbs' binary interface braid uses, declared here so that
// braid builds without rdma-core's headers and loads the library at run time.
//
// Layouts follow the stable ABI of libibverbs.so.1 (x86_64/aarch64 LP64). Only
// fields braid reads or writes are named; the rest is opaque padding of the
// right size. tests/transports/ib/ib_abi_test.cc checks every named offset and struct size
// against rdma-core's <infiniband/verbs.h> when that header is present.
// Names differ from rdma-core's on purpose: verbs.h defines some functions as
// macros, and both headers must be includable in one file for that check.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>

namespace braid::ib {

// Opaque to braid: only pointers to them are passed around.
struct IbvDevice;
struct IbvSrq;
struct IbvAh;
struct IbvCompChannel;
struct IbvContext;

// Only the leading field is named; braid never allocates or copies one.
struct IbvCq {
  IbvContext* context;
};

// Function-pointer table inside every context. ibv_post_send, ibv_post_recv and
// ibv_poll_cq are inline functions in verbs.h that call through it, so a loader
// cannot dlsym them; braid calls these slots instead.
constexpr int kOpsPollCq = 11;
constexpr int kOpsPostSend = 25;
constexpr int kOpsPostRecv = 26;
constexpr int kOpsSlotCount = 32;  // entries in the table

struct IbvContext {
  IbvDevice* device;
  void* ops[kOpsSlotCount];
  int cmdFd;
  int asyncFd;
  int numCompVectors;
  pthread_mutex_t mutex;
  void* abiCompat;
};

struct IbvPd {
  IbvContext* context;
  uint32_t handle;
};

struct IbvMr {
  IbvContext* context;
  IbvPd* pd;
  void* addr;
  size_t length;
  uint32_t handle;
  uint32_t lkey;
  uint32_t rkey;
};

struct IbvQp {
  IbvContext* context;
  void* qpContext;
  IbvPd* pd;
  IbvCq* sendCq;
  IbvCq* recvCq;
  IbvSrq* srq;
  uint32_t handle;
  uint32_t qpNum;
  int state;
  int qpType;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  uint32_t eventsCompleted;
};

struct IbvDeviceAttr {
  char fwVer[64];
  uint64_t nodeGuid;
  uint64_t sysImageGuid;
  uint64_t maxMrSize;
  uint64_t pageSizeCap;
  uint32_t vendorId;
  uint32_t vendorPartId;
  uint32_t hwVer;
  int maxQp;
  int maxQpWr;
  unsigned deviceCapFlags;
  int maxSge;
  int maxSgeRd;
  int maxCq;
  int maxCqe;
  int maxMr;
  int maxPd;
  int rest1[20];  // rd_atom limits ... max_srq_sge: not used
  uint16_t maxPkeys;
  uint8_t localCaAckDelay;
  uint8_t physPortCnt;
};

enum IbvPortState : int { kPortDown = 1, kPortInit = 2, kPortArmed = 3, kPortActive = 4 };
enum IbvLinkLayer : uint8_t { kLinkUnspecified = 0, kLinkInfiniBand = 1, kLinkEthernet = 2 };
enum IbvMtu : int { kMtu256 = 1, kMtu512 = 2, kMtu1024 = 3, kMtu2048 = 4, kMtu4096 = 5 };

struct IbvPortAttr {
  int state;  // IbvPortState
  int maxMtu;
  int activeMtu;
  int gidTblLen;
  uint32_t portCapFlags;
  uint32_t maxMsgSz;
  uint32_t badPkeyCntr;
  uint32_t qkeyViolCntr;
  uint16_t pkeyTblLen;
  uint16_t lid;
  uint16_t smLid;
  uint8_t lmc;
  uint8_t maxVlNum;
  uint8_t smSl;
  uint8_t subnetTimeout;
  uint8_t initTypeReply;
  uint8_t activeWidth;
  uint8_t activeSpeed;
  uint8_t physState;
  uint8_t linkLayer;  // IbvLinkLayer
  uint8_t flags;
  uint16_t portCapFlags2;
  // Room for fields a newer library may append: it writes as many as it knows.
  uint8_t future[64];
};

union IbvGid {
  uint8_t raw[16];
  struct {
    uint64_t subnetPrefix;  // big endian
    uint64_t interfaceId;   // big endian
  } global;
};

enum IbvQpType : int { kQpRc = 2 };
enum IbvQpState : int { kQpsReset = 0, kQpsInit = 1, kQpsRtr = 2, kQpsRts = 3, kQpsErr = 6 };

enum IbvAccess : int { kAccessLocalWrite = 1, kAccessRemoteWrite = 2, kAccessRemoteRead = 4 };

enum IbvQpAttrMask : int {
  kQpState = 1 << 0,
  kQpAccessFlags = 1 << 3,
  kQpPkeyIndex = 1 << 4,
  kQpPort = 1 << 5,
  kQpAv = 1 << 7,
  kQpPathMtu = 1 << 8,
  kQpTimeout = 1 << 9,
  kQpRetryCnt = 1 << 10,
  kQpRnrRetry = 1 << 11,
  kQpRqPsn = 1 << 12,
  kQpMaxQpRdAtomic = 1 << 13,
  kQpMinRnrTimer = 1 << 15,
  kQpSqPsn = 1 << 16,
  kQpMaxDestRdAtomic = 1 << 17,
  kQpDestQpn = 1 << 20,
};

struct IbvQpCap {
  uint32_t maxSendWr;
  uint32_t maxRecvWr;
  uint32_t maxSendSge;
  uint32_t maxRecvSge;
  uint32_t maxInlineData;
};

struct IbvQpInitAttr {
  void* qpContext;
  IbvCq* sendCq;
  IbvCq* recvCq;
  IbvSrq* srq;
  IbvQpCap cap;
  int qpType;  // IbvQpType
  int sqSigAll;
};

struct IbvGlobalRoute {
  IbvGid dgid;
  uint32_t flowLabel;
  uint8_t sgidIndex;
  uint8_t hopLimit;
  uint8_t trafficClass;
};

struct IbvAhAttr {
  IbvGlobalRoute grh;
  uint16_t dlid;
  uint8_t sl;
  uint8_t srcPathBits;
  uint8_t staticRate;
  uint8_t isGlobal;
  uint8_t portNum;
};

struct IbvQpAttr {
  int qpState;
  int curQpState;
  int pathMtu;
  int pathMigState;
  uint32_t qkey;
  uint32_t rqPsn;
  uint32_t sqPsn;
  uint32_t destQpNum;
  unsigned qpAccessFlags;
  IbvQpCap cap;
  IbvAhAttr ahAttr;
  IbvAhAttr altAhAttr;
  uint16_t pkeyIndex;
  uint16_t altPkeyIndex;
  uint8_t enSqdAsyncNotify;
  uint8_t sqDraining;
  uint8_t maxRdAtomic;
  uint8_t maxDestRdAtomic;
  uint8_t minRnrTimer;
  uint8_t portNum;
  uint8_t timeout;
  uint8_t retryCnt;
  uint8_t rnrRetry;
  uint8_t altPortNum;
  uint8_t altTimeout;
  uint32_t rateLimit;
};

struct IbvSge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

enum IbvWrOpcode : int { kWrRdmaWrite = 0, kWrRdmaWriteWithImm = 1, kWrSend = 2 };
enum IbvSendFlags : unsigned { kSendFence = 1, kSendSignaled = 2, kSendInline = 8 };

struct IbvSendWr {
  uint64_t wrId;
  IbvSendWr* next;
  IbvSge* sgList;
  int numSge;
  int opcode;  // IbvWrOpcode
  unsigned sendFlags;
  uint32_t immData;  // big endian on the wire
  struct {
    uint64_t remoteAddr;
    uint32_t rkey;
    uint32_t pad[5];  // the union also holds atomic and UD forms (32 bytes)
  } rdma;
  uint32_t qpTypeUnion;
  alignas(8) uint8_t tail[48];  // bind_mw / tso forms: not used
};

struct IbvRecvWr {
  uint64_t wrId;
  IbvRecvWr* next;
  IbvSge* sgList;
  int numSge;
};

// Completion status values (stable since the first libibverbs; ibv_wc_status).
enum IbvWcStatus : int {
  kWcSuccess = 0,
  kWcLocLenErr = 1,
  kWcLocQpOpErr = 2,
  kWcLocProtErr = 4,
  kWcWrFlushErr = 5,
  kWcLocAccessErr = 8,
  kWcRemInvReqErr = 9,
  kWcRemAccessErr = 10,
  kWcRemOpErr = 11,
  kWcRetryExcErr = 12,
  kWcRnrRetryExcErr = 13,
  kWcRemAbortErr = 16,
  kWcFatalErr = 19,
  kWcRespTimeoutErr = 20,
  kWcGeneralErr = 21,
  kWcStatusCount = 24,  // one past the last value rdma-core 44 defines
};
enum IbvWcOpcode : int { kWcSend = 0, kWcRdmaWrite = 1, kWcRecvRdmaWithImm = 129 };
enum IbvWcFlags : unsigned { kWcWithImm = 2 };

struct IbvWc {
  uint64_t wrId;
  int status;  // IbvWcStatus
  int opcode;  // IbvWcOpcode
  uint32_t vendorErr;
  uint32_t byteLen;
  uint32_t immData;  // big endian
  uint32_t qpNum;
  uint32_t srcQp;
  unsigned wcFlags;
  uint16_t pkeyIndex;
  uint16_t slid;
  uint8_t sl;
  uint8_t dlidPathBits;
};

}  // namespace braid::ib
