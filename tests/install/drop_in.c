/* A plain NCCL program, as a user would write it: it includes only nccl.h
 * and links libnccl.so.2. tests/install/run.sh builds it against braid's
 * installed header and against NVIDIA's, and runs it on braid.
 *
 * usage: drop_in NRANKS
 * The parent makes the unique id and forks NRANKS ranks; each runs the
 * collectives on float and int32 host buffers (NULL stream) and checks every
 * element. Exit status 0 when every rank passed. The parent first prints the
 * NCCL libraries mapped into the process ("loaded: PATH") so the script can
 * tell which library ran. */
#define _POSIX_C_SOURCE 200809L

#include <nccl.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define COUNT 1031 /* odd, so chunks do not divide it evenly */
#define TIMEOUT_SECONDS 120

static int g_rank = -1;
static int g_failures = 0;

#define NCCL_OK(call)                                                                   \
  do {                                                                                  \
    ncclResult_t r_ = (call);                                                           \
    if (r_ != ncclSuccess) {                                                            \
      fprintf(stderr, "rank %d: %s:%d: %s failed: %s (%s)\n", g_rank, __FILE__, __LINE__, \
              #call, ncclGetErrorString(r_), ncclGetLastError(NULL));                   \
      _exit(2);                                                                         \
    }                                                                                   \
  } while (0)

/* Small integers: every sum below is exact in float. */
static int value(int rank, size_t i) { return rank * 100 + (int)(i % 89); }

static void expectF(const char* what, const float* got, size_t i, float want) {
  if (got[i] != want && g_failures++ < 10)
    fprintf(stderr, "rank %d: %s: element %zu is %g, want %g\n", g_rank, what, i, got[i], want);
}

static void expectI(const char* what, const int* got, size_t i, int want) {
  if (got[i] != want && g_failures++ < 10)
    fprintf(stderr, "rank %d: %s: element %zu is %d, want %d\n", g_rank, what, i, got[i], want);
}

static void* xcalloc(size_t n, size_t size) {
  void* p = calloc(n ? n : 1, size);
  if (!p) {
    fprintf(stderr, "rank %d: out of memory\n", g_rank);
    _exit(2);
  }
  return p;
}

static void runRank(int rank, int nranks, ncclUniqueId id) {
  ncclComm_t comm;
  const size_t n = (size_t)nranks;
  const int root = nranks - 1;
  size_t i;
  int r, version = 0;
  float *fs = xcalloc(n * COUNT, sizeof(float)), *fr = xcalloc(n * COUNT, sizeof(float));
  int *is = xcalloc(n * COUNT, sizeof(int)), *ir = xcalloc(n * COUNT, sizeof(int));
  g_rank = rank;

  NCCL_OK(ncclGetVersion(&version));
  NCCL_OK(ncclCommInitRank(&comm, nranks, id, rank));
  for (i = 0; i < n * COUNT; ++i) {
    fs[i] = (float)value(rank, i);
    is[i] = value(rank, i);
  }

  /* AllReduce: sum (float), max (int32) */
  NCCL_OK(ncclAllReduce(fs, fr, COUNT, ncclFloat, ncclSum, comm, NULL));
  NCCL_OK(ncclAllReduce(is, ir, COUNT, ncclInt32, ncclMax, comm, NULL));
  for (i = 0; i < COUNT; ++i) {
    float sum = 0;
    for (r = 0; r < nranks; ++r) sum += (float)value(r, i);
    expectF("AllReduce(float, sum)", fr, i, sum);
    expectI("AllReduce(int32, max)", ir, i, value(nranks - 1, i));
  }

  /* AllGather */
  NCCL_OK(ncclAllGather(fs, fr, COUNT, ncclFloat, comm, NULL));
  NCCL_OK(ncclAllGather(is, ir, COUNT, ncclInt32, comm, NULL));
  for (r = 0; r < nranks; ++r)
    for (i = 0; i < COUNT; ++i) {
      expectF("AllGather(float)", fr, r * COUNT + i, (float)value(r, i));
      expectI("AllGather(int32)", ir, r * COUNT + i, value(r, i));
    }

  /* ReduceScatter: rank gets the reduction of block `rank` of everyone's send buffer */
  NCCL_OK(ncclReduceScatter(fs, fr, COUNT, ncclFloat, ncclSum, comm, NULL));
  NCCL_OK(ncclReduceScatter(is, ir, COUNT, ncclInt32, ncclMin, comm, NULL));
  for (i = 0; i < COUNT; ++i) {
    float sum = 0;
    for (r = 0; r < nranks; ++r) sum += (float)value(r, rank * COUNT + i);
    expectF("ReduceScatter(float, sum)", fr, i, sum);
    expectI("ReduceScatter(int32, min)", ir, i, value(0, rank * COUNT + i));
  }

  /* Broadcast from the last rank */
  NCCL_OK(ncclBroadcast(fs, fr, COUNT, ncclFloat, root, comm, NULL));
  NCCL_OK(ncclBroadcast(is, ir, COUNT, ncclInt32, root, comm, NULL));
  for (i = 0; i < COUNT; ++i) {
    expectF("Broadcast(float)", fr, i, (float)value(root, i));
    expectI("Broadcast(int32)", ir, i, value(root, i));
  }

  /* Reduce to rank 0 */
  memset(fr, 0, n * COUNT * sizeof(float));
  memset(ir, 0, n * COUNT * sizeof(int));
  NCCL_OK(ncclReduce(fs, fr, COUNT, ncclFloat, ncclSum, 0, comm, NULL));
  NCCL_OK(ncclReduce(is, ir, COUNT, ncclInt32, ncclSum, 0, comm, NULL));
  if (rank == 0)
    for (i = 0; i < COUNT; ++i) {
      int sum = 0;
      for (r = 0; r < nranks; ++r) sum += value(r, i);
      expectF("Reduce(float, sum)", fr, i, (float)sum);
      expectI("Reduce(int32, sum)", ir, i, sum);
    }

  /* AlltoAll: block j of my receive buffer is block `rank` of rank j's send buffer */
  NCCL_OK(ncclAlltoAll(fs, fr, COUNT, ncclFloat, comm, NULL));
  NCCL_OK(ncclAlltoAll(is, ir, COUNT, ncclInt32, comm, NULL));
  for (r = 0; r < nranks; ++r)
    for (i = 0; i < COUNT; ++i) {
      expectF("AlltoAll(float)", fr, r * COUNT + i, (float)value(r, rank * COUNT + i));
      expectI("AlltoAll(int32)", ir, r * COUNT + i, value(r, rank * COUNT + i));
    }

  /* Gather to the last rank, Scatter from rank 0 */
  NCCL_OK(ncclGather(fs, fr, COUNT, ncclFloat, root, comm, NULL));
  NCCL_OK(ncclGather(is, ir, COUNT, ncclInt32, root, comm, NULL));
  if (rank == root)
    for (r = 0; r < nranks; ++r)
      for (i = 0; i < COUNT; ++i) {
        expectF("Gather(float)", fr, r * COUNT + i, (float)value(r, i));
        expectI("Gather(int32)", ir, r * COUNT + i, value(r, i));
      }
  NCCL_OK(ncclScatter(fs, fr, COUNT, ncclFloat, 0, comm, NULL));
  NCCL_OK(ncclScatter(is, ir, COUNT, ncclInt32, 0, comm, NULL));
  for (i = 0; i < COUNT; ++i) {
    expectF("Scatter(float)", fr, i, (float)value(0, rank * COUNT + i));
    expectI("Scatter(int32)", ir, i, value(0, rank * COUNT + i));
  }

  /* Send/Recv around the ring, in one group */
  {
    const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(fs, COUNT, ncclFloat, next, comm, NULL));
    NCCL_OK(ncclRecv(fr, COUNT, ncclFloat, prev, comm, NULL));
    NCCL_OK(ncclSend(is, COUNT, ncclInt32, next, comm, NULL));
    NCCL_OK(ncclRecv(ir, COUNT, ncclInt32, prev, comm, NULL));
    NCCL_OK(ncclGroupEnd());
    for (i = 0; i < COUNT; ++i) {
      expectF("Recv(float) from the previous rank", fr, i, (float)value(prev, i));
      expectI("Recv(int32) from the previous rank", ir, i, value(prev, i));
    }
  }

  NCCL_OK(ncclCommFinalize(comm));
  NCCL_OK(ncclCommDestroy(comm));
  free(fs);
  free(fr);
  free(is);
  free(ir);
  if (g_failures) fprintf(stderr, "rank %d: %d wrong elements\n", rank, g_failures);
  else if (rank == 0) printf("rank 0: all collectives correct on %d ranks (NCCL version %d)\n", nranks, version);
  fflush(stdout);
  _exit(g_failures ? 1 : 0);
}

