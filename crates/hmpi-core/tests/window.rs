//! One-sided communication across real ranks (1 to 7, more ranks than
//! cores): every operation under every synchronisation (fence, lock,
//! lock_all, post/start/complete/wait) against a model of each window's
//! content, on window memory in the node heap and outside it; derived
//! datatypes at the target; dynamic and shared windows; atomicity (all
//! ranks accumulating into one location, compare-and-swap as a lock); a
//! target that sleeps outside the library while origins work on its
//! window; post/start/complete/wait with ranks that receive nothing;
//! hints; bad arguments; the same operations with copy agents sharing
//! every put and get, and a bad copy-agent variable; small puts and gets
//! of every size up to 65 bytes at every alignment against a model, and
//! the store-to-load order a flushed put keeps for its thread's gets.

use hmpi_core::datatype::{BasicType, Datatype, UserDatatype};
use hmpi_core::info::Info;
use hmpi_core::launch::rank_tests;
use hmpi_core::prelude::*;
use hmpi_core::window::{assert, hint, Access, Flavor, Immediate, LockType, Win, Window};
use shmheap::ShmHeap;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

/// Slots each origin owns in every target's window.
const SLOTS: usize = 8;

/// Target `t`'s element `i` before the epoch.
fn init(t: usize, i: usize) -> u64 {
    (t * 1000 + i) as u64 * 3 + 1
}

/// The value origin `r` sends to target `t` for purpose `k`.
fn v(r: usize, t: usize, k: usize) -> u64 {
    (r * 100 + t * 10 + k) as u64 + 7
}

/// Where the window memory lives.
#[derive(Clone, Copy, Debug)]
enum Mem {
    /// `Window::allocate` (the node heap).
    Allocated,
    /// The caller's memory from the system allocator: outside the heap,
    /// reached through the kernel.
    System,
    /// The caller's memory in the node heap (a `Vec`).
    HeapVec,
}

#[derive(Clone, Copy, Debug)]
enum Sync {
    Fence,
    Lock,
    LockAll,
    Pscw,
}

/// Memory from the system allocator (never in the node heap).
struct SysBuf {
    ptr: *mut u64,
    len: usize,
}

impl SysBuf {
    fn new(len: usize) -> SysBuf {
        let l = Layout::array::<u64>(len.max(1)).unwrap();
        // SAFETY: a nonzero layout.
        let ptr = unsafe { System.alloc_zeroed(l) }.cast::<u64>();
        assert!(!ptr.is_null());
        assert!(!shmheap::is_shared(ptr), "system memory inside the heap");
        SysBuf { ptr, len }
    }
    fn slice(&mut self) -> &mut [u64] {
        // SAFETY: `len` zeroed u64 of our allocation.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for SysBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by `System` with this layout.
        unsafe {
            System.dealloc(
                self.ptr.cast(),
                Layout::array::<u64>(self.len.max(1)).unwrap(),
            )
        };
    }
}

/// Every operation of origin `me` on target `t`.
fn ops_on<A: Access<u64>>(e: &A, me: usize, t: usize, n: usize) {
    let ti = t as i32;
    let base = (me * SLOTS) as u64;
    e.put(ti, &[v(me, t, 0), v(me, t, 1)], base).unwrap();
    let mut got = [0u64; 1];
    e.get(ti, &mut got, base + 3).unwrap();
    assert_eq!(got[0], init(t, me * SLOTS + 3), "get from {t}");
    e.accumulate(ti, &[0xff], base + 3, SystemOperation::bitwise_xor())
        .unwrap();
    let mut old = [0u64; 1];
    e.get_accumulate(ti, &[5], &mut old, base + 4, SystemOperation::sum())
        .unwrap();
    assert_eq!(old[0], init(t, me * SLOTS + 4));
    let f = e
        .fetch_and_op(ti, v(me, t, 5), base + 5, SystemOperation::max())
        .unwrap();
    assert_eq!(f, init(t, me * SLOTS + 5));
    let c = e
        .compare_and_swap(ti, 77, init(t, me * SLOTS + 6), base + 6)
        .unwrap();
    assert_eq!(c, init(t, me * SLOTS + 6));
    let c = e.compare_and_swap(ti, 78, 12345, base + 7).unwrap();
    assert_eq!(c, init(t, me * SLOTS + 7), "a failed compare-and-swap");
    // The common location: everybody adds to it.
    e.accumulate(
        ti,
        &[me as u64 + 1],
        (n * SLOTS) as u64,
        SystemOperation::sum(),
    )
    .unwrap();
    let nop = e
        .fetch_and_op(ti, 0, (n * SLOTS) as u64 + 1, SystemOperation::no_op())
        .unwrap();
    assert_eq!(nop, init(t, n * SLOTS + 1));
}

/// What target `me`'s window holds after every origin's `ops_on`.
fn model(me: usize, n: usize) -> Vec<u64> {
    let mut m: Vec<u64> = (0..n * SLOTS + 2).map(|i| init(me, i)).collect();
    for r in 0..n {
        let b = r * SLOTS;
        m[b] = v(r, me, 0);
        m[b + 1] = v(r, me, 1);
        m[b + 3] ^= 0xff;
        m[b + 4] += 5;
        m[b + 5] = m[b + 5].max(v(r, me, 5));
        m[b + 6] = 77;
        m[n * SLOTS] += r as u64 + 1;
    }
    m
}

