//! Stress tests of the process-shared primitives (`sync::mcs`, `sync::mpsc`,
//! `sync::flag`) with real threads, and one test across `fork`ed processes
//! that share an anonymous `MAP_SHARED` mapping, which proves that the lock
//! and the queue work between processes and not only between threads.

use shmheap::sync::flag::{Counter, Flag};
use shmheap::sync::mcs::{McsLock, McsNode};
use shmheap::sync::mpsc::{MpscLink, MpscQueue, Pop};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Makes `n` threads start their loops together: each arrives, then yields
/// until all have arrived, so they are all running (not merely woken) and
/// really contend, even on a loaded two-core machine.
struct StartLine {
    arrived: AtomicUsize,
    n: usize,
}

impl StartLine {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(StartLine {
            arrived: AtomicUsize::new(0),
            n,
        })
    }

    fn wait(&self) {
        self.arrived.fetch_add(1, Ordering::SeqCst);
        while self.arrived.load(Ordering::SeqCst) < self.n {
            std::thread::yield_now();
        }
    }
}

// ---------------------------------------------------------------- MPSC ----

#[repr(C)]
struct Msg {
    link: MpscLink,
    producer: u32,
    seq: u32,
}

/// A raw pointer that may cross threads (the tests hand out disjoint nodes).
#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);
// SAFETY: the pointee is handed to exactly one thread at a time by the
// tests' protocols (producer until pushed, consumer once popped).
unsafe impl<T> Send for SendPtr<T> {}

