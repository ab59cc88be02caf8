/* A stand-in for libibverbs.so.1 exporting the entry points braid resolves, so
   the loader, device list, owning wrappers and the RC data path run without
   rdma-core or a device. Objects are counted so tests can see that every one is
   destroyed. Built twice: with FAKE_IBV_PARTIAL one symbol is left out.

   The data path is simulated inside one process (one address space): queue
   pairs are found by number, so two of them connect when each is moved to RTR
   with the other's number. ibv_post_send executes each work request at once:
   RDMA writes copy the bytes to the target address after checking the lkey and
   rkey against registered regions (and their protection domain, bounds and
   access), as an HCA would; a write with immediate consumes a receive posted on
   the target and completes it on the target's receive CQ. Failures become
   error completions and move the queue pair to the error state, flushing what
   follows, as on hardware. Single-threaded: the tests drive both ends from one
   thread.

   The structures below mirror the leading fields of rdma-core's public ones
   (the layouts braid declares in transports/ib/ib_verbs_abi.h); fields after
   those are the fake's own. */
#include <arpa/inet.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int g_live;
static const char* g_names[] = {"mlx5_0", "mlx5_1"};

int fake_ibv_live_objects(void) { return g_live; }

static void* make(size_t n) {
  ++g_live;
  return calloc(1, n);
}
static int destroy(void* p) {
  if (!p) return -1;
  --g_live;
  free(p);
  return 0;
}

/* ---- mirrored layouts ---------------------------------------------------- */

enum { OPS_POLL_CQ = 11, OPS_POST_SEND = 25, OPS_POST_RECV = 26, OPS_SLOTS = 32 };
enum { QPS_RESET = 0, QPS_INIT = 1, QPS_RTR = 2, QPS_RTS = 3, QPS_ERR = 6 };
enum { WR_RDMA_WRITE = 0, WR_RDMA_WRITE_WITH_IMM = 1 };
enum { SEND_SIGNALED = 2, SEND_INLINE = 8 };
enum { ACCESS_LOCAL_WRITE = 1, ACCESS_REMOTE_WRITE = 2 };
enum { QP_STATE_MASK = 1 << 0, QP_DEST_QPN_MASK = 1 << 20 };
enum {
  WC_SUCCESS = 0,
  WC_LOC_PROT_ERR = 4,
  WC_WR_FLUSH_ERR = 5,
  WC_REM_ACCESS_ERR = 10,
  WC_RETRY_EXC_ERR = 12,
  WC_RNR_RETRY_EXC_ERR = 13
};
enum { WC_OP_RDMA_WRITE = 1, WC_OP_RECV_RDMA_WITH_IMM = 129, WC_WITH_IMM = 2 };

struct fake_context {
  void* device;
  void* ops[OPS_SLOTS];
  int cmd_fd, async_fd, num_comp_vectors;
  pthread_mutex_t mutex;
  void* abi_compat;
};

struct fake_pd {
  struct fake_context* context;
  uint32_t handle;
  int users; /* MRs and QPs on it: deallocation fails (EBUSY) while any remain */
  struct fake_pd* next;
};

struct fake_mr {
  struct fake_context* context;
  struct fake_pd* pd;
  void* addr;
  size_t length;
  uint32_t handle, lkey, rkey;
  /* fake's own */
  int access;
  struct fake_mr* next;
};

struct fake_wc {
  uint64_t wr_id;
  int status, opcode;
  uint32_t vendor_err, byte_len, imm_data, qp_num, src_qp;
  unsigned wc_flags;
  uint16_t pkey_index, slid;
  uint8_t sl, dlid_path_bits;
};

struct fake_cq {
  struct fake_context* context;
  /* fake's own */
  int capacity, head, count, overflowed, users;
  struct fake_cq* next;
  struct fake_entry {
    struct fake_wc wc;
    uint64_t sq_index; /* send completions: the send-queue position they retire */
  } * entries;
};

