/* SPIN model of the GPU kernels' flag/epoch protocol (csrc/kernels/barrier.cuh) together with the
 * backend's reuse of one workspace buffer per rank across calls (csrc/backend/gpu/
 * gpu_kernel_session.h: each call copies its input into this rank's buffer on the comm stream,
 * then launches; the next call's copy-in overwrites the same buffer). What it abstracts and
 * proves: README.md in this folder.
 *
 * W ranks with up to B blocks each run K calls. The call sequence (kernel and grid of every call)
 * is chosen nondeterministically once and is the same on every rank, as the host guarantees (every
 * rank issues the same collectives; the grid is a pure function of the arguments). Per call k,
 * rank r copies in (every cell of its buffer := 2k; broadcast: the root only), then each block b
 * of the launch runs begin (read epochs[b]), sync, work, [sync, work,] sync, end (epochs[b] :=
 * epoch). Buffer cells hold tags instead of data: 2k = call k's input, 2k+1 = call k's two-shot
 * stage-1 result. Every read asserts the tag its call expects, so reading the previous or the next
 * call's data, or an unreduced two-shot slice, is an assertion violation.
 *
 * Flags and epochs hold their unbounded values (at most 3K) so that assertions can state the
 * truth, but the protocol only ever compares their low EBITS bits by the signed difference, as
 * the kernel does with 32 bits. EBITS=2 wraps the counters every 4 barriers.
 *
 * Parameters (spin -DNAME=value): W (2 or 3), B (1 or 2), K, EBITS, KINDS (bit mask of the
 * kernels calls may use), MUTANT (0: the real protocol; 1-10 below), DATA_ONLY (check only the
 * data assertions and deadlock, so that a mutant can fail only by wrong data or a hang).
 */

#ifndef W
#define W 2
#endif
#ifndef B
#define B 1
#endif
#ifndef K
#define K 3
#endif
#ifndef EBITS
#define EBITS 2
#endif
#ifndef KINDS
#define KINDS 127
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

#define MASK ((1 << EBITS) - 1)
#define HALF (1 << (EBITS - 1))

/* The kernels of csrc/kernels/reduce_kernels.cuh and copy_kernel.cuh, as the backend uses them. */
#define ONESHOT 0  /* directReduceKernel, srcOffset 0: sync, read all W buffers, sync */
#define RSCATTER 1 /* directReduceKernel, srcOffset r*count: reads slice r of all W buffers */
#define TWOSHOT 2  /* twoShotKernel: sync, stage 1, sync, stage 2, sync */
#define GATHER 3   /* pullCopyKernel, all-gather: block b pulls sources b, b+grid, ... */
#define ALLTOALL 4 /* pullCopyKernel, all-to-all: the same, chunk r of each source */
#define BCAST 5    /* pullCopyKernel, broadcast: only root[k] copies in; parts of its buffer */
#define TWOSHOT_IP 6 /* twoShotKernel with output = own buffer: stage 2 also writes slices s != r */
#define HAS(kd) ((KINDS >> (kd)) & 1)
#define IS_COPY(kd) ((kd) == GATHER || (kd) == ALLTOALL || (kd) == BCAST)
#define IS_TWOSHOT(kd) ((kd) == TWOSHOT || (kd) == TWOSHOT_IP)

byte kind[K + 1]; /* indexed by call, 1..K */
byte grid[K + 1];
byte root[K + 1]; /* broadcast calls: the root */
byte expect[(K + 2) * B]; /* expect[k*B+b]: barriers block b ran in calls 1..k-1 */

/* FLAG(q, b, p) = flags[q]->rows[b].fromPeer[p]: in rank q's flag area, written only by block b
 * of rank p, read only by block b of rank q. */
byte flag[W * B * W];
#define FLAG(q, b, p) flag[((q) * B + (b)) * W + (p)]
byte epochs[W * B]; /* rank r's handle.epochs[b] */

/* Rank r's workspace buffer: W slices (two-shot slices, reduce-scatter and all-to-all chunks) of
 * B parts each (part q belongs to block q mod grid). */
byte buf[W * W * B];
#define BUF(r, s, q) buf[((r) * W + (s)) * B + (q)]

byte launched[W]; /* rank r's stream has launched call launched[r] */
byte fin[W * B];  /* block b of rank r has finished call fin[r*B+b] */

/* ---- the comparison of waitFlagAtLeast, and the mutants ---- */
#if MUTANT == 8
/* Mutant 8: unsigned comparison instead of the signed difference: wrong once counters wrap. */
#define ARRIVED(v, e) (((v) & MASK) >= ((e) & MASK))
#else
/* int32_t(flag - value) >= 0, on EBITS-bit counters */
#define ARRIVED(v, e) ((((v) - (e)) & MASK) < HALF)
#endif

/* Mutants 1-7 drop the wait (not the signal) of one barrier of one kernel: barrier i of the
 * kernel running call k. */