#[test]
fn mpsc_four_producers_keep_their_order() {
    const PRODUCERS: u32 = 4;
    const PER_PRODUCER: u32 = 100_000;
    let queue = Arc::new(MpscQueue::new());
    let start = StartLine::new(PRODUCERS as usize + 1);
    // One contiguous block of nodes per producer; never moved while queued.
    let mut nodes: Vec<Vec<Msg>> = (0..PRODUCERS)
        .map(|p| {
            (0..PER_PRODUCER)
                .map(|i| Msg {
                    link: MpscLink::new(),
                    producer: p,
                    seq: i,
                })
                .collect()
        })
        .collect();
    let threads: Vec<_> = nodes
        .iter_mut()
        .map(|block| {
            let (queue, start) = (queue.clone(), start.clone());
            let base = SendPtr(block.as_mut_ptr());
            std::thread::spawn(move || {
                let base = base;
                start.wait();
                for i in 0..PER_PRODUCER as usize {
                    // SAFETY: `base` points to PER_PRODUCER nodes that this
                    // thread alone pushes, each once; `nodes` outlives the
                    // queue's use of them (the consumer drains everything
                    // before `nodes` is dropped); the queue sits in its Arc.
                    unsafe { queue.push(base.0.add(i).cast::<MpscLink>()) };
                }
            })
        })
        .collect();

    let mut next = [0u32; PRODUCERS as usize];
    let mut received = 0u64;
    let mut inconsistent = 0u64;
    start.wait();
    let deadline = Instant::now() + Duration::from_secs(120);
    while received < u64::from(PRODUCERS * PER_PRODUCER) {
        // SAFETY: this thread is the only consumer; all nodes are alive.
        match unsafe { queue.pop() } {
            Pop::Item(link) => {
                // SAFETY: every node pushed is a `Msg` with its link first.
                let msg = unsafe { &*link.cast::<Msg>() };
                assert_eq!(msg.seq, next[msg.producer as usize], "FIFO per producer");
                next[msg.producer as usize] += 1;
                received += 1;
            }
            Pop::Inconsistent => {
                inconsistent += 1;
                std::thread::yield_now();
            }
            Pop::Empty => std::thread::yield_now(),
        }
        assert!(Instant::now() < deadline, "stuck after {received} items");
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(next, [PER_PRODUCER; PRODUCERS as usize]);
    // SAFETY: still the only consumer.
    assert_eq!(unsafe { queue.pop() }, Pop::Empty);
    assert!(queue.is_empty());
    eprintln!("mpsc: {received} items, {inconsistent} inconsistent polls");
}

#[test]
fn mpsc_nodes_can_be_reused_and_queue_refills() {
    let queue = MpscQueue::new();
    let mut a = Msg {
        link: MpscLink::new(),
        producer: 0,
        seq: 0,
    };
    let pa = (&mut a as *mut Msg).cast::<MpscLink>();
    // SAFETY: one thread, which is the single consumer; `a` outlives its
    // stays in the queue and is not touched while queued; `queue` does not
    // move.
    unsafe {
        assert_eq!(queue.pop(), Pop::Empty);
        for _ in 0..3 {
            queue.push(pa);
            assert!(!queue.is_empty());
            assert_eq!(queue.pop(), Pop::Item(pa));
            assert!(queue.is_empty());
            assert_eq!(queue.pop_spin(), None);
        }
    }
}

#[test]
fn mpsc_zeroed_memory_and_init_are_empty_queues() {
    // SAFETY: the queue holds only atomics and pointers: all-zero is valid.
    let zeroed: MpscQueue = unsafe { std::mem::zeroed() };
    assert!(zeroed.is_empty());
    let mut slot = std::mem::MaybeUninit::<MpscQueue>::uninit();
    // SAFETY: `slot` is writable, aligned and not shared.
    unsafe { MpscQueue::init(slot.as_mut_ptr()) };
    // SAFETY: `init` wrote a queue.
    let queue = unsafe { slot.assume_init_ref() };
    // SAFETY: single consumer.
    assert_eq!(unsafe { queue.pop() }, Pop::Empty);
}

// ----------------------------------------------------------------- MCS ----

struct Guarded {
    lock: McsLock,
    count: UnsafeCell<u64>,
}

// SAFETY: `count` is only accessed while `lock` is held.
unsafe impl Sync for Guarded {}

#[test]
fn mcs_four_threads_exclude_each_other() {
    const THREADS: u64 = 4;
    const ITERS: u64 = 50_000;
    let shared = Arc::new(Guarded {
        lock: McsLock::new(),
        count: UnsafeCell::new(0),
    });
    let barrier = StartLine::new(THREADS as usize);
    let start = Instant::now();
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (shared, barrier) = (shared.clone(), barrier.clone());
            std::thread::spawn(move || {
                let node = McsNode::new();
                let mut queued = 0u64;
                barrier.wait();
                for i in 0..ITERS {
                    // SAFETY: contenders are threads of this process, the
                    // node is this thread's and the guard is dropped.
                    let _guard = match unsafe { shared.lock.try_lock(&node) } {
                        Some(guard) => guard,
                        None => {
                            queued += 1;
                            // SAFETY: as for `try_lock` above.
                            unsafe { shared.lock.lock(&node) }
                        }
                    };
                    // A read-modify-write with a window: without exclusion,
                    // updates get lost.
                    let count = shared.count.get();
                    // SAFETY: the lock is held.
                    let v = unsafe { count.read_volatile() };
                    for _ in 0..4 {
                        std::hint::spin_loop();
                    }
                    if i % 512 == 0 {
                        // Now and then let the others queue up behind us,
                        // even when the threads would otherwise run one
                        // after another on a busy machine.
                        std::thread::yield_now();
                    }
                    // SAFETY: the lock is held.
                    unsafe { count.write_volatile(v + 1) };
                }
                queued
            })
        })
        .collect();
    let queued: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(!shared.lock.is_locked());
    // SAFETY: all threads have been joined.
    assert_eq!(unsafe { *shared.count.get() }, THREADS * ITERS);
    eprintln!(
        "mcs: {} acquisitions ({queued} queued behind a holder) in {:?}",
        THREADS * ITERS,
        start.elapsed()
    );
}

#[test]
fn mcs_try_lock_and_is_locked() {
    let lock = McsLock::new();
    let (a, b) = (McsNode::new(), McsNode::new());
    // SAFETY: one thread, nodes on its stack, guards dropped.
    unsafe {
        let g = lock.try_lock(&a).expect("free lock");
        assert!(lock.is_locked());
        assert!(lock.try_lock(&b).is_none());
        drop(g);
        assert!(!lock.is_locked());
        let g = lock.lock(&b);
        drop(g);
        // A node can be reused.
        drop(lock.lock(&b));
    }
    // SAFETY: all-zero bytes are an unlocked lock.
    let zeroed: McsLock = unsafe { std::mem::zeroed() };
    assert!(!zeroed.is_locked());
}

/// A waiter parked long enough to fall asleep on its futex is woken by the
/// hand-off, and the lock is granted in arrival order.
#[test]
fn mcs_sleeping_waiters_are_woken_in_order() {
    let lock = Arc::new(McsLock::new());
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let node = McsNode::new();
    // SAFETY: threads of one process; guard dropped below.
    let guard = unsafe { lock.lock(&node) };
    let mut threads = Vec::new();
    for id in 0..3 {
        let (lock, order) = (lock.clone(), order.clone());
        threads.push(std::thread::spawn(move || {
            let node = McsNode::new();
            // SAFETY: as above.
            let _g = unsafe { lock.lock(&node) };
            order.lock().unwrap().push(id);
        }));
        // Let it queue up and go to sleep before the next one arrives.
        std::thread::sleep(Duration::from_millis(30));
    }
    let released = Instant::now();
    drop(guard);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2], "FIFO");
    assert!(released.elapsed() < Duration::from_secs(5));
}