struct fake_cap {
  uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data;
};

struct fake_qp_init_attr {
  void* qp_context;
  struct fake_cq* send_cq;
  struct fake_cq* recv_cq;
  void* srq;
  struct fake_cap cap;
  int qp_type, sq_sig_all;
};

struct fake_qp_attr { /* leading fields of ibv_qp_attr */
  int qp_state, cur_qp_state, path_mtu, path_mig_state;
  uint32_t qkey, rq_psn, sq_psn, dest_qp_num;
};

struct fake_qp {
  struct fake_context* context;
  void* qp_context;
  struct fake_pd* pd;
  struct fake_cq* send_cq;
  struct fake_cq* recv_cq;
  void* srq;
  uint32_t handle, qp_num;
  int state, qp_type;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  uint32_t events_completed;
  /* fake's own */
  struct fake_cap cap;
  int sq_sig_all;
  uint32_t dest_qpn;
  uint64_t sq_posted, sq_retired; /* occupancy: posted - retired <= max_send_wr */
  uint64_t* recvs;                /* ring of posted receive wr_ids */
  uint32_t recv_head, recv_count;
  struct fake_qp* next;
};

struct fake_sge {
  uint64_t addr;
  uint32_t length, lkey;
};

struct fake_send_wr {
  uint64_t wr_id;
  struct fake_send_wr* next;
  struct fake_sge* sg_list;
  int num_sge, opcode;
  unsigned send_flags;
  uint32_t imm_data;
  struct {
    uint64_t remote_addr;
    uint32_t rkey;
  } rdma;
};

struct fake_recv_wr {
  uint64_t wr_id;
  struct fake_recv_wr* next;
  struct fake_sge* sg_list;
  int num_sge;
};

struct fake_port_attr { /* leading fields of ibv_port_attr */
  int state, max_mtu, active_mtu, gid_tbl_len;
  uint32_t port_cap_flags, max_msg_sz, bad_pkey_cntr, qkey_viol_cntr;
  uint16_t pkey_tbl_len, lid, sm_lid;
  uint8_t lmc, max_vl_num, sm_sl, subnet_timeout, init_type_reply, active_width, active_speed,
      phys_state, link_layer;
};

/* ---- registries and knobs ------------------------------------------------ */

static struct fake_pd* g_pds;
static struct fake_mr* g_mrs;
static struct fake_cq* g_cqs;
static struct fake_qp* g_qps;
static uint32_t g_next_qpn = 0x100;
static uint32_t g_next_key = 1;
static int g_inject_status;    /* non-zero: the next send WR completes with it */
static int g_inject_after = -1; /* ... after this many more successful send WRs */
static uint64_t g_bytes_written;

/* The next send work request, after `after` more that succeed, completes with
   `status` (an ibv_wc_status) and its QP goes to the error state. */
void fake_ibv_inject_send_error(int status, int after) {
  g_inject_status = status;
  g_inject_after = after;
}
uint64_t fake_ibv_bytes_written(void) { return g_bytes_written; }
int fake_ibv_live_qps(void) {
  int n = 0;
  for (struct fake_qp* q = g_qps; q; q = q->next) ++n;
  return n;
}
int fake_ibv_live_mrs(void) {
  int n = 0;
  for (struct fake_mr* m = g_mrs; m; m = m->next) ++n;
  return n;
}

#define UNLINK(head, type, p)                                   \
  do {                                                          \
    for (type** it = &(head); *it; it = &(*it)->next)           \
      if (*it == (p)) {                                         \
        *it = (p)->next;                                        \
        break;                                                  \
      }                                                         \
  } while (0)