#if MUTANT == 1
#define SKIP(i) ((kind[k] == ONESHOT || kind[k] == RSCATTER) && (i) == 1)
#elif MUTANT == 2
#define SKIP(i) ((kind[k] == ONESHOT || kind[k] == RSCATTER) && (i) == 2)
#elif MUTANT == 3
#define SKIP(i) (IS_TWOSHOT(kind[k]) && (i) == 1)
#elif MUTANT == 4
#define SKIP(i) (IS_TWOSHOT(kind[k]) && (i) == 2)
#elif MUTANT == 5
#define SKIP(i) (IS_TWOSHOT(kind[k]) && (i) == 3)
#elif MUTANT == 6
#define SKIP(i) (IS_COPY(kind[k]) && (i) == 1)
#elif MUTANT == 7
#define SKIP(i) (IS_COPY(kind[k]) && (i) == 2)
#else
#define SKIP(i) false
#endif

/* Mutant 9: end() does not persist the epoch. Mutant 10: the copy-in waits for block 0 of the
 * previous kernel only, not for the whole kernel (the stream order broken). */
#define PERSIST (MUTANT != 9)
#define COPYIN_WAITS (MUTANT != 10)

#ifdef DATA_ONLY
#define CHECK(c) skip
#else
#define CHECK(c) assert(c)
#endif

/* When a wait ends, the flag is the awaited value or one past it: a peer that has signalled
 * barrier e+1 cannot signal e+2 before passing its wait for this block's e+1. With the value e-1
 * seen before arrival that is a window of three, which 2 bits (and so 32) tell apart. */
#define IN_WINDOW(v, e) ((v) >= (e) && (v) <= (e) + 1)

/* First half of BlockBarrier::sync(): ++epoch; thread t != r stores it into peer t's row. */
inline signal() {
  e++;
  CHECK(FLAG((r + 1) % W, b, r) + 1 == e); /* one writer, one step per barrier */
  FLAG((r + 1) % W, b, r) = e;
#if W > 2
  CHECK(FLAG((r + 2) % W, b, r) + 1 == e);
  FLAG((r + 2) % W, b, r) = e;
#endif
}

/* Second half: thread t != r waits for peer t's store into this rank's row; the block goes on once
 * all have arrived (flags only grow, so one guard over all peers equals W-1 waits). A wait that
 * never ends is an invalid end state; one that ends is checked against the unbounded values. */
#if W > 2
#define ARRIVED_ALL (ARRIVED(FLAG(r, b, (r + 1) % W), e) && ARRIVED(FLAG(r, b, (r + 2) % W), e))
#define WINDOW_ALL (IN_WINDOW(FLAG(r, b, (r + 1) % W), e) && IN_WINDOW(FLAG(r, b, (r + 2) % W), e))
#else
#define ARRIVED_ALL ARRIVED(FLAG(r, b, (r + 1) % W), e)
#define WINDOW_ALL IN_WINDOW(FLAG(r, b, (r + 1) % W), e)
#endif
#define AWAIT(i) (SKIP(i) || ARRIVED_ALL) -> CHECK(SKIP(i) || WINDOW_ALL)

/* Reads of rank src's slice, the parts of this block (q mod grid == b), expecting tag. */
inline readParts(src, slice, tag) {
  q = b;
  do
  :: q < B -> assert(BUF(src, slice, q) == tag); q = q + grid[k]
  :: else -> break
  od
}

/* Reads of all parts of rank src's slice (copy kernel items cover a whole source chunk). */
inline readSlice(src, slice) {
  q = 0;
  do
  :: q < B -> assert(BUF(src, slice, q) == 2 * k); q++
  :: else -> break
  od
}

/* The work after the start barrier. Reads are pure, so one step just before the next signal
 * stands for reads spread over the whole interval: any write that could land inside the interval
 * can still land before this step (the reader waits for nothing until it signals). */
inline work1() {
  d_step {
    if
    :: kind[k] == ONESHOT -> /* this block's part of every slice of every buffer */
      p = 0;
      do
      :: p < W -> s = 0;
        do
        :: s < W -> readParts(p, s, 2 * k); s++
        :: else -> break
        od;
        p++
      :: else -> break
      od
    :: kind[k] == RSCATTER || IS_TWOSHOT(kind[k]) -> /* this block's part of slice r, all buffers */
      p = 0;
      do
      :: p < W -> readParts(p, r, 2 * k); p++
      :: else -> break
      od;
      if
      :: IS_TWOSHOT(kind[k]) -> /* stage 1 stores in place into slice r of this rank's buffer */
        q = b;
        do
        :: q < B -> BUF(r, r, q) = 2 * k + 1; q = q + grid[k]
        :: else -> break
        od
      :: else -> skip
      fi
    :: kind[k] == GATHER || kind[k] == ALLTOALL -> /* sources j = b, b+grid, ...: peer r+j */
      j = b;
      do
      :: j < W ->
        if
        :: kind[k] == GATHER -> /* its whole buffer */
          s = 0;
          do
          :: s < W -> readSlice((r + j) % W, s); s++
          :: else -> break
          od
        :: else -> readSlice((r + j) % W, r) /* its chunk r */
        fi;
        j = j + grid[k]
      :: else -> break
      od
    :: kind[k] == BCAST -> /* this block's parts of the root's buffer */
      s = 0;
      do
      :: s < W -> readParts(root[k], s, 2 * k); s++
      :: else -> break
      od
    fi;
    p = 0; s = 0; q = 0; j = 0 /* scratch back to 0: no two states differ by it */
  }
}