// ---------------------------------------------------------- Flag/Counter ----

#[test]
fn flag_wakes_a_sleeping_waiter() {
    let flag = Arc::new(Flag::new());
    let woke = Arc::new(AtomicBool::new(false));
    let t = {
        let (flag, woke) = (flag.clone(), woke.clone());
        std::thread::spawn(move || {
            flag.wait();
            woke.store(true, Ordering::Relaxed);
        })
    };
    // Long enough for the waiter to pass spin and yield and sleep.
    std::thread::sleep(Duration::from_millis(100));
    assert!(!woke.load(Ordering::Relaxed));
    let set_at = Instant::now();
    flag.set();
    t.join().unwrap();
    assert!(woke.load(Ordering::Relaxed));
    assert!(set_at.elapsed() < Duration::from_secs(5));
    flag.clear();
    assert!(!flag.is_set());
}

#[test]
fn flag_ping_pong_many_rounds() {
    // Two flags passed back and forth: every set must be seen, no wake lost.
    let flags = Arc::new((Flag::new(), Flag::new()));
    const ROUNDS: u32 = 2_000;
    let t = {
        let flags = flags.clone();
        std::thread::spawn(move || {
            for _ in 0..ROUNDS {
                flags.0.wait();
                flags.0.clear();
                flags.1.set();
            }
        })
    };
    for _ in 0..ROUNDS {
        flags.0.set();
        flags.1.wait();
        flags.1.clear();
    }
    t.join().unwrap();
}