/* Prints every mapped libnccl* or libbraid* file. */
static void printLoadedLibraries(void) {
  char line[4096], last[4096] = "";
  FILE* maps = fopen("/proc/self/maps", "r");
  if (!maps) return;
  while (fgets(line, sizeof(line), maps)) {
    char *path = strchr(line, '/'), *base;
    if (!path) continue;
    path[strcspn(path, "\n")] = '\0';
    base = strrchr(path, '/') + 1;
    if ((strncmp(base, "libnccl", 7) == 0 || strncmp(base, "libbraid", 8) == 0) &&
        strcmp(path, last) != 0) {
      printf("loaded: %s\n", path);
      snprintf(last, sizeof(last), "%s", path);
    }
  }
  fclose(maps);
}

int main(int argc, char** argv) {
  ncclUniqueId id;
  pid_t pids[64];
  int nranks, r, failed = 0, remaining;
  time_t deadline;

  nranks = argc > 1 ? atoi(argv[1]) : 2;
  if (nranks < 1 || nranks > 64) {
    fprintf(stderr, "usage: %s NRANKS (1..64)\n", argv[0]);
    return 2;
  }
  NCCL_OK(ncclGetUniqueId(&id));
  printLoadedLibraries();
  fflush(stdout);
  fflush(stderr);
  for (r = 0; r < nranks; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) runRank(r, nranks, id);
    if (pids[r] < 0) {
      perror("fork");
      return 2;
    }
  }

  deadline = time(NULL) + TIMEOUT_SECONDS;
  remaining = nranks;
  while (remaining > 0) {
    for (r = 0; r < nranks; ++r) {
      int status;
      if (pids[r] <= 0 || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "rank %d failed (%s %d)\n", r, WIFEXITED(status) ? "exit" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        failed = 1;
      }
      pids[r] = 0;
      remaining--;
    }
    if (remaining > 0 && time(NULL) > deadline) {
      for (r = 0; r < nranks; ++r)
        if (pids[r] > 0) {
          fprintf(stderr, "rank %d hung for %d s: killed\n", r, TIMEOUT_SECONDS);
          kill(pids[r], SIGKILL);
          waitpid(pids[r], NULL, 0);
        }
      return 1;
    }
    if (remaining > 0) {
      struct timespec ts = {0, 2000000};
      nanosleep(&ts, NULL);
    }
  }
  return failed;
}