static int known_pd(struct fake_pd* pd) {
  for (struct fake_pd* p = g_pds; p; p = p->next)
    if (p == pd) return 1;
  return 0;
}
static int known_cq(struct fake_cq* cq) {
  for (struct fake_cq* c = g_cqs; c; c = c->next)
    if (c == cq) return 1;
  return 0;
}
static struct fake_qp* known_qp(void* qp) {
  for (struct fake_qp* q = g_qps; q; q = q->next)
    if (q == qp) return q;
  return NULL;
}
static struct fake_qp* qp_by_number(uint32_t qpn) {
  for (struct fake_qp* q = g_qps; q; q = q->next)
    if (q->qp_num == qpn) return q;
  return NULL;
}

/* The region `key` names (lkey or rkey) covering [addr, addr + len) in `pd`
   with `access`, or NULL. */
static struct fake_mr* find_mr(int remote, uint32_t key, uint64_t addr, uint64_t len,
                               struct fake_pd* pd, int access) {
  for (struct fake_mr* m = g_mrs; m; m = m->next) {
    if ((remote ? m->rkey : m->lkey) != key) continue;
    const uint64_t b = (uint64_t)(uintptr_t)m->addr;
    if (m->pd != pd || (m->access & access) != access) return NULL;
    if (addr < b || len > m->length || addr - b > m->length - len) return NULL;
    return m;
  }
  return NULL;
}

/* ---- device, context, PD, MR -------------------------------------------- */

/* Devices are just their names. */
void** ibv_get_device_list(int* num) {
  void** list = make(3 * sizeof(void*));
  list[0] = (void*)g_names[0];
  list[1] = (void*)g_names[1];
  if (num) *num = 2;
  return list;
}
void ibv_free_device_list(void** list) { destroy(list); }
const char* ibv_get_device_name(void* dev) { return (const char*)dev; }

static int fake_poll_cq(struct fake_cq* cq, int n, struct fake_wc* wc);
static int fake_post_send(struct fake_qp* qp, struct fake_send_wr* wr, struct fake_send_wr** bad);
static int fake_post_recv(struct fake_qp* qp, struct fake_recv_wr* wr, struct fake_recv_wr** bad);

void* ibv_open_device(void* dev) {
  struct fake_context* ctx = make(sizeof(struct fake_context));
  ctx->device = dev;
  ctx->ops[OPS_POLL_CQ] = (void*)fake_poll_cq;
  ctx->ops[OPS_POST_SEND] = (void*)fake_post_send;
  ctx->ops[OPS_POST_RECV] = (void*)fake_post_recv;
  return ctx;
}
int ibv_close_device(void* ctx) { return destroy(ctx); }
int ibv_query_device(void* ctx, void* attr) { return 0; }

/* Every port: active InfiniBand, MTU 2048, LID 7. */
int ibv_query_port(void* ctx, unsigned char port, void* attr) {
  struct fake_port_attr* a = attr;
  memset(a, 0, sizeof(*a));
  a->state = 4;
  a->max_mtu = 5;
  a->active_mtu = 4;
  a->lid = 7;
  a->link_layer = 1;
  return 0;
}
int ibv_query_gid(void* ctx, unsigned char port, int index, void* gid) {
  memset(gid, 0, 16);
  ((unsigned char*)gid)[15] = (unsigned char)(index + 1);
  return 0;
}

void* ibv_alloc_pd(void* ctx) {
  struct fake_pd* pd = make(sizeof(struct fake_pd));
  pd->context = ctx;
  pd->next = g_pds;
  g_pds = pd;
  return pd;
}
int ibv_dealloc_pd(void* p) {
  struct fake_pd* pd = p;
  if (known_pd(pd)) {
    if (pd->users) return 16; /* EBUSY */
    UNLINK(g_pds, struct fake_pd, pd);
  }
  return destroy(pd);
}

/* The PD may be a dummy pointer (registration-cache tests): it is only
   dereferenced when it came from ibv_alloc_pd. */