/* Two-shot stage 2: this block's part of slice s from rank s, which rank s's block b reduced. In
 * place, it lands in slice s of this rank's own buffer, which rank s read in its stage 1. */
inline stage2() {
  d_step {
    s = 0;
    do
    :: s < W ->
      readParts(s, s, 2 * k + 1);
      if
      :: kind[k] == TWOSHOT_IP && s != r ->
        q = b;
        do
        :: q < B -> BUF(r, s, q) = 2 * k + 1; q = q + grid[k]
        :: else -> break
        od
      :: else -> skip
      fi;
      s++
    :: else -> break
    od;
    s = 0; q = 0
  }
}

/* The host's copyIn: cudaMemcpyAsync into buffers[rank] on the comm stream, after the previous
 * kernel (stream order), before this call's launch. */
inline copyIn() {
  d_step {
    if
    :: kind[k] != BCAST || r == root[k] ->
      q = 0;
      do
      :: q < W * B -> buf[r * W * B + q] = 2 * k; q++
      :: else -> break
      od;
      q = 0
    :: else -> skip
    fi
  }
}

/* end(): persist the epoch for the next launch; call k is over for this block. */
inline finish() {
  if
  :: PERSIST -> epochs[r * B + b] = e
  :: else -> skip
  fi;
  e = 0;
  fin[r * B + b] = k;
  k++
}

/* Block b of rank r over the K calls. Block 0 also stands for rank r's stream: it copies in once
 * the whole previous kernel has finished, then launches. Steps touching only this block's own
 * state (epochs[b], e, fin, launch bookkeeping) are merged into neighbouring steps. */
proctype Block(byte r; byte b) {
  byte k = 1;
  byte e; /* BlockBarrier::epoch_ */
  byte p, s, q, j; /* scratch, always 0 between steps */
  do
  :: k > K -> break
  :: k <= K && grid[k] <= b -> /* not part of call k's launch */
    atomic { launched[r] >= k -> fin[r * B + b] = k; k++ }
  :: k <= K && grid[k] > b ->
    atomic {
      if
      :: b == 0 ->
#if B > 1
        (!COPYIN_WAITS || fin[r * B + 1] + 1 >= k);
#endif
        copyIn();
        launched[r] = k
      :: else -> launched[r] >= k
      fi;
      e = epochs[r * B + b]; /* begin() */
      CHECK(e == expect[k * B + b]);
      signal() /* start barrier */
    }
    atomic { AWAIT(1) };
    atomic { work1(); signal() }; /* end barrier, or two-shot's middle one */
    if
    :: IS_TWOSHOT(kind[k]) ->
      atomic { AWAIT(2) };
      atomic { stage2(); signal() }; /* end barrier */
      atomic { AWAIT(3) -> finish() }
    :: else ->
      atomic { AWAIT(2) -> finish() }
    fi
  od
}

init {
  byte k = 1, b, r;
  atomic {
    do
    :: k <= K ->
      if
      :: HAS(ONESHOT) -> kind[k] = ONESHOT
      :: HAS(RSCATTER) -> kind[k] = RSCATTER
      :: HAS(TWOSHOT) -> kind[k] = TWOSHOT
      :: HAS(TWOSHOT_IP) -> kind[k] = TWOSHOT_IP
      :: HAS(GATHER) -> kind[k] = GATHER
      :: HAS(ALLTOALL) -> kind[k] = ALLTOALL
      :: HAS(BCAST) -> kind[k] = BCAST;
        if
        :: root[k] = 0
        :: root[k] = 1
#if W > 2
        :: root[k] = 2
#endif
        fi
      fi;
      if
      :: grid[k] = 1
      :: B > 1 -> grid[k] = B
      fi;
      /* the epoch every rank's block b must start call k+1 with */
      b = 0;
      do
      :: b < B ->
        expect[(k + 1) * B + b] = expect[k * B + b] +
            (grid[k] > b -> (IS_TWOSHOT(kind[k]) -> 3 : 2) : 0);
        b++
      :: else -> break
      od;
      k++
    :: else -> break
    od;
    r = 0;
    do
    :: r < W ->
      b = 0;
      do
      :: b < B -> run Block(r, b); b++
      :: else -> break
      od;
      r++
    :: else -> break
    od;
    k = 0; b = 0; r = 0
  };
  /* Once every block has finished: all ranks' epochs agree with the calls made, and every flag
   * holds the last barrier of its writer (nothing was lost or left in flight). */
  _nr_pr == 1;
  d_step {
    r = 0;
    do
    :: r < W ->
      b = 0;
      do
      :: b < B ->
        CHECK(epochs[r * B + b] == expect[(K + 1) * B + b]);
        k = 0;
        do
        :: k < W -> CHECK(k == r || FLAG(k, b, r) == expect[(K + 1) * B + b]); k++
        :: else -> break
        od;
        b++
      :: else -> break
      od;
      r++
    :: else -> break
    od;
    k = 0; b = 0; r = 0
  }
}