#[test]
fn counter_reaches_n_across_threads() {
    const THREADS: u64 = 4;
    const ADDS: u64 = 25_000;
    let counter = Arc::new(Counter::new());
    // Waiters for intermediate and final values, some of which sleep.
    let waiters: Vec<_> = [1, ADDS, THREADS * ADDS / 2, THREADS * ADDS]
        .into_iter()
        .map(|n| {
            let counter = counter.clone();
            std::thread::spawn(move || {
                assert!(counter.wait_until_at_least(n) >= n);
                assert!(counter.wait_until_greater(n - 1) >= n);
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    let barrier = StartLine::new(THREADS as usize);
    let adders: Vec<_> = (0..THREADS)
        .map(|_| {
            let (counter, barrier) = (counter.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..ADDS {
                    counter.add(1);
                }
            })
        })
        .collect();
    for t in adders.into_iter().chain(waiters) {
        t.join().unwrap();
    }
    assert_eq!(counter.get(), THREADS * ADDS);
}

#[test]
fn counter_wakes_a_sleeping_waiter() {
    let counter = Arc::new(Counter::new());
    let t = {
        let counter = counter.clone();
        std::thread::spawn(move || counter.wait_until_greater(6))
    };
    std::thread::sleep(Duration::from_millis(100));
    counter.add(6);
    std::thread::sleep(Duration::from_millis(20));
    assert!(!t.is_finished(), "6 is not greater than 6");
    counter.add(1);
    assert_eq!(t.join().unwrap(), 7);
}

// ------------------------------------------------------- across processes ----

const CHILDREN: usize = 3;
const LOCK_ITERS: u64 = 20_000;
const MSGS_PER_CHILD: u32 = 20_000;

/// What the processes share, placed at the start of the mapping.
#[repr(C)]
struct SharedArea {
    /// Set by the parent once every child is forked, so they contend.
    start: Flag,
    lock: McsLock,
    /// Guarded by `lock`; incremented non-atomically.
    count: u64,
    queue: MpscQueue,
    /// One MCS node per child (nodes must be in shared memory).
    lock_nodes: [McsNode; CHILDREN],
    /// Each child's messages.
    msgs: [[Msg; MSGS_PER_CHILD as usize]; CHILDREN],
}

/// A child's work: only atomics, futex and yield syscalls, then `_exit`.
///
/// # Safety
///
/// `area` is the shared mapping, initialised by the parent; `child` is this
/// child's index.
unsafe fn child_main(area: *mut SharedArea, child: usize) -> ! {
    // SAFETY: the mapping is valid and shared; fields are accessed through
    // raw pointers so no `&mut` aliases another process's accesses.
    unsafe {
        (*area).start.wait();
        let lock = &(*area).lock;
        let node = &(*area).lock_nodes[child];
        let count = std::ptr::addr_of_mut!((*area).count);
        let queue = &(*area).queue;
        let msgs = std::ptr::addr_of_mut!((*area).msgs[child]).cast::<Msg>();
        for i in 0..LOCK_ITERS.max(u64::from(MSGS_PER_CHILD)) {
            if i < LOCK_ITERS {
                let guard = lock.lock(node);
                // A plain read-modify-write: lost updates mean no exclusion.
                let v = count.read_volatile();
                count.write_volatile(v + 1);
                drop(guard);
            }
            if i < u64::from(MSGS_PER_CHILD) {
                let m = msgs.add(i as usize);
                (*m).producer = child as u32;
                (*m).seq = i as u32;
                queue.push(m.cast::<MpscLink>());
            }
        }
        libc::_exit(0)
    }
}

#[test]
fn mcs_and_mpsc_work_across_forked_processes() {
    let len = std::mem::size_of::<SharedArea>();
    // SAFETY: a fresh anonymous shared mapping; arguments are valid.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED, "mmap");
    // Zero-filled: the lock, the queue, the nodes and the count are all in
    // their initial state without any initialisation.
    let area = p.cast::<SharedArea>();

    let mut pids = Vec::new();
    for child in 0..CHILDREN {
        // SAFETY: the child only touches the shared mapping with atomics,
        // futex/yield/nanosleep syscalls and plain stores, then `_exit`s; it
        // never allocates, locks a std mutex or unwinds.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            // SAFETY: `area` is the shared, initialised mapping.
            unsafe { child_main(area, child) };
        }
        pids.push(pid);
    }

    // SAFETY: the mapping is valid; `Flag` is shared by design.
    unsafe { &(*area).start }.set();
    // The parent consumes concurrently and checks FIFO per child.
    let mut next = [0u32; CHILDREN];
    let mut received = 0u64;
    let total = (CHILDREN as u64) * u64::from(MSGS_PER_CHILD);
    let deadline = Instant::now() + Duration::from_secs(120);
    // SAFETY: the mapping stays valid until the munmap below.
    let queue = unsafe { &(*area).queue };
    while received < total {
        // SAFETY: the parent is the only consumer; nodes are in the mapping.
        match unsafe { queue.pop() } {
            Pop::Item(link) => {
                // SAFETY: every node is a `Msg` in the mapping, link first,
                // written by its producer before the push.
                let msg = unsafe { &*link.cast::<Msg>() };
                let producer = msg.producer as usize;
                assert_eq!(msg.seq, next[producer], "FIFO per producer process");
                next[producer] += 1;
                received += 1;
            }
            Pop::Empty | Pop::Inconsistent => std::thread::yield_now(),
        }
        assert!(Instant::now() < deadline, "stuck after {received} items");
    }
    for pid in pids {
        let mut status = 0;
        // SAFETY: `pid` is our child; `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(r, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child {pid} status {status:#x}"
        );
    }
    // SAFETY: every child has exited; the parent alone reads the count.
    let count = unsafe { std::ptr::addr_of!((*area).count).read_volatile() };
    assert_eq!(count, CHILDREN as u64 * LOCK_ITERS, "mutual exclusion");
    // SAFETY: all children have exited; the lock is only read.
    assert!(!unsafe { &(*area).lock }.is_locked());
    assert!(queue.is_empty());
    // SAFETY: `p`/`len` are the mapping made above; nothing uses it any more.
    assert_eq!(unsafe { libc::munmap(p, len) }, 0);
}

// ---------------------------------------------------------------- layout ----

/// The shared-memory layouts other ranks (and other builds) rely on.
#[test]
fn layouts_are_as_documented() {
    use std::mem::{align_of, size_of};
    assert_eq!((size_of::<McsLock>(), align_of::<McsLock>()), (8, 8));
    assert_eq!((size_of::<McsNode>(), align_of::<McsNode>()), (64, 64));
    assert_eq!((size_of::<MpscLink>(), align_of::<MpscLink>()), (8, 8));
    // Consumer line (head, stub, debug word), then the producers' line.
    assert_eq!((size_of::<MpscQueue>(), align_of::<MpscQueue>()), (128, 64));
    assert_eq!((size_of::<Flag>(), align_of::<Flag>()), (4, 4));
    assert_eq!((size_of::<Counter>(), align_of::<Counter>()), (16, 8));
}