void* ibv_reg_mr(void* p, void* addr, size_t len, int access) {
  if (!len) return NULL;
  struct fake_pd* pd = p;
  struct fake_mr* mr = make(sizeof(struct fake_mr));
  if (known_pd(pd)) {
    mr->context = pd->context;
    ++pd->users;
  }
  mr->pd = pd;
  mr->addr = addr;
  mr->length = len;
  mr->access = access;
  /* Distinct lkey and rkey, so that a caller mixing them up is caught. */
  mr->lkey = 0x1000 + g_next_key;
  mr->rkey = 0x80000 + g_next_key;
  ++g_next_key;
  mr->next = g_mrs;
  g_mrs = mr;
  return mr;
}
int ibv_dereg_mr(void* p) {
  struct fake_mr* mr = p;
  UNLINK(g_mrs, struct fake_mr, mr);
  if (mr && known_pd(mr->pd)) --mr->pd->users;
  return destroy(mr);
}

/* ---- completion queues -------------------------------------------------- */

void* ibv_create_cq(void* ctx, int cqe, void* c, void* ch, int v) {
  struct fake_cq* cq = make(sizeof(struct fake_cq));
  cq->context = ctx;
  cq->capacity = cqe > 0 ? cqe : 1;
  cq->entries = calloc((size_t)cq->capacity, sizeof(struct fake_entry));
  cq->next = g_cqs;
  g_cqs = cq;
  return cq;
}
int ibv_destroy_cq(void* p) {
  struct fake_cq* cq = p;
  if (known_cq(cq)) {
    if (cq->users) return 16; /* EBUSY: a QP still uses it */
    UNLINK(g_cqs, struct fake_cq, cq);
    free(cq->entries);
  }
  return destroy(cq);
}

/* A full CQ overruns, as on hardware: the fake then fails every poll. */
static void push_wc(struct fake_cq* cq, const struct fake_wc* wc, uint64_t sq_index) {
  if (!cq) return;
  if (cq->count == cq->capacity) {
    cq->overflowed = 1;
    return;
  }
  struct fake_entry* e = &cq->entries[(cq->head + cq->count) % cq->capacity];
  e->wc = *wc;
  e->sq_index = sq_index;
  ++cq->count;
}

static int fake_poll_cq(struct fake_cq* cq, int n, struct fake_wc* wc) {
  if (cq->overflowed) return -1;
  int got = 0;
  while (got < n && cq->count > 0) {
    struct fake_entry* e = &cq->entries[cq->head];
    wc[got++] = e->wc;
    cq->head = (cq->head + 1) % cq->capacity;
    --cq->count;
    /* A polled send completion frees its send-queue slot and every earlier one. */
    if (e->wc.opcode != WC_OP_RECV_RDMA_WITH_IMM) {
      struct fake_qp* q = qp_by_number(e->wc.qp_num);
      if (q && e->sq_index > q->sq_retired) q->sq_retired = e->sq_index;
    }
  }
  return got;
}

/* ---- queue pairs -------------------------------------------------------- */

void* ibv_create_qp(void* p, void* a) {
  struct fake_pd* pd = p;
  struct fake_qp_init_attr* attr = a;
  struct fake_qp* qp = make(sizeof(struct fake_qp));
  qp->pd = pd;
  qp->qp_num = g_next_qpn++;
  if (known_pd(pd)) {
    qp->context = pd->context;
    ++pd->users;
  }
  if (attr) {
    qp->send_cq = known_cq(attr->send_cq) ? attr->send_cq : NULL;
    qp->recv_cq = known_cq(attr->recv_cq) ? attr->recv_cq : NULL;
    qp->cap = attr->cap;
    qp->qp_type = attr->qp_type;
    qp->sq_sig_all = attr->sq_sig_all;
  }
  if (qp->send_cq) ++qp->send_cq->users;
  if (qp->recv_cq) ++qp->recv_cq->users;
  qp->recvs = calloc(qp->cap.max_recv_wr ? qp->cap.max_recv_wr : 1, sizeof(uint64_t));
  qp->next = g_qps;
  g_qps = qp;
  return qp;
}
int ibv_destroy_qp(void* p) {
  struct fake_qp* qp = known_qp(p);
  if (qp) {
    UNLINK(g_qps, struct fake_qp, qp);
    if (qp->send_cq) --qp->send_cq->users;
    if (qp->recv_cq) --qp->recv_cq->users;
    if (known_pd(qp->pd)) --qp->pd->users;
    free(qp->recvs);
  }
  return destroy(p);
}