fn round(world: &SimpleCommunicator, mem: Mem, sync: Sync) {
    let (me, n) = (world.rank() as usize, world.size() as usize);
    let len = n * SLOTS + 2;
    let mut sys = SysBuf::new(len);
    let mut vec_mem = vec![0u64; len];
    let win = match mem {
        Mem::Allocated => Window::<u64>::allocate(world, len).unwrap(),
        Mem::System => Window::create(world, sys.slice()).unwrap(),
        Mem::HeapVec => Window::create(world, &mut vec_mem[..]).unwrap(),
    };
    assert_eq!(win.len(), len);
    let init_mine: Vec<u64> = (0..len).map(|i| init(me, i)).collect();
    win.write_local(&init_mine).unwrap();
    world.barrier().unwrap();
    // Targets in an order that differs per origin.
    let order: Vec<usize> = (0..n).map(|k| (me + k) % n).collect();
    match sync {
        Sync::Fence => {
            let e = win.fence().unwrap();
            for &t in &order {
                ops_on(&e, me, t, n);
            }
            e.end().unwrap();
        }
        Sync::Lock => {
            for (k, &t) in order.iter().enumerate() {
                let kind = if k % 2 == 0 {
                    LockType::Exclusive
                } else {
                    LockType::Shared
                };
                let e = win.lock(t as i32, kind).unwrap();
                // The lock epoch's operations, through the fixed-target
                // forms, the first of them; the rest through `Access`.
                e.flush().unwrap();
                e.unlock().unwrap();
                let e = win.lock_all().unwrap();
                ops_on(&e, me, t, n);
                e.flush(t as i32).unwrap();
                e.unlock_all().unwrap();
            }
            world.barrier().unwrap();
        }
        Sync::LockAll => {
            let e = win.lock_all().unwrap();
            for &t in &order {
                ops_on(&e, me, t, n);
            }
            e.flush_all().unwrap();
            e.unlock_all().unwrap();
            world.barrier().unwrap();
        }
        Sync::Pscw => {
            let g = world.group();
            let x = win.post(&g).unwrap();
            let e = win.start(&g).unwrap();
            for &t in &order {
                ops_on(&e, me, t, n);
            }
            e.complete().unwrap();
            x.wait().unwrap();
        }
    }
    assert_eq!(
        win.read_local(),
        model(me, n),
        "rank {me} of {n}, {mem:?}, {sync:?}"
    );
    win.free().unwrap();
}

/// The lock epoch's own forms (fixed target).
fn lock_forms(world: &SimpleCommunicator) {
    let (me, n) = (world.rank() as usize, world.size() as usize);
    let win = Window::<i64>::allocate(world, n + 2).unwrap();
    world.barrier().unwrap();
    let t = (me + 1) % n;
    let e = win.lock(t as i32, LockType::Exclusive).unwrap();
    e.put(&[me as i64 * 10], me as u64).unwrap();
    let mut g = [0i64];
    e.get(&mut g, me as u64).unwrap();
    assert_eq!(g[0], me as i64 * 10);
    e.accumulate(&[-3], me as u64, SystemOperation::sum())
        .unwrap();
    let mut r = [0i64];
    e.get_accumulate(&[-7], &mut r, n as u64, SystemOperation::min())
        .unwrap();
    assert!(r[0] <= 0);
    assert!(
        e.fetch_and_op(1, n as u64 + 1, SystemOperation::sum())
            .unwrap()
            >= 0
    );
    let _ = e.compare_and_swap(9, 0, n as u64 + 1).unwrap();
    e.flush().unwrap();
    e.unlock().unwrap();
    world.barrier().unwrap();
    let prev = (me + n - 1) % n;
    let l = win.read_local();
    assert_eq!(l[prev], prev as i64 * 10 - 3);
    assert_eq!(l[n], -7);
    world.barrier().unwrap();
    // The request-based forms under lock_all.
    let e = win.lock_all().unwrap();
    let (one, mut back, mut old) = ([100i64], [0i64], [0i64]);
    hmpi_core::request::scope(|s| {
        let a = e.immediate_accumulate(s, t as i32, &one, n as u64 + 1, SystemOperation::sum());
        a.unwrap().wait().unwrap();
        let mut g = e.immediate_get(s, t as i32, &mut back, me as u64).unwrap();
        assert!(g.test());
        e.immediate_get_accumulate(
            s,
            t as i32,
            &one,
            &mut old,
            n as u64 + 1,
            SystemOperation::no_op(),
        )
        .unwrap()
        .wait()
        .unwrap();
        e.immediate_put(s, t as i32, &one, me as u64)
            .unwrap()
            .wait()
            .unwrap();
    });
    assert_eq!(back[0], me as i64 * 10 - 3);
    assert!(old[0] >= 100);
    e.unlock_all().unwrap();
    world.barrier().unwrap();
    let l = win.read_local();
    assert_eq!(l[prev], 100);
    win.free().unwrap();
}

