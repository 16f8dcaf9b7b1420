//! The allocator inside one process (a world of one rank): sizes, alignment,
//! zeroing, realloc, threads, statistics.

use shmheap::ShmHeap;
use std::alloc::{GlobalAlloc, Layout};
use std::sync::Once;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        shmheap::attach_from_env().expect("attach a private node heap");
    });
}

fn fill(p: *mut u8, len: usize, seed: u8) {
    for i in 0..len {
        // SAFETY: the caller's block has `len` bytes.
        unsafe { *p.add(i) = seed.wrapping_add(i as u8) };
    }
}

fn check(p: *const u8, len: usize, seed: u8) {
    for i in 0..len {
        // SAFETY: the caller's block has `len` bytes.
        let v = unsafe { *p.add(i) };
        assert_eq!(v, seed.wrapping_add(i as u8), "byte {i} of {len}");
    }
}

#[test]
fn every_size_class_and_huge_sizes_round_trip() {
    setup();
    let mut sizes: Vec<usize> = (0..=64).map(|i| i * 16 + 1).collect();
    let mut s = 1024;
    while s <= 8 << 20 {
        sizes.extend([s - 1, s, s + 1, s + s / 3]);
        s *= 2;
    }
    let blocks: Vec<(*mut u8, Layout)> = sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| {
            let layout = Layout::from_size_align(size, 8).unwrap();
            // SAFETY: non-zero size.
            let p = unsafe { ALLOC.alloc(layout) };
            assert!(!p.is_null());
            assert!(shmheap::is_shared(p), "size {size} served from the heap");
            assert!(shmheap::usable_size(p).unwrap() >= size);
            fill(p, size, i as u8);
            (p, layout)
        })
        .collect();
    for (i, &(p, layout)) in blocks.iter().enumerate() {
        check(p, layout.size(), i as u8);
        // SAFETY: allocated above with this layout.
        unsafe { ALLOC.dealloc(p, layout) };
    }
}

#[test]
fn alignment_of_any_power_of_two() {
    setup();
    for shift in 0..=22 {
        let align = 1usize << shift;
        for size in [1, 24, 4000, 70_000, 3 << 20] {
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: non-zero size.
            let p = unsafe { ALLOC.alloc(layout) };
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0, "size {size} align {align}");
            fill(p, size, 7);
            check(p, size, 7);
            // SAFETY: allocated above.
            unsafe { ALLOC.dealloc(p, layout) };
        }
    }
}

#[test]
fn zeroed_memory_is_zero_even_when_reused() {
    setup();
    for size in [16, 1000, 100_000, 300 << 10, 1 << 20, 5 << 20] {
        for round in 0..3 {
            let layout = Layout::from_size_align(size, 16).unwrap();
            // SAFETY: non-zero size.
            let p = unsafe { ALLOC.alloc_zeroed(layout) };
            // SAFETY: the block has `size` bytes.
            let s = unsafe { std::slice::from_raw_parts(p, size) };
            assert!(s.iter().all(|&b| b == 0), "size {size} round {round}");
            fill(p, size, 0xA5);
            // SAFETY: allocated above.
            unsafe { ALLOC.dealloc(p, layout) };
        }
    }
}

#[test]
fn realloc_keeps_contents() {
    setup();
    let mut v: Vec<u64> = Vec::new();
    for i in 0..2_000_000u64 {
        v.push(i);
    }
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
    assert!(shmheap::is_shared(v.as_ptr()));
    v.truncate(10);
    v.shrink_to_fit();
    assert_eq!(v, (0..10).collect::<Vec<_>>());
}

#[test]
fn threads_allocate_and_free_each_others_blocks() {
    setup();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<Box<[u8]>>>();
    let producer = std::thread::spawn(move || {
        for round in 0..200u32 {
            let batch: Vec<Box<[u8]>> = (0..50)
                .map(|i| {
                    vec![(round as u8).wrapping_add(i as u8); 1 + (i * 97 + round as usize) % 5000]
                        .into_boxed_slice()
                })
                .collect();
            tx.send(batch).unwrap();
        }
    });
    let consumer = std::thread::spawn(move || {
        let mut n = 0;
        for (round, batch) in rx.iter().enumerate() {
            for (i, b) in batch.iter().enumerate() {
                assert!(b.iter().all(|&x| x == (round as u8).wrapping_add(i as u8)));
            }
            n += batch.len();
        }
        n
    });
    producer.join().unwrap();
    assert_eq!(consumer.join().unwrap(), 200 * 50);
}

#[test]
fn stats_see_allocations() {
    setup();
    let big = vec![1u8; 3 << 20];
    let during = shmheap::local_stats().unwrap();
    assert!(during.allocated_bytes >= 3 << 20);
    assert!(during.backed_bytes >= 3 << 20);
    assert!(during.span_bytes <= during.backed_bytes);
    drop(big);
    assert!(shmheap::stats(1).is_none(), "no rank 1 in a world of one");
}

#[test]
fn a_thread_asleep_in_a_wait_frees_a_cpu() {
    use shmheap::sync::futex::{futex_wait, futex_wake};
    use std::sync::atomic::{AtomicU32, Ordering};
    setup();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let word = AtomicU32::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            while word.load(Ordering::Acquire) == 0 {
                futex_wait(&word, 0, std::time::Duration::from_millis(50));
            }
        });
        // The one rank counts as asleep while its thread sleeps in a wait:
        // every CPU is free (awake, it leaves one fewer).
        let mut seen = 0;
        for _ in 0..10_000 {
            seen = shmheap::segment::free_cpus(cpus);
            if seen == cpus {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        word.store(1, Ordering::Release);
        futex_wake(&word, 1);
        assert_eq!(seen, cpus, "the sleeping thread was never counted");
    });
}