/* Every receive still posted completes with a flush error. */
static void flush_recvs(struct fake_qp* qp) {
  while (qp->recv_count > 0) {
    struct fake_wc wc;
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = qp->recvs[qp->recv_head];
    wc.status = WC_WR_FLUSH_ERR;
    wc.opcode = WC_OP_RECV_RDMA_WITH_IMM;
    wc.qp_num = qp->qp_num;
    push_wc(qp->recv_cq, &wc, 0);
    qp->recv_head = (qp->recv_head + 1) % qp->cap.max_recv_wr;
    --qp->recv_count;
  }
}
static void enter_error(struct fake_qp* qp) {
  qp->state = QPS_ERR;
  flush_recvs(qp);
}

#ifndef FAKE_IBV_PARTIAL
/* Records the target state (the first int of the attributes) of each call, and
   fails (EINVAL) the transition to g_fail_state. A QP the fake made also takes
   the state, and at RTR the remote QP number it will write to. */
static int g_states[16];
static int g_nstates;
static int g_fail_state = -1;
int ibv_modify_qp(void* p, void* a, int mask) {
  const struct fake_qp_attr* attr = a;
  const int state = attr->qp_state;
  if (g_nstates < 16) g_states[g_nstates++] = state;
  if (state == g_fail_state) return 22;
  struct fake_qp* qp = known_qp(p);
  if (qp && (mask & QP_STATE_MASK)) {
    if (mask & QP_DEST_QPN_MASK) qp->dest_qpn = attr->dest_qp_num;
    qp->state = state;
    if (state == QPS_ERR) flush_recvs(qp);
  }
  return 0;
}
int fake_ibv_take_states(int* out, int max) {
  const int n = g_nstates < max ? g_nstates : max;
  memcpy(out, g_states, (size_t)n * sizeof(int));
  g_nstates = 0;
  return n;
}
void fake_ibv_fail_state(int state) { g_fail_state = state; }
#endif

static int fake_post_recv(struct fake_qp* qp, struct fake_recv_wr* wr, struct fake_recv_wr** bad) {
  for (; wr; wr = wr->next) {
    if (qp->state == QPS_RESET || qp->recv_count == qp->cap.max_recv_wr) {
      if (bad) *bad = wr;
      return qp->state == QPS_RESET ? 22 : 12; /* EINVAL, ENOMEM */
    }
    qp->recvs[(qp->recv_head + qp->recv_count) % qp->cap.max_recv_wr] = wr->wr_id;
    ++qp->recv_count;
    if (qp->state == QPS_ERR) flush_recvs(qp);
  }
  return 0;
}

/* Bytes of `wr`'s scatter list, copied into `buf` (NULL: only checked).
   Returns the status the local side of the transfer gets. */
static int gather(struct fake_qp* qp, const struct fake_send_wr* wr, unsigned char* buf,
                  uint64_t* total) {
  *total = 0;
  for (int i = 0; i < wr->num_sge; ++i) {
    const struct fake_sge* s = &wr->sg_list[i];
    if (!(wr->send_flags & SEND_INLINE) && s->length > 0 &&
        !find_mr(0, s->lkey, s->addr, s->length, qp->pd, 0))
      return WC_LOC_PROT_ERR;
    if (buf) memcpy(buf + *total, (const void*)(uintptr_t)s->addr, s->length);
    *total += s->length;
  }
  return WC_SUCCESS;
}