/// Derived datatypes at the target and the origin, heap and outside.
fn derived(world: &SimpleCommunicator) {
    let (me, n) = (world.rank() as usize, world.size() as usize);
    let int = Datatype::basic(BasicType::I32);
    // Every other element of 4: positions 0, 2, 4, 6.
    let evens: Datatype = UserDatatype::vector(4, 1, 2, &int).unwrap().into();
    for heap in [true, false] {
        let len = 16 * n;
        let bytes = (len * 4) as u64;
        let l = Layout::from_size_align(len * 4, 8).unwrap();
        // SAFETY: a nonzero layout, from the heap or the system.
        let p = unsafe {
            if heap {
                ShmHeap::new().alloc_zeroed(l)
            } else {
                System.alloc_zeroed(l)
            }
        };
        assert_eq!(shmheap::is_shared(p), heap);
        // SAFETY: `p` holds `bytes` bytes until freed below, after the
        // window.
        let win = unsafe { Win::create(world, p, bytes, 4) }.unwrap();
        win.lock_all(0).unwrap();
        for t in 0..n {
            let src: [i32; 4] = [1 + me as i32, 2, 3, 4];
            let d = (me * 16) as u64;
            // SAFETY: `src` holds 4 i32.
            unsafe { win.put(src.as_ptr().cast(), 4, &int, t as i32, d, 1, &evens) }.unwrap();
            // Odd positions: accumulate through a vector shifted by one.
            // SAFETY: as above.
            unsafe {
                win.accumulate(
                    src.as_ptr().cast(),
                    4,
                    &int,
                    t as i32,
                    d + 1,
                    1,
                    &evens,
                    SystemOperation::sum(),
                )
            }
            .unwrap();
            // The common location (16·n − 1 of every target) by everybody.
            let one = [me as i32 + 1];
            // SAFETY: one i32.
            unsafe {
                win.accumulate(
                    one.as_ptr().cast(),
                    1,
                    &int,
                    t as i32,
                    (len - 1) as u64,
                    1,
                    &int,
                    SystemOperation::sum(),
                )
            }
            .unwrap();
            let mut back = [0i32; 4];
            // SAFETY: `back` holds 4 i32.
            unsafe { win.get(back.as_mut_ptr().cast(), 4, &int, t as i32, d, 1, &evens) }.unwrap();
            assert_eq!(back, src, "vector get from {t} (heap {heap})");
            // A vector at the origin, dense at the target.
            let mut spread = [0i32; 8];
            // SAFETY: `spread` holds the 7 i32 the vector reaches.
            unsafe {
                win.get(
                    spread.as_mut_ptr().cast(),
                    1,
                    &evens,
                    t as i32,
                    d + 1,
                    4,
                    &int,
                )
            }
            .unwrap();
            // Target elements d+1..d+5 are [s0, s1, s1, s2] (odd positions
            // accumulated onto zero, even ones put).
            assert_eq!(spread, [src[0], 0, 2, 0, 2, 0, 3, 0], "(heap {heap})");
        }
        win.unlock_all().unwrap();
        world.barrier().unwrap();
        // SAFETY: `p` holds `len` i32; every origin is done (barrier).
        let mine = unsafe { std::slice::from_raw_parts(p.cast::<i32>(), len) }.to_vec();
        for r in 0..n {
            let b = r * 16;
            assert_eq!(
                mine[b..b + 8],
                [1 + r as i32, 1 + r as i32, 2, 2, 3, 3, 4, 4],
                "origin {r}'s piece at {me} (heap {heap})"
            );
        }
        assert_eq!(mine[len - 1], (n * (n + 1) / 2) as i32);
        win.free().unwrap();
        // SAFETY: allocated above with `l`; the window is freed.
        unsafe {
            if heap {
                ShmHeap::new().dealloc(p, l)
            } else {
                System.dealloc(p, l)
            }
        };
    }
}

/// Everybody adds into one location of rank 0, many times, at once; and
/// uses compare-and-swap on rank 0 as a lock around a get-then-put.
fn atomicity(world: &SimpleCommunicator) {
    let (me, n) = (world.rank() as usize, world.size() as usize);
    const ITERS: u64 = 300;
    for mem in [Mem::Allocated, Mem::System] {
        let mut sys = SysBuf::new(4);
        let win = match mem {
            Mem::System => Window::create(world, sys.slice()).unwrap(),
            _ => Window::<u64>::allocate(world, 4).unwrap(),
        };
        world.barrier().unwrap();
        let e = win.lock_all().unwrap();
        for i in 0..ITERS {
            e.accumulate(0, &[me as u64 + 1], 0, SystemOperation::sum())
                .unwrap();
            e.fetch_and_op(0, i, 3, SystemOperation::bitwise_xor())
                .unwrap();
            // The lock: 0 free, r + 1 held by r.
            while e.compare_and_swap(0, me as u64 + 1, 0, 1).unwrap() != 0 {
                std::thread::yield_now();
            }
            let mut x = [0u64];
            e.get(0, &mut x, 2).unwrap();
            e.put(0, &[x[0] + 1], 2).unwrap();
            e.flush(0).unwrap();
            let was = e.compare_and_swap(0, 0, me as u64 + 1, 1).unwrap();
            assert_eq!(was, me as u64 + 1, "the lock was held by {me}");
        }
        e.unlock_all().unwrap();
        world.barrier().unwrap();
        if me == 0 {
            let l = win.read_local();
            let per = (n * (n + 1) / 2) as u64;
            assert_eq!(l[0], per * ITERS, "sum of every accumulate ({mem:?})");
            assert_eq!(l[1], 0, "the lock is free");
            assert_eq!(
                l[2],
                n as u64 * ITERS,
                "increments under the lock ({mem:?})"
            );
            let x = (0..ITERS).fold(0, |a, i| a ^ i);
            assert_eq!(l[3], if n % 2 == 1 { x } else { 0 });
        }
        win.free().unwrap();
    }
}

