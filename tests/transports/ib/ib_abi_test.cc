// Checks the hand-written layouts of transports/ib/ib_verbs_abi.h against
// rdma-core's own header where it is installed (it need not be: braid does not
// need it to build, so without it this test reports itself skipped).
#include <gtest/gtest.h>

#include <cstddef>

#include "transports/ib/ib_verbs_abi.h"

#if __has_include(<infiniband/verbs.h>)
#include <infiniband/verbs.h>
#define BRAID_HAVE_VERBS_H 1
#endif

namespace braid {
namespace ib {
namespace {

#ifdef BRAID_HAVE_VERBS_H
#define SAME_SIZE(ours, theirs) static_assert(sizeof(ours) == sizeof(theirs), #ours)
#define SAME_OFFSET(ours, of, theirs, tf) \
  static_assert(offsetof(ours, of) == offsetof(theirs, tf), #ours "." #of)

SAME_SIZE(IbvPd, ibv_pd);
SAME_OFFSET(IbvPd, context, ibv_pd, context);
SAME_SIZE(IbvMr, ibv_mr);
SAME_OFFSET(IbvMr, lkey, ibv_mr, lkey);
SAME_OFFSET(IbvMr, rkey, ibv_mr, rkey);
SAME_OFFSET(IbvMr, addr, ibv_mr, addr);
SAME_SIZE(IbvQp, ibv_qp);
SAME_OFFSET(IbvQp, qpNum, ibv_qp, qp_num);
SAME_OFFSET(IbvQp, context, ibv_qp, context);
SAME_SIZE(IbvContext, ibv_context);
SAME_OFFSET(IbvContext, ops, ibv_context, ops);
static_assert(sizeof(IbvContext::ops) == sizeof(ibv_context_ops), "ops table size");
static_assert(offsetof(ibv_context_ops, poll_cq) == kOpsPollCq * sizeof(void*), "poll_cq slot");
static_assert(offsetof(ibv_context_ops, post_send) == kOpsPostSend * sizeof(void*), "post_send");
static_assert(offsetof(ibv_context_ops, post_recv) == kOpsPostRecv * sizeof(void*), "post_recv");
SAME_SIZE(IbvDeviceAttr, ibv_device_attr);
SAME_OFFSET(IbvDeviceAttr, maxQpWr, ibv_device_attr, max_qp_wr);
SAME_OFFSET(IbvDeviceAttr, physPortCnt, ibv_device_attr, phys_port_cnt);
static_assert(sizeof(IbvPortAttr) >= sizeof(ibv_port_attr), "port attr room");
SAME_OFFSET(IbvPortAttr, state, ibv_port_attr, state);
SAME_OFFSET(IbvPortAttr, activeMtu, ibv_port_attr, active_mtu);
SAME_OFFSET(IbvPortAttr, lid, ibv_port_attr, lid);
SAME_OFFSET(IbvPortAttr, linkLayer, ibv_port_attr, link_layer);
SAME_SIZE(IbvGid, ibv_gid);
SAME_OFFSET(IbvCq, context, ibv_cq, context);
SAME_SIZE(IbvQpInitAttr, ibv_qp_init_attr);
SAME_OFFSET(IbvQpInitAttr, cap, ibv_qp_init_attr, cap);
SAME_OFFSET(IbvQpInitAttr, qpType, ibv_qp_init_attr, qp_type);
SAME_OFFSET(IbvQpInitAttr, sqSigAll, ibv_qp_init_attr, sq_sig_all);
SAME_SIZE(IbvAhAttr, ibv_ah_attr);
SAME_OFFSET(IbvAhAttr, dlid, ibv_ah_attr, dlid);
SAME_OFFSET(IbvAhAttr, isGlobal, ibv_ah_attr, is_global);
SAME_OFFSET(IbvAhAttr, portNum, ibv_ah_attr, port_num);
SAME_OFFSET(IbvGlobalRoute, sgidIndex, ibv_global_route, sgid_index);
SAME_OFFSET(IbvGlobalRoute, hopLimit, ibv_global_route, hop_limit);
SAME_SIZE(IbvQpAttr, ibv_qp_attr);
SAME_OFFSET(IbvQpAttr, destQpNum, ibv_qp_attr, dest_qp_num);
SAME_OFFSET(IbvQpAttr, qpAccessFlags, ibv_qp_attr, qp_access_flags);
SAME_OFFSET(IbvQpAttr, ahAttr, ibv_qp_attr, ah_attr);
SAME_OFFSET(IbvQpAttr, maxRdAtomic, ibv_qp_attr, max_rd_atomic);
SAME_OFFSET(IbvQpAttr, maxDestRdAtomic, ibv_qp_attr, max_dest_rd_atomic);
SAME_OFFSET(IbvQpAttr, minRnrTimer, ibv_qp_attr, min_rnr_timer);
SAME_OFFSET(IbvQpAttr, portNum, ibv_qp_attr, port_num);
SAME_OFFSET(IbvQpAttr, timeout, ibv_qp_attr, timeout);
SAME_OFFSET(IbvQpAttr, retryCnt, ibv_qp_attr, retry_cnt);
SAME_OFFSET(IbvQpAttr, rnrRetry, ibv_qp_attr, rnr_retry);
SAME_OFFSET(IbvQpAttr, pathMtu, ibv_qp_attr, path_mtu);
SAME_OFFSET(IbvQpAttr, rqPsn, ibv_qp_attr, rq_psn);
SAME_OFFSET(IbvQpAttr, sqPsn, ibv_qp_attr, sq_psn);
SAME_SIZE(IbvSge, ibv_sge);
SAME_SIZE(IbvSendWr, ibv_send_wr);
SAME_OFFSET(IbvSendWr, opcode, ibv_send_wr, opcode);
SAME_OFFSET(IbvSendWr, sendFlags, ibv_send_wr, send_flags);
SAME_OFFSET(IbvSendWr, immData, ibv_send_wr, imm_data);
SAME_OFFSET(IbvSendWr, rdma.remoteAddr, ibv_send_wr, wr.rdma.remote_addr);
SAME_OFFSET(IbvSendWr, rdma.rkey, ibv_send_wr, wr.rdma.rkey);
SAME_SIZE(IbvRecvWr, ibv_recv_wr);
SAME_OFFSET(IbvRecvWr, numSge, ibv_recv_wr, num_sge);
SAME_OFFSET(IbvSendWr, sgList, ibv_send_wr, sg_list);
SAME_OFFSET(IbvSendWr, numSge, ibv_send_wr, num_sge);
SAME_OFFSET(IbvSge, lkey, ibv_sge, lkey);
SAME_OFFSET(IbvQp, sendCq, ibv_qp, send_cq);
SAME_OFFSET(IbvQp, recvCq, ibv_qp, recv_cq);
SAME_OFFSET(IbvQpInitAttr, sendCq, ibv_qp_init_attr, send_cq);
SAME_OFFSET(IbvQpInitAttr, recvCq, ibv_qp_init_attr, recv_cq);
SAME_OFFSET(IbvQpCap, maxInlineData, ibv_qp_cap, max_inline_data);
SAME_OFFSET(IbvWc, wrId, ibv_wc, wr_id);
SAME_OFFSET(IbvWc, vendorErr, ibv_wc, vendor_err);
SAME_OFFSET(IbvWc, wcFlags, ibv_wc, wc_flags);
SAME_OFFSET(IbvMr, length, ibv_mr, length);
SAME_SIZE(IbvWc, ibv_wc);
SAME_OFFSET(IbvWc, status, ibv_wc, status);
SAME_OFFSET(IbvWc, opcode, ibv_wc, opcode);
SAME_OFFSET(IbvWc, byteLen, ibv_wc, byte_len);
SAME_OFFSET(IbvWc, immData, ibv_wc, imm_data);
SAME_OFFSET(IbvWc, qpNum, ibv_wc, qp_num);

// Enums of different types: compare as integers.
#define SAME_VALUE(ours, theirs) \
  static_assert(static_cast<long long>(ours) == static_cast<long long>(theirs), #ours)
SAME_VALUE(kQpRc, IBV_QPT_RC);
SAME_VALUE(kQpsInit, IBV_QPS_INIT);
SAME_VALUE(kQpsRtr, IBV_QPS_RTR);
SAME_VALUE(kQpsRts, IBV_QPS_RTS);
SAME_VALUE(kQpsErr, IBV_QPS_ERR);
SAME_VALUE(kPortActive, IBV_PORT_ACTIVE);
SAME_VALUE(kLinkEthernet, IBV_LINK_LAYER_ETHERNET);
SAME_VALUE(kLinkInfiniBand, IBV_LINK_LAYER_INFINIBAND);
SAME_VALUE(kMtu1024, IBV_MTU_1024);
SAME_VALUE(kMtu4096, IBV_MTU_4096);
SAME_VALUE(kAccessRemoteWrite, IBV_ACCESS_REMOTE_WRITE);
SAME_VALUE(kAccessLocalWrite, IBV_ACCESS_LOCAL_WRITE);
SAME_VALUE(kAccessRemoteRead, IBV_ACCESS_REMOTE_READ);
SAME_VALUE(kQpState, IBV_QP_STATE);
SAME_VALUE(kQpAccessFlags, IBV_QP_ACCESS_FLAGS);
SAME_VALUE(kQpPkeyIndex, IBV_QP_PKEY_INDEX);
SAME_VALUE(kQpPort, IBV_QP_PORT);
SAME_VALUE(kQpAv, IBV_QP_AV);
SAME_VALUE(kQpPathMtu, IBV_QP_PATH_MTU);
SAME_VALUE(kQpTimeout, IBV_QP_TIMEOUT);
SAME_VALUE(kQpRetryCnt, IBV_QP_RETRY_CNT);
SAME_VALUE(kQpRnrRetry, IBV_QP_RNR_RETRY);
SAME_VALUE(kQpRqPsn, IBV_QP_RQ_PSN);
SAME_VALUE(kQpMaxQpRdAtomic, IBV_QP_MAX_QP_RD_ATOMIC);
SAME_VALUE(kQpMinRnrTimer, IBV_QP_MIN_RNR_TIMER);
SAME_VALUE(kQpSqPsn, IBV_QP_SQ_PSN);
SAME_VALUE(kQpMaxDestRdAtomic, IBV_QP_MAX_DEST_RD_ATOMIC);
SAME_VALUE(kQpDestQpn, IBV_QP_DEST_QPN);
SAME_VALUE(kWrRdmaWrite, IBV_WR_RDMA_WRITE);
SAME_VALUE(kWrRdmaWriteWithImm, IBV_WR_RDMA_WRITE_WITH_IMM);
SAME_VALUE(kWrSend, IBV_WR_SEND);
SAME_VALUE(kSendSignaled, IBV_SEND_SIGNALED);
SAME_VALUE(kSendInline, IBV_SEND_INLINE);
SAME_VALUE(kWcSuccess, IBV_WC_SUCCESS);
SAME_VALUE(kWcSend, IBV_WC_SEND);
SAME_VALUE(kWcRdmaWrite, IBV_WC_RDMA_WRITE);
SAME_VALUE(kWcRecvRdmaWithImm, IBV_WC_RECV_RDMA_WITH_IMM);
SAME_VALUE(kWcWithImm, IBV_WC_WITH_IMM);
SAME_VALUE(kWcLocLenErr, IBV_WC_LOC_LEN_ERR);
SAME_VALUE(kWcLocQpOpErr, IBV_WC_LOC_QP_OP_ERR);
SAME_VALUE(kWcLocProtErr, IBV_WC_LOC_PROT_ERR);
SAME_VALUE(kWcWrFlushErr, IBV_WC_WR_FLUSH_ERR);
SAME_VALUE(kWcLocAccessErr, IBV_WC_LOC_ACCESS_ERR);
SAME_VALUE(kWcRemInvReqErr, IBV_WC_REM_INV_REQ_ERR);
SAME_VALUE(kWcRemAccessErr, IBV_WC_REM_ACCESS_ERR);
SAME_VALUE(kWcRemOpErr, IBV_WC_REM_OP_ERR);
SAME_VALUE(kWcRetryExcErr, IBV_WC_RETRY_EXC_ERR);
SAME_VALUE(kWcRnrRetryExcErr, IBV_WC_RNR_RETRY_EXC_ERR);
SAME_VALUE(kWcRemAbortErr, IBV_WC_REM_ABORT_ERR);
SAME_VALUE(kWcFatalErr, IBV_WC_FATAL_ERR);
SAME_VALUE(kWcRespTimeoutErr, IBV_WC_RESP_TIMEOUT_ERR);
SAME_VALUE(kWcGeneralErr, IBV_WC_GENERAL_ERR);
SAME_VALUE(kWcStatusCount, IBV_WC_TM_RNDV_INCOMPLETE + 1);
SAME_VALUE(kSendFence, IBV_SEND_FENCE);
SAME_VALUE(kQpsReset, IBV_QPS_RESET);
SAME_VALUE(kPortDown, IBV_PORT_DOWN);

TEST(IbAbi, LayoutsMatchRdmaCoreHeader) { SUCCEED() << "checked at compile time"; }
#else
TEST(IbAbi, LayoutsMatchRdmaCoreHeader) { GTEST_SKIP() << "<infiniband/verbs.h> not installed"; }
#endif

}  // namespace
}  // namespace ib
}  // namespace braid