/* Executes one RDMA write; returns its completion status. */
static int execute_write(struct fake_qp* qp, const struct fake_send_wr* wr) {
  if (g_inject_status && g_inject_after == 0) {
    const int s = g_inject_status;
    g_inject_status = 0;
    g_inject_after = -1;
    return s;
  }
  uint64_t len = 0;
  int status = gather(qp, wr, NULL, &len);
  if (status != WC_SUCCESS) return status;
  if ((wr->send_flags & SEND_INLINE) && len > qp->cap.max_inline_data) return WC_LOC_PROT_ERR;
  struct fake_qp* dest = qp_by_number(qp->dest_qpn);
  /* No responder (never connected, destroyed, not ready): no acknowledgement. */
  if (!dest || dest->dest_qpn != qp->qp_num || (dest->state != QPS_RTR && dest->state != QPS_RTS))
    return WC_RETRY_EXC_ERR;
  const int imm = wr->opcode == WR_RDMA_WRITE_WITH_IMM;
  if (len > 0 && !find_mr(1, wr->rdma.rkey, wr->rdma.remote_addr, len, dest->pd,
                          ACCESS_REMOTE_WRITE)) {
    enter_error(dest); /* the responder's QP fails too */
    return WC_REM_ACCESS_ERR;
  }
  if (imm && dest->recv_count == 0) return WC_RNR_RETRY_EXC_ERR; /* no receive posted */
  if (len > 0) {
    unsigned char* tmp = malloc(len);
    gather(qp, wr, tmp, &len);
    memcpy((void*)(uintptr_t)wr->rdma.remote_addr, tmp, len);
    free(tmp);
    g_bytes_written += len;
  }
  if (imm) {
    struct fake_wc wc;
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = dest->recvs[dest->recv_head];
    dest->recv_head = (dest->recv_head + 1) % dest->cap.max_recv_wr;
    --dest->recv_count;
    wc.status = WC_SUCCESS;
    wc.opcode = WC_OP_RECV_RDMA_WITH_IMM;
    wc.byte_len = (uint32_t)len;
    wc.imm_data = wr->imm_data;
    wc.qp_num = dest->qp_num;
    wc.src_qp = qp->qp_num;
    wc.wc_flags = WC_WITH_IMM;
    push_wc(dest->recv_cq, &wc, 0);
  }
  if (g_inject_status && g_inject_after > 0) --g_inject_after;
  return WC_SUCCESS;
}

static int fake_post_send(struct fake_qp* qp, struct fake_send_wr* wr, struct fake_send_wr** bad) {
  for (; wr; wr = wr->next) {
    int einval = qp->state != QPS_RTS && qp->state != QPS_ERR;
    einval |= wr->opcode != WR_RDMA_WRITE && wr->opcode != WR_RDMA_WRITE_WITH_IMM;
    einval |= wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge;
    if (einval || qp->sq_posted - qp->sq_retired >= qp->cap.max_send_wr) {
      if (bad) *bad = wr;
      return einval ? 22 : 12; /* EINVAL, ENOMEM (send queue full) */
    }
    ++qp->sq_posted;
    const int status = qp->state == QPS_ERR ? WC_WR_FLUSH_ERR : execute_write(qp, wr);
    if (status != WC_SUCCESS) qp->state = QPS_ERR;
    if (status != WC_SUCCESS || qp->sq_sig_all || (wr->send_flags & SEND_SIGNALED)) {
      struct fake_wc wc;
      memset(&wc, 0, sizeof(wc));
      wc.wr_id = wr->wr_id;
      wc.status = status;
      wc.opcode = WC_OP_RDMA_WRITE;
      wc.vendor_err = status ? 0x99 : 0;
      wc.qp_num = qp->qp_num;
      push_wc(qp->send_cq, &wc, qp->sq_posted);
    }
  }
  return 0;
}