/// Rank 0 sleeps outside the library while the others put into and get
/// from its window (lock, then post/start); each origin sets a flag after
/// its epoch, which rank 0 reads when it wakes: every origin finished
/// while it slept.
fn sleepy(world: &SimpleCommunicator) {
    let (me, n) = (world.rank() as usize, world.size() as usize);
    const NAP: Duration = Duration::from_millis(700);
    for mem in [Mem::Allocated, Mem::System] {
        let mut sys = SysBuf::new(n);
        let win = match mem {
            Mem::System => Window::create(world, sys.slice()).unwrap(),
            _ => Window::<u64>::allocate(world, n).unwrap(),
        };
        // Lock epochs.
        world.barrier().unwrap();
        if me == 0 {
            let t0 = Instant::now();
            std::thread::sleep(NAP);
            let done = win.flag(0).unwrap().load(Ordering::Acquire);
            assert_eq!(done, n as u64 - 1, "origins done during the target's sleep");
            assert!(t0.elapsed() >= NAP);
        } else {
            let e = win.lock(0, LockType::Shared).unwrap();
            e.put(&[me as u64 * 11], me as u64).unwrap();
            let mut g = [0u64];
            e.get(&mut g, me as u64).unwrap();
            assert_eq!(g[0], me as u64 * 11);
            e.unlock().unwrap();
            win.flag(0).unwrap().fetch_add(1, Ordering::AcqRel);
        }
        world.barrier().unwrap();
        if me == 0 {
            let l = win.read_local();
            assert!((1..n).all(|r| l[r] == r as u64 * 11));
            win.flag(0).unwrap().store(0, Ordering::Release);
        }
        // Post/start: the target posts, then sleeps instead of waiting.
        world.barrier().unwrap();
        if me == 0 {
            let others = world.group().exclude(&[0]).unwrap();
            let x = win.post(&others).unwrap();
            std::thread::sleep(NAP);
            let done = win.flag(0).unwrap().load(Ordering::Acquire);
            assert_eq!(done, n as u64 - 1, "PSCW origins done during the sleep");
            x.wait().unwrap();
            let l = win.read_local();
            assert!((1..n).all(|r| l[r] == r as u64 * 13));
        } else {
            let target = world.group().include(&[0]).unwrap();
            let e = win.start(&target).unwrap();
            e.put(0, &[me as u64 * 13], me as u64).unwrap();
            e.complete().unwrap();
            win.flag(0).unwrap().fetch_add(1, Ordering::AcqRel);
        }
        world.barrier().unwrap();
        win.free().unwrap();
    }
}

/// Post/start/complete/wait where every rank posts to everybody and
/// starts to everybody, but only even ranks send (to their successor):
/// ranks that receive nothing complete their wait.
fn pscw_some_receive_nothing(world: &SimpleCommunicator) {
    let (me, n) = (world.rank() as usize, world.size() as usize);
    let win = Window::<u64>::allocate(world, 1).unwrap();
    for round in 0..3u64 {
        let g = world.group();
        let x = win.post(&g).unwrap();
        let e = win.start(&g).unwrap();
        if me % 2 == 0 && n > 1 {
            e.put(((me + 1) % n) as i32, &[round * 100 + me as u64], 0)
                .unwrap();
        }
        e.complete().unwrap();
        let mut x = x;
        while !x.test().unwrap() {
            std::thread::yield_now();
        }
        x.wait().unwrap();
        let prev = (me + n - 1) % n;
        let l = win.read_local()[0];
        if n > 1 && prev % 2 == 0 && (prev + 1) % n == me {
            assert_eq!(l, round * 100 + prev as u64);
        }
        world.barrier().unwrap();
    }
    win.free().unwrap();
}

