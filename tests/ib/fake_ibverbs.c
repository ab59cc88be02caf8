/* A stand-in for libibverbs.so.1 exporting the entry points braid resolves, so
   the loader, device list and owning wrappers run without rdma-core or a
   device. Objects are counted so tests can see that every one is destroyed.
   Built twice: with FAKE_IBV_PARTIAL one symbol is left out. */
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
void* ibv_open_device(void* dev) { return make(512); }
int ibv_close_device(void* ctx) { return destroy(ctx); }
int ibv_query_device(void* ctx, void* attr) { return 0; }
int ibv_query_port(void* ctx, unsigned char port, void* attr) { return 0; }
int ibv_query_gid(void* ctx, unsigned char port, int index, void* gid) { return 0; }
void* ibv_alloc_pd(void* ctx) { return make(64); }
int ibv_dealloc_pd(void* pd) { return destroy(pd); }
void* ibv_reg_mr(void* pd, void* addr, size_t len, int access) { return len ? make(64) : NULL; }
int ibv_dereg_mr(void* mr) { return destroy(mr); }
void* ibv_create_cq(void* ctx, int cqe, void* c, void* ch, int v) { return make(64); }
int ibv_destroy_cq(void* cq) { return destroy(cq); }
void* ibv_create_qp(void* pd, void* attr) { return make(256); }
int ibv_destroy_qp(void* qp) { return destroy(qp); }
#ifndef FAKE_IBV_PARTIAL
/* Records the target state (the first int of the attributes) of each call, and
   fails (EINVAL) the transition to g_fail_state. */
static int g_states[16];
static int g_nstates;
static int g_fail_state = -1;
int ibv_modify_qp(void* qp, void* attr, int mask) {
  const int state = *(const int*)attr;
  if (g_nstates < 16) g_states[g_nstates++] = state;
  return state == g_fail_state ? 22 : 0;
}
int fake_ibv_take_states(int* out, int max) {
  const int n = g_nstates < max ? g_nstates : max;
  memcpy(out, g_states, (size_t)n * sizeof(int));
  g_nstates = 0;
  return n;
}
void fake_ibv_fail_state(int state) { g_fail_state = state; }
#endif