/// Dynamic windows: attach heap and system memory, address it by its
/// absolute address; shared windows: contiguous parts, direct stores.
fn dynamic_and_shared(world: &SimpleCommunicator) {
    let (me, n) = (world.rank() as usize, world.size() as usize);
    let win = Win::create_dynamic(world).unwrap();
    assert_eq!(win.flavor(), Flavor::Dynamic);
    let mut heap_part = vec![0u64; n];
    let mut sys = SysBuf::new(n);
    // SAFETY: both stay valid until detached below.
    unsafe {
        win.attach(heap_part.as_mut_ptr().cast(), (n * 8) as u64)
            .unwrap();
        win.attach(sys.ptr.cast(), (n * 8) as u64).unwrap();
    }
    // Overlap: refused.
    // SAFETY: not attached (refused).
    let e = unsafe { win.attach(heap_part.as_mut_ptr().cast::<u8>().add(4), 8) };
    assert!(matches!(e, Err(Error::RmaAttach { .. })), "{e:?}");
    let mine = [heap_part.as_ptr() as u64, sys.ptr as u64];
    let mut addrs = vec![0u64; 2 * n];
    world.all_gather_into(&mine[..], &mut addrs[..]).unwrap();
    let u64t = Datatype::basic(BasicType::U64);
    win.lock_all(0).unwrap();
    for t in 0..n {
        for (k, &a) in addrs[2 * t..2 * t + 2].iter().enumerate() {
            let val = [(me * 10 + k) as u64];
            let d = a + (me * 8) as u64;
            // SAFETY: one u64.
            unsafe { win.put(val.as_ptr().cast(), 1, &u64t, t as i32, d, 1, &u64t) }.unwrap();
            // Past the region: out of range.
            // SAFETY: as above.
            let e = unsafe {
                win.put(
                    val.as_ptr().cast(),
                    1,
                    &u64t,
                    t as i32,
                    a + (n * 8) as u64,
                    1,
                    &u64t,
                )
            };
            assert!(matches!(e, Err(Error::RmaRange { .. })), "{e:?}");
        }
    }
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    assert!((0..n).all(|r| heap_part[r] == (r * 10) as u64));
    assert!((0..n).all(|r| sys.slice()[r] == (r * 10 + 1) as u64));
    win.detach(heap_part.as_ptr().cast()).unwrap();
    assert!(matches!(
        win.detach(heap_part.as_ptr().cast()),
        Err(Error::RmaAttach { .. })
    ));
    win.detach(sys.ptr.cast()).unwrap();
    win.free().unwrap();

    // Shared: member r has r + 1 elements, right after member r - 1's.
    let sw = Window::<u64>::allocate_shared(world, me + 1).unwrap();
    assert_eq!(sw.raw().flavor(), Flavor::Shared);
    let (c0, p0) = sw.shared_query(0).unwrap();
    assert_eq!(c0, 1);
    for r in 0..n {
        let (c, p) = sw.shared_query(r as i32).unwrap();
        assert_eq!(c, r + 1);
        assert_eq!(p, p0.wrapping_add(r * (r + 1) / 2), "contiguous parts");
    }
    let f = sw.fence().unwrap();
    let next = (me + 1) % n;
    let (c, p) = sw.shared_query(next as i32).unwrap();
    for i in 0..c {
        // SAFETY: member `next`'s part holds `c` elements; only this rank
        // stores to it in this epoch.
        unsafe { p.add(i).write_volatile((me * 100 + i) as u64) };
    }
    f.fence().unwrap();
    let prev = (me + n - 1) % n;
    assert!(sw
        .read_local()
        .iter()
        .enumerate()
        .all(|(i, &x)| x == (prev * 100 + i) as u64));
    f.end().unwrap();
    sw.free().unwrap();
}

/// Bad arguments and bad epochs are error values.
fn bad(world: &SimpleCommunicator) {
    let (me, n) = (world.rank() as usize, world.size() as usize);
    let win = Window::<u64>::allocate(world, 4).unwrap();
    let raw = win.raw();
    assert_eq!(
        (raw.size(), raw.disp_unit(), raw.flavor()),
        (32, 8, Flavor::Allocate)
    );
    assert!(matches!(raw.shared_query(0), Err(Error::RmaFlavor { .. })));
    raw.set_name("w");
    assert_eq!(raw.name(), "w");
    assert_eq!(raw.group().size(), n as i32);
    let u64t = Datatype::basic(BasicType::U64);
    let x = [1u64; 8];
    // Outside an epoch.
    // SAFETY: `x` holds 8 u64.
    let e = unsafe { raw.put(x.as_ptr().cast(), 1, &u64t, 0, 0, 1, &u64t) };
    assert!(matches!(e, Err(Error::RmaSync { .. })), "{e:?}");
    assert!(matches!(raw.unlock(0), Err(Error::RmaSync { .. })));
    assert!(matches!(raw.complete(), Err(Error::RmaSync { .. })));
    assert!(matches!(raw.wait(), Err(Error::RmaSync { .. })));
    assert!(matches!(raw.flush(0), Err(Error::RmaSync { .. })));
    assert!(matches!(
        raw.lock(LockType::Shared, n as i32, 0),
        Err(Error::Rank { .. })
    ));
    assert!(matches!(raw.fence(1), Err(Error::Arg { .. })));
    let e = win.lock(me as i32, LockType::Exclusive).unwrap();
    // Twice on the same target; lock_all during a lock; free during a lock.
    assert!(matches!(
        raw.lock(LockType::Shared, me as i32, 0),
        Err(Error::RmaSync { .. })
    ));
    assert!(matches!(raw.lock_all(0), Err(Error::RmaSync { .. })));
    assert!(matches!(raw.fence(0), Err(Error::RmaSync { .. })));
    // Out of range: past the end, and a count that runs over it.
    assert!(matches!(e.put(&x[..1], 4), Err(Error::RmaRange { .. })));
    assert!(matches!(e.put(&x[..3], 2), Err(Error::RmaRange { .. })));
    assert!(matches!(
        e.put(&x[..1], u64::MAX),
        Err(Error::RmaRange { .. })
    ));
    // Mismatched signatures, mixed types, an operation the type lacks.
    // SAFETY: `x` holds 8 u64.
    let r = unsafe { raw.put(x.as_ptr().cast(), 2, &u64t, me as i32, 0, 1, &u64t) };
    assert!(matches!(r, Err(Error::Type { .. })), "{r:?}");
    let f64t = Datatype::basic(BasicType::F64);
    // SAFETY: as above.
    let r = unsafe {
        raw.accumulate(
            x.as_ptr().cast(),
            1,
            &f64t,
            me as i32,
            0,
            1,
            &u64t,
            SystemOperation::sum(),
        )
    };
    assert!(matches!(r, Err(Error::Type { .. })), "{r:?}");
    // SAFETY: as above.
    let r = unsafe {
        raw.accumulate(
            x.as_ptr().cast(),
            1,
            &f64t,
            me as i32,
            0,
            1,
            &f64t,
            SystemOperation::bitwise_and(),
        )
    };
    assert!(matches!(r, Err(Error::Op { .. })), "{r:?}");
    // Request-based forms need a passive epoch: fine here, refused after.
    // SAFETY: as above.
    unsafe { raw.rput(x.as_ptr().cast(), 1, &u64t, me as i32, 0, 1, &u64t) }.unwrap();
    e.unlock().unwrap();
    // SAFETY: as above.
    let r = unsafe { raw.rput(x.as_ptr().cast(), 1, &u64t, me as i32, 0, 1, &u64t) };
    assert!(matches!(r, Err(Error::RmaSync { .. })), "{r:?}");
    // NOCHECK: no lock words, the epoch still counts.
    raw.lock_all(assert::NOCHECK).unwrap();
    // SAFETY: as above.
    unsafe { raw.rput(x.as_ptr().cast(), 1, &u64t, me as i32, 0, 1, &u64t) }.unwrap();
    raw.flush_all().unwrap();
    raw.unlock_all().unwrap();
    // PROC_NULL is a no-op, in or out of an epoch.
    // SAFETY: as above.
    unsafe { raw.put(x.as_ptr().cast(), 1, &u64t, PROC_NULL, 1 << 40, 1, &u64t) }.unwrap();
    let f = win.fence().unwrap();
    drop(f);
    world.barrier().unwrap();
    win.free().unwrap();
    // A bad argument at one member fails the creation at every member
    // (nobody waits for the one that gave up).
    let unit = if me == 0 { 0 } else { 8 };
    match Win::allocate(world, 64, unit) {
        Err(Error::Arg { .. }) if me == 0 => {}
        Err(Error::Win { .. }) if me != 0 => {}
        other => panic!("rank {me}: {other:?}"),
    }
    let huge = if me == n - 1 { u64::MAX / 2 } else { 64 };
    let r = Win::allocate(world, huge, 8);
    assert!(r.is_err(), "rank {me}: an allocation failed elsewhere");
    // SAFETY: a null base is refused before it is used.
    let r = unsafe { Win::create(world, std::ptr::null_mut(), if me == 0 { 8 } else { 0 }, 1) };
    assert!(r.is_err());
    let r = Win::allocate_shared(world, 8, unit);
    assert!(r.is_err());
    // And the next window works.
    let w = Window::<u8>::allocate(world, 1).unwrap();
    w.free().unwrap();
}

/// Hints: what `info` reports, `no_locks` refusing locks, and values
/// the library does not use left alone.
fn hints(world: &SimpleCommunicator) {
    let me = world.rank() as usize;
    let win = Window::<u64>::allocate(world, 4).unwrap();
    let i = win.info();
    assert_eq!(i.get(hint::NO_LOCKS), Some("false"));
    assert_eq!(i.get(hint::ACCUMULATE_ORDERING), Some("rar,raw,war,waw"));
    assert_eq!(i.get(hint::SAME_DISP_UNIT), Some("true"));
    assert_eq!(i.get(hint::ALLOC_SHARED_NONCONTIG), None);
    let mut on = Info::new();
    on.set(hint::NO_LOCKS, "true").unwrap();
    // An order the library does not drop stays reported as all of them.
    on.set(hint::ACCUMULATE_ORDERING, "none").unwrap();
    win.set_info(&on).unwrap();
    let i = win.info();
    assert_eq!(i.get(hint::NO_LOCKS), Some("true"));
    assert_eq!(i.get(hint::ACCUMULATE_ORDERING), Some("rar,raw,war,waw"));
    match win.lock(0, LockType::Shared) {
        Err(Error::RmaSync { .. }) => {}
        other => panic!("{other:?}"),
    }
    match win.lock_all() {
        Err(Error::RmaSync { .. }) => {}
        other => panic!("{other:?}"),
    }
    // Fences still work; a value other than true/false is ignored.
    let f = win.fence().unwrap();
    f.put(0, &[me as u64], me as u64).unwrap();
    f.end().unwrap();
    let mut odd = Info::new();
    odd.set(hint::NO_LOCKS, "maybe").unwrap();
    win.set_info(&odd).unwrap();
    assert_eq!(win.info().get(hint::NO_LOCKS), Some("true"));
    let mut off = Info::new();
    off.set(hint::NO_LOCKS, "false").unwrap();
    win.set_info(&off).unwrap();
    let e = win.lock(0, LockType::Shared).unwrap();
    // Turning no_locks on while holding a lock is refused.
    let r = win.set_info(&on);
    assert!(matches!(r, Err(Error::RmaSync { .. })), "{r:?}");
    e.unlock().unwrap();
    world.barrier().unwrap();
    win.free().unwrap();
    // Different displacement units; a shared window reports contiguity.
    let unit = if me == 0 { 1 } else { 8 };
    let w = Win::allocate(world, 64, unit).unwrap();
    let same = if world.size() == 1 { "true" } else { "false" };
    assert_eq!(w.info().get(hint::SAME_DISP_UNIT), Some(same));
    w.free().unwrap();
    let s = Win::allocate_shared(world, 64, 8).unwrap();
    assert_eq!(s.info().get(hint::ALLOC_SHARED_NONCONTIG), Some("false"));
    s.free().unwrap();
}

/// `HMPI_COPY_AGENTS` is not a number: window creation fails at every
/// member with an error that names it, and the rank goes on.
fn bad_agents(world: &SimpleCommunicator) {
    let e = Window::<u64>::allocate(world, 8).unwrap_err().to_string();
    assert!(e.contains("HMPI_COPY_AGENTS"), "{e}");
    world.barrier().unwrap();
}

/// Rank 0 puts every size 0..=65 at every target offset 0..16 from every
/// origin offset 0..8 into rank 1's window (of bytes), flushes and gets
/// it back, against a model of the window; guard bytes around the get's
/// destination stay as they were; a run that ends past the window is
/// `RmaRange` however small. Rank 1 then checks its memory against the
/// same model.
fn small(world: &SimpleCommunicator) {
    const LEN: usize = 96;
    let me = world.rank();
    let win = Window::<u8>::allocate(world, LEN).unwrap();
    let pat = |size: usize, t: usize, o: usize, i: usize| -> u8 {
        (size * 131 + t * 17 + o * 7 + i * 29 + 1) as u8
    };
    let mut model = vec![0u8; LEN];
    if me == 0 {
        let e = win.lock_all().unwrap();
        for size in 0..=65 {
            for t in 0..16 {
                for o in 0..8 {
                    let mut src = [0xeeu8; 80];
                    for i in 0..size {
                        src[o + i] = pat(size, t, o, i);
                    }
                    e.put(1, &src[o..o + size], t as u64).unwrap();
                    e.flush(1).unwrap();
                    model[t..t + size].copy_from_slice(&src[o..o + size]);
                    let mut dst = [0x55u8; 96];
                    e.get(1, &mut dst[o + 8..o + 8 + size], t as u64).unwrap();
                    e.flush(1).unwrap();
                    assert_eq!(
                        &dst[o + 8..o + 8 + size],
                        &model[t..t + size],
                        "size {size}, target offset {t}, origin offset {o}"
                    );
                    assert!(
                        dst[..o + 8]
                            .iter()
                            .chain(&dst[o + 8 + size..])
                            .all(|&b| b == 0x55),
                        "a get of {size} bytes wrote outside its buffer"
                    );
                }
            }
            // One byte past the end, at every size.
            let src = vec![1u8; size.max(1)];
            let err = e.put(1, &src, (LEN - src.len() + 1) as u64).unwrap_err();
            assert!(matches!(err, Error::RmaRange { .. }), "{err}");
            let mut dst = vec![0u8; size.max(1)];
            let past = (LEN - dst.len() + 1) as u64;
            let err = e.get(1, &mut dst, past).unwrap_err();
            assert!(matches!(err, Error::RmaRange { .. }), "{err}");
        }
        let mut all = vec![0u8; LEN];
        e.get(1, &mut all, 0).unwrap();
        assert_eq!(all, model, "rank 1's window");
        e.unlock_all().unwrap();
        world.process_at_rank(1).send(&model[..]).unwrap();
    } else {
        let (m, _) = world.process_at_rank(0).receive_vec::<u8>().unwrap();
        model = m;
    }
    world.barrier().unwrap();
    if me == 1 {
        assert_eq!(win.read_local(), model, "rank 1's memory");
    }
    win.free().unwrap();
}

/// Store-to-load order after a flush (Dekker): in each round rank 0 puts
/// the round into x and rank 1 into y (both in rank 0's window), each
/// flushes and then gets the other's location; MPI completes each put at
/// its flush, so the two gets cannot both miss this round's value.
fn flushed_put_then_get(world: &SimpleCommunicator) {
    const ROUNDS: u64 = 20_000;
    let me = world.rank() as u64;
    let win = Window::<u64>::allocate(world, 2).unwrap();
    let e = win.lock_all().unwrap();
    let (mine, theirs) = (me, 1 - me);
    let mut missed = Vec::new();
    for round in 1..=ROUNDS {
        world.barrier().unwrap();
        e.put(0, &[round], mine).unwrap();
        e.flush(0).unwrap();
        let mut got = [0u64];
        e.get(0, &mut got, theirs).unwrap();
        e.flush(0).unwrap();
        missed.push(u8::from(got[0] < round));
    }
    e.unlock_all().unwrap();
    if me == 0 {
        let (other, _) = world.process_at_rank(1).receive_vec::<u8>().unwrap();
        let both = (0..ROUNDS as usize)
            .filter(|&i| missed[i] != 0 && other[i] != 0)
            .count();
        assert_eq!(both, 0, "rounds in which both gets missed the other's put");
    } else {
        world.process_at_rank(0).send(&missed[..]).unwrap();
    }
    win.free().unwrap();
}

fn ops_rank(u: Universe) {
    let world = u.world();
    for mem in [Mem::Allocated, Mem::System, Mem::HeapVec] {
        for sync in [Sync::Fence, Sync::Lock, Sync::LockAll, Sync::Pscw] {
            round(&world, mem, sync);
        }
    }
    lock_forms(&world);
}

fn main() {
    rank_tests::main(
        |role| {
            let u = hmpi_core::init().expect("init");
            let world = u.world();
            match role {
                "ops" => ops_rank(u),
                "derived" => derived(&world),
                "atomicity" => atomicity(&world),
                "sleepy" => sleepy(&world),
                "pscw" => pscw_some_receive_nothing(&world),
                "dynamic" => dynamic_and_shared(&world),
                "bad" => bad(&world),
                "hints" => hints(&world),
                "bad_agents" => bad_agents(&world),
                "small" => small(&world),
                "dekker" => flushed_put_then_get(&world),
                _ => return None,
            }
            Some(())
        },
        &[
            ("every_operation_under_every_synchronisation", || {
                for n in [1, 2, 3, 5, 7] {
                    let r = rank_tests::launch("ops", n, &[]);
                    rank_tests::assert_ran(&r, "ops");
                }
            }),
            ("derived_datatypes_in_and_outside_the_heap", || {
                for n in [1, 3] {
                    let r = rank_tests::launch("derived", n, &[]);
                    rank_tests::assert_ran(&r, "derived");
                }
            }),
            ("accumulates_and_compare_and_swap_are_atomic", || {
                for n in [2, 4] {
                    let r = rank_tests::launch("atomicity", n, &[]);
                    rank_tests::assert_ran(&r, "atomicity");
                }
            }),
            ("origins_do_not_wait_for_a_sleeping_target", || {
                for n in [2, 4] {
                    let r = rank_tests::launch("sleepy", n, &[]);
                    rank_tests::assert_ran(&r, "sleepy");
                }
            }),
            ("post_start_with_ranks_that_receive_nothing", || {
                for n in [1, 2, 3, 5] {
                    let r = rank_tests::launch("pscw", n, &[]);
                    rank_tests::assert_ran(&r, "pscw");
                }
            }),
            ("dynamic_and_shared_windows", || {
                for n in [1, 3] {
                    let r = rank_tests::launch("dynamic", n, &[]);
                    rank_tests::assert_ran(&r, "dynamic");
                }
            }),
            ("window_hints", || {
                for n in [1, 3] {
                    let r = rank_tests::launch("hints", n, &[]);
                    rank_tests::assert_ran(&r, "hints");
                }
            }),
            ("every_operation_with_copy_agents", || {
                let env = [
                    ("HMPI_COPY_AGENTS", "3".to_string()),
                    ("HMPI_COPY_MIN", "0".to_string()),
                ];
                for n in [2, 3] {
                    let r = rank_tests::launch("ops", n, &env);
                    rank_tests::assert_ran(&r, "ops");
                }
                let r = rank_tests::launch("derived", 3, &env);
                rank_tests::assert_ran(&r, "derived");
            }),
            ("a_bad_copy_agent_variable_fails_window_creation", || {
                let env = [("HMPI_COPY_AGENTS", "many".to_string())];
                let r = rank_tests::launch("bad_agents", 2, &env);
                rank_tests::assert_ran(&r, "bad_agents");
            }),
            ("small_puts_and_gets_at_every_size_and_alignment", || {
                let r = rank_tests::launch("small", 2, &[]);
                rank_tests::assert_ran(&r, "small");
            }),
            ("a_flushed_put_is_seen_by_the_other_origins_get", || {
                let r = rank_tests::launch("dekker", 2, &[]);
                rank_tests::assert_ran(&r, "dekker");
            }),
            ("bad_arguments_are_errors", || {
                for n in [1, 2] {
                    let r = rank_tests::launch("bad", n, &[]);
                    rank_tests::assert_ran(&r, "bad");
                }
            }),
        ],
    );
}
